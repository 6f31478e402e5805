"""Release guards: what an index and an admin get. Fast, no build (scripts/release_check.sh
builds the sdist and wheel and installs them in an empty directory).

- metadata: an SPDX licence with its files, classifiers, one version, an entry point for
  every built-in policy, floors equal to the tested minimums and pinned by the lock;
- package data: every admin file ships in the wheel, the sdist carries the tests;
- ``gpufair admin write-files``: what it writes, filled in for this install, and that the
  hook wrapper it writes really records an event; the unit passes ``systemd-analyze``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import gpufair
from gpufair.cli.main import main
from gpufair.deploy import files as deploy
from gpufair.policy.registry import BUILTIN

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
ME = pwd.getpwuid(os.getuid()).pw_name


def pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def requirements(extra: str | None = None) -> list[Requirement]:
    found = PROJECT["dependencies"] if extra is None else \
        PROJECT["optional-dependencies"][extra]
    return [Requirement(text) for text in found]


# ---- metadata -------------------------------------------------------------------------------
def test_the_licence_is_an_spdx_expression_with_its_files() -> None:
    assert PROJECT["license"] == "Apache-2.0 AND MIT"   # code; the bundled upstream data
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])   # PEP 639
    for pattern in PROJECT["license-files"]:
        assert list(REPO.glob(pattern)), pattern
    assert "Apache License\n                           Version 2.0" in \
        (REPO / "LICENSE").read_text(encoding="utf-8")
    assert all("MIT License" in p.read_text(encoding="utf-8")
               for p in REPO.glob("gpufair/data/LICENSE-*.txt"))


def test_metadata_an_index_shows() -> None:
    assert {"name", "description", "readme", "requires-python", "authors", "keywords",
            "classifiers"} <= set(PROJECT)
    floor = re.fullmatch(r">=3\.(\d+)", PROJECT["requires-python"]).group(1)
    assert f"Programming Language :: Python :: 3.{floor}" in PROJECT["classifiers"]
    assert "Operating System :: POSIX :: Linux" in PROJECT["classifiers"]


def test_the_version_is_written_once() -> None:
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == \
        {"attr": "gpufair.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?",
                        gpufair.__version__)
    out = subprocess.run([sys.executable, "-m", "gpufair", "--version"], capture_output=True,
                         text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert out == f"gpufair {gpufair.__version__}\n"


def test_every_builtin_policy_has_its_entry_point() -> None:
    assert PROJECT["entry-points"]["gpufair.policies"] == BUILTIN
    assert PROJECT["scripts"] == {"gpufair": "gpufair.cli.main:main"}


def test_the_floors_are_the_tested_minimums_and_the_lock_satisfies_them() -> None:
    minimum = pins(REPO / "ci" / "constraints-min.txt")
    lock = pins(REPO / "ci" / "constraints.txt")
    frozen_on = re.search(r"Frozen on Python (\d+\.\d+)",
                          (REPO / "ci" / "constraints.txt").read_text(encoding="utf-8")).group(1)
    for req in requirements() + [r for r in requirements("test") if r.name != "ruff"]:
        name = req.name.lower().replace("_", "-")
        floors = [s.version for s in req.specifier if s.operator == ">="]
        assert len(floors) == 1, f"{req}: one floor"
        assert minimum.get(name) is not None, f"{name} missing in constraints-min.txt"
        assert [int(x) for x in minimum[name].split(".")][:3] == \
            [int(x) for x in [*floors[0].split("."), "0", "0"]][:3], (name, floors[0])
        if req.marker is None or req.marker.evaluate({"python_version": frozen_on}):
            assert name in lock and req.specifier.contains(lock[name], prereleases=True), \
                f"{name}=={lock.get(name)} (ci/constraints.txt) breaks {req}"


def test_solver_floors_and_caps() -> None:
    """The floors the breakages set (pyproject.toml says why); caps on the solver stack."""
    declared = {r.name: str(r.specifier) for r in requirements()}
    assert declared["highspy"] == "<2,>=1.12"
    assert declared["gurobipy"] == "<14,>=13"
    for name in ("numpy", "scipy", "ecos"):
        assert "<" in declared[name], name


# ---- package data and the sdist ----------------------------------------------------------
def test_every_admin_file_is_package_data() -> None:
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["gpufair.deploy"]
    shipped = [p.name for p in (REPO / "gpufair" / "deploy").iterdir()
               if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert len(shipped) >= 7
    for name in shipped:
        assert any(fnmatch.fnmatch(name, g) for g in globs), f"{name} is not package data"
    for name in ("gpufair.toml", "gpufair.service.in", "gpufair.tmpfiles.in", "gpufair-hook",
                 "job_submit.lua", "slurm.conf.gpufair", "snapshot.example.json"):
        assert deploy.packaged(name)   # found through importlib.resources, as installed


def test_the_sdist_carries_what_its_tests_need() -> None:
    grafted = {line.split()[1] for line in
               (REPO / "MANIFEST.in").read_text(encoding="utf-8").splitlines()
               if line.startswith("graft ")}
    assert {"tests", "scripts", "bench", "docs", "ci"} <= grafted


def test_the_default_build_is_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """No extension unless asked for: the wheel is then py3-none-any."""
    source = (REPO / "setup.py").read_text(encoding="utf-8")
    assert 'os.environ.get("GPUFAIR_NATIVE_SCANNER", "0")' in source
    assert "] if NATIVE else []" in source


# ---- gpufair admin write-files ------------------------------------------------------------
@pytest.fixture
def written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path, str]:
    root, hook_dir = tmp_path / "root", tmp_path / "spool"
    status = main(["admin", "write-files", "--root", str(root), "--user", ME,
                   "--hook-dir", str(hook_dir)])
    assert status == 0
    return root, hook_dir, capsys.readouterr().out


def test_write_files_writes_the_admin_tree(written: tuple[Path, Path, str]) -> None:
    root, hook_dir, out = written
    expected = {
        "etc/gpufair/gpufair.toml": 0o644, "etc/systemd/system/gpufair.service": 0o644,
        "etc/tmpfiles.d/gpufair.conf": 0o644, "usr/local/lib/gpufair/gpufair-hook": 0o755,
        "usr/local/lib/gpufair/gpufair-hook.env": 0o644,
        "usr/local/share/gpufair/job_submit.lua": 0o644,
        "usr/local/share/gpufair/slurm.conf.gpufair": 0o644,
        "usr/local/share/gpufair/snapshot.example.json": 0o644}
    for rel, mode in expected.items():
        assert (root / rel).stat().st_mode & 0o7777 == mode, rel
        assert "{{" not in (root / rel).read_text(encoding="utf-8"), rel
    for kind in ("prolog", "epilog", "prolog-slurmctld", "epilog-slurmctld"):
        assert os.readlink(root / "usr/local/lib/gpufair" / kind) == "gpufair-hook"
    assert len(out.splitlines()) == len(expected) + 4
    assert all(line.startswith("wrote ") for line in out.splitlines())
    unit = (root / "etc/systemd/system/gpufair.service").read_text(encoding="utf-8")
    assert f"\nExecStart={sys.executable} -m gpufair serve --config " \
           "/etc/gpufair/gpufair.toml\n" in unit
    for line in (f"User={ME}", "UMask=0077", "StateDirectory=gpufair", "ProtectSystem=strict",
                 f"ReadWritePaths=-{hook_dir}", "NoNewPrivileges=yes"):
        assert f"\n{line}\n" in unit, line
    tmpfiles = (root / "etc/tmpfiles.d/gpufair.conf").read_text(encoding="utf-8")
    group = deploy.site_for(ME).group
    assert f"\nd {hook_dir} 0700 {ME} {group} -\n" in tmpfiles
    assert f"\nd {hook_dir}/bad 0700 {ME} {group} 30d\n" in tmpfiles
    config = (root / "etc/gpufair/gpufair.toml").read_text(encoding="utf-8")
    assert f'\nhook_dir = "{hook_dir}"' in config


def test_the_written_hook_finds_its_interpreter_and_records(
        written: tuple[Path, Path, str]) -> None:
    root, hook_dir, _ = written
    env_file = root / "usr/local/lib/gpufair/gpufair-hook.env"
    shown = subprocess.run(["sh", "-c", '. "$1"; printf "%s\\n%s\\n%s" "$GPUFAIR_PYTHON" '
                            '"$GPUFAIR_HOOK_PY" "$GPUFAIR_HOOK_DIR"', "sh", str(env_file)],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    import gpufair.plugin.hooks as hooks
    assert shown == [sys.executable, str(Path(hooks.__file__).absolute()), str(hook_dir)]
    if Path("/etc/default/gpufair-hook").exists():
        pytest.skip("this host's /etc/default/gpufair-hook overrides the written settings")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GPUFAIR_", "SLURM"))}
    done = subprocess.run([str(root / "usr/local/lib/gpufair/epilog-slurmctld")],
                          env={**clean, "SLURM_JOB_ID": "77", "SLURM_JOB_EXIT_CODE": "0"},
                          capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    events = [json.loads(p.read_text()) for p in (hook_dir / "spool").iterdir()]
    assert [(e["kind"], e["job_id"], e["exit_code"]) for e in events] == \
        [("epilog-slurmctld", "77", "0")]


def test_write_files_again_keeps_what_an_admin_changed(written: tuple[Path, Path, str],
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    root, hook_dir, _ = written
    args = ["admin", "write-files", "--root", str(root), "--user", ME, "--hook-dir",
            str(hook_dir)]
    assert main(args) == 0
    assert {line.split()[0] for line in capsys.readouterr().out.splitlines()} == {"unchanged"}
    config, unit = root / "etc/gpufair/gpufair.toml", root / "etc/systemd/system/gpufair.service"
    config.write_text("# the site's own\n")
    unit.write_text("[Unit]\n# edited\n")
    assert main(args) == 0
    out = capsys.readouterr()
    status = {line.split()[1]: line.split()[0] for line in out.out.splitlines()}
    assert status[f"{config}.new"] == "wrote-new" and status[str(unit)] == "kept"
    assert config.read_text() == "# the site's own\n" and unit.read_text() == "[Unit]\n# edited\n"
    assert "--force" in out.err
    assert main([*args, "--force"]) == 0
    assert config.read_text() == "# the site's own\n"   # a config is never replaced
    assert "ExecStart=" in unit.read_text()


def test_write_files_list_writes_nothing(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admin", "write-files", "--root", str(tmp_path), "--user", ME, "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed[0] == "/etc/gpufair/gpufair.toml" and len(listed) == 12
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv, message", [
    (["--user", "no-such-user-gpufair"], "--user: no such user on this host: 'no-such"),
    (["--hook-dir", "relative/dir"], "--hook-dir: 'relative/dir': expected an absolute"),
    (["--hook-dir", "/var/spool/with space"], "--hook-dir: '/var/spool/with space': expe"),
])
def test_write_files_refuses_bad_arguments(tmp_path: Path, argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admin", "write-files", "--root", str(tmp_path), "--user", ME, *argv]) == 2
    assert capsys.readouterr().err.startswith(f"gpufair: error: {message}")
    assert not any(tmp_path.iterdir())


def test_job_submit_lua_gets_a_non_root_slurm_user_as_operator() -> None:
    site = deploy.Site(python="/opt/gpufair/venv/bin/python", hooks_py="/x/hooks.py",
                       user="slurm", group="slurm", uid=64030)
    lua = next(p for p in deploy.plan(site) if p.path.endswith("job_submit.lua"))
    assert b"\nlocal SLURM_USER_UID = 64030   -- slurm" in lua.content
    root = deploy.Site(python="/p", hooks_py="/h", user="root", group="root", uid=0)
    lua = next(p for p in deploy.plan(root) if p.path.endswith("job_submit.lua"))
    assert b"\nlocal SLURM_USER_UID = nil\n" in lua.content


def test_job_submit_lua_stamps_submissions_in_the_sites_hook_dir() -> None:
    """The daemon looks for the stamp in its hook_dir: the lua must write it there."""
    site = deploy.Site(python="/p", hooks_py="/h", user="root", group="root", uid=0)
    lua = next(p for p in deploy.plan(site) if p.path.endswith("job_submit.lua"))
    assert b'\nlocal SUBMIT_STAMP = "/var/spool/gpufair/submitted"\n' in lua.content
    moved = deploy.Site(python="/p", hooks_py="/h", user="root", group="root", uid=0,
                        hook_dir="/srv/gpufair")
    lua = next(p for p in deploy.plan(moved) if p.path.endswith("job_submit.lua"))
    assert b'\nlocal SUBMIT_STAMP = "/srv/gpufair/submitted"   -- written by' in lua.content


def _kernel_says(user: str, *test: str) -> bool:
    """The oracle: ``test(1)`` run as ``user`` by the kernel's own permission checks."""
    entry = pwd.getpwnam(user)
    return subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                           "--clear-groups", "test", *test], check=False).returncode == 0


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to test as another user")
def test_write_files_warns_when_the_daemon_user_cannot_run_the_interpreter(
        capsys: pytest.CaptureFixture[str]) -> None:
    import tempfile
    outer = Path(tempfile.mkdtemp(prefix="gpufair-reach-", dir="/tmp"))
    try:
        outer.chmod(0o755)
        private = outer / "home"
        (private / "bin").mkdir(parents=True)
        python = private / "bin" / "python3"
        python.write_text("#!/bin/sh\n")
        python.chmod(0o755)
        hooks = outer / "hooks.py"
        hooks.write_text("")
        hooks.chmod(0o644)
        venv = outer / "venv" / "bin"
        venv.mkdir(parents=True)
        (venv / "python").symlink_to(python)
        site = deploy.Site(python=str(venv / "python"), hooks_py=str(hooks), user="nobody",
                           group="nogroup", uid=pwd.getpwnam("nobody").pw_uid)
        for mode in (0o700, 0o750, 0o711, 0o755):
            private.chmod(mode)
            problems = deploy.unreachable(site)
            assert bool(problems) == (not _kernel_says("nobody", "-x", str(venv / "python"))), \
                (oct(mode), problems)
            assert not problems or str(private) in problems[0]
        private.chmod(0o755)
        python.chmod(0o744)        # reachable, but not executable by others
        assert deploy.unreachable(site) and not _kernel_says("nobody", "-x", str(python))
        python.chmod(0o755)
        hooks.chmod(0o600)         # the hook must be readable: it runs as `python hooks.py`
        assert ["hooks.py" in p for p in deploy.unreachable(site)] == [True]
        assert not _kernel_says("nobody", "-r", str(hooks))
        root_site = deploy.Site(python=site.python, hooks_py=site.hooks_py, user="root",
                                group="root", uid=0)
        private.chmod(0o700)
        assert deploy.unreachable(root_site) == []
    finally:
        shutil.rmtree(outer)


# ---- the unit under systemd's own checker -------------------------------------------------
def _analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs systemd for systemd-analyze (.ci/run)")
        pytest.skip("no systemd-analyze here")
    return found


def test_the_unit_passes_systemd_analyze_verify(written: tuple[Path, Path, str]) -> None:
    root, _, _ = written
    unit = root / "etc/systemd/system/gpufair.service"
    done = subprocess.run([_analyze(), "verify", str(unit)], capture_output=True, text=True,
                          timeout=60)
    # an unknown or misspelt directive is only a warning (exit 0): stderr must be empty too
    assert (done.returncode, done.stderr.strip()) == (0, "")


def test_the_unit_is_rated_ok_by_systemd_analyze_security(
        written: tuple[Path, Path, str]) -> None:
    root, _, _ = written
    unit = root / "etc/systemd/system/gpufair.service"
    done = subprocess.run([_analyze(), "security", "--offline=yes", "--no-pager", str(unit)],
                          capture_output=True, text=True, timeout=60)
    level = re.search(r"Overall exposure level for gpufair\.service: (\d+\.\d+) (\w+)",
                      done.stdout)
    assert level is not None, done.stdout[-500:] + done.stderr
    assert float(level.group(1)) <= 3.0 and level.group(2) == "OK", level.group(0)


def test_no_two_test_files_share_a_name() -> None:
    """pytest imports test files by basename (no packages under tests/): a second
    tests/integration/test_x.py beside tests/test_x.py stops the whole collection with
    'import file mismatch' — which a merge did once, caught only by the sdist's run."""
    names: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}
