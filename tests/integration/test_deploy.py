"""``docs/deploy.md`` followed verbatim on a loopback Slurm whose SlurmUser is ``slurm``.

The page's shell blocks marked ``<!-- deploy-test: NAME -->`` are run as written, by bash,
as root, with a root login's ``PATH`` (so ``python3`` is the system's: the page says why),
in this order: install (from a wheel of this tree, found through ``PIP_FIND_LINKS``, as from
a private index), write-files, start, upgrade (to the same tree built as a later version),
rollback, uninstall. Only the placeholders ``NEW`` and ``OLD`` are filled in. What the page
leaves to the admin in prose (merging the slurm.conf lines, editing ``gpufair.toml``,
removing the lines again before the uninstall) the test does as an admin would. There is no
systemd here: ``systemctl`` is :mod:`systemd_shim`, which runs the written unit as its
``User=`` with its ``UMask=``, ``StateDirectory=``, environment and capability.

What must hold: the daemon runs as ``slurm`` and its files are its own (0600); a job that
waits is started only because the hooks woke the daemon (no timer round, no poll), with
the PrologSlurmctld/EpilogSlurmctld running as ``slurm``; every hook event of every job is in
the store, none in ``bad/`` or left in the spool, including those of jobs that ended while
the daemon was stopped for the upgrade; the store written before the upgrade is opened by
the new release and by the old one again; after the uninstall nothing of gpufair is left and
a job runs on an undrained node.

It writes the real paths the page names (``/opt/gpufair``, ``/etc/gpufair``, ...), so it runs
only as root on a host that has none of them (CI's fresh machine), and removes them at the
end whatever happens.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from slurm_cluster import ENDED, REPO, SCRIPTS, TRAIN_JOB, Cluster

import gpufair

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

DOC = REPO / "docs" / "deploy.md"
SHIM = Path(__file__).with_name("systemd_shim.py")
NEW = "0.1.1"   # the upgrade's version: this tree again, built under a later number
#: everything the page installs; none may exist before, none after
DEPLOYED = ("/opt/gpufair", "/etc/gpufair", "/etc/systemd/system/gpufair.service",
            "/etc/systemd/system/gpufair.service.d", "/etc/tmpfiles.d/gpufair.conf",
            "/usr/local/lib/gpufair", "/usr/local/share/gpufair", "/var/lib/gpufair",
            "/var/spool/gpufair", "/etc/default/gpufair-hook")
LOGIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOOK_KINDS = {"prolog", "epilog", "prolog-slurmctld", "epilog-slurmctld"}


def doc_blocks() -> dict[str, str]:
    """The page's marked shell blocks, dedented (some sit inside a numbered list)."""
    found = re.findall(r"<!-- deploy-test: ([\w-]+) -->\s*\n( *)```sh\n(.*?)\n *```",
                       DOC.read_text(), flags=re.S)
    return {name: textwrap.dedent(body) for name, _indent, body in found}


def _unmet() -> str | None:
    if os.getuid() != 0:
        return "needs root (it installs into /opt, /etc, /usr/local, /var as the page says)"
    try:
        pwd.getpwnam("slurm")
    except KeyError:
        return "no user 'slurm' (the Debian Slurm packages create it: scripts/slurm/install.sh)"
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "setpriv", "systemd-tmpfiles"):
        if shutil.which(tool, path=LOGIN_PATH) is None:
            return f"{tool} not installed (.ci/run installs Slurm and systemd)"
    if subprocess.run(["/usr/bin/python3", "-c", "import ensurepip, venv"],
                      capture_output=True, check=False).returncode != 0:
        return "the system python3 cannot make venvs (Debian package python3-venv)"
    present = [p for p in DEPLOYED if os.path.lexists(p)]
    if present:
        return f"gpufair is deployed on this host already ({', '.join(present)})"
    return None


def _remove_deployment() -> None:
    for path in DEPLOYED:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.unlink(path)


def _build_wheel(source: Path, into: Path) -> Path:
    """With pip's build isolation, so the build gets what ``[build-system] requires`` (the
    interpreter's own setuptools may predate the SPDX ``license`` string: a venv's bundled
    one does)."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                           "-w", str(into), str(source)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, f"building a wheel of {source} failed:\n{done.stderr[-3000:]}"
    return into


def _tree_as(version: str, into: Path) -> Path:
    """This tree, its one version line changed (what a later release looks like to pip)."""
    shutil.copytree(REPO, into, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
        ".ruff_cache", "*.so"))
    init = into / "gpufair" / "__init__.py"
    text = init.read_text()
    assert f'__version__ = "{gpufair.__version__}"' in text
    init.write_text(text.replace(f'"{gpufair.__version__}"', f'"{version}"'))
    return into


class Admin:
    """A root shell on the controller, running the page's blocks."""

    def __init__(self, cluster: Cluster, work: Path, wheels: Path, shim_state: Path,
                 shims: Path) -> None:
        self.cluster = cluster
        self.work = work
        self.env = {"PATH": f"{shims}:{LOGIN_PATH}", "HOME": "/root", "LANG": "C.UTF-8",
                    "PIP_FIND_LINKS": str(wheels), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                    "SLURM_CONF": cluster.env["SLURM_CONF"],
                    "GPUFAIR_SHIM_STATE": str(shim_state)}
        self.blocks = doc_blocks()
        self.journal = shim_state / "gpufair.service.journal"

    def follow(self, name: str, *, meanwhile: Callable[[], None] | None = None,
               **placeholders: str) -> str:
        """Run block ``name``; with ``meanwhile``, its first command, then ``meanwhile()``
        (what happens on the cluster while the admin is between two lines), then the rest."""
        script = self.blocks[name]
        for key, value in placeholders.items():
            script = script.replace(f"gpufair=={key}", f"gpufair=={value}")
        parts = [script]
        if meanwhile is not None:
            first, rest = script.split("\n", 1)
            assert not first.rstrip().endswith("\\"), "the first command continues"
            parts = [first, rest]
        output = ""
        for i, part in enumerate(parts):
            if i:
                meanwhile()
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", part], cwd=self.work,
                                  env=self.env, capture_output=True, text=True, timeout=900,
                                  check=False)
            assert done.returncode == 0, (
                f"docs/deploy.md block {name!r} failed ({done.returncode}):\n{part}\n"
                f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}\n"
                f"--- daemon\n{self.daemon_log()}")
            output += done.stdout + done.stderr
        return output

    def daemon_log(self) -> str:
        return self.journal.read_text(errors="replace")[-4000:] if self.journal.exists() else ""

    def daemon_lines(self) -> list[dict]:
        lines = self.journal.read_text(errors="replace").splitlines() if \
            self.journal.exists() else []
        return [json.loads(line) for line in lines if line.startswith("{")]

    def daemon_pid(self) -> int:
        return int((self.journal.parent / "gpufair.service.pid").read_text())


@pytest.fixture()
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Admin]:
    unmet = _unmet()
    if unmet:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(unmet)
        pytest.skip(unmet)
    scratch = tmp_path_factory.mktemp("deploy")
    wheels = scratch / "wheels"
    _build_wheel(REPO, wheels)
    _build_wheel(_tree_as(NEW, scratch / "later"), wheels)
    work = scratch / "admin"
    work.mkdir()
    shutil.copy(REPO / "ci" / "constraints.txt", work / "constraints.txt")
    shims = scratch / "shims"
    shims.mkdir()
    for tool in ("systemctl", "journalctl"):
        shutil.copy(SHIM, shims / tool)
        (shims / tool).chmod(0o755)
    # the cluster lives outside pytest's 0700 temp root: slurmctld runs as slurm
    base = Path(f"/tmp/gpufair-deploy-{os.getpid()}")
    env = {"PATH": LOGIN_PATH, "HOME": "/root", "SLURM_LO_BASE": str(base),
           "SLURM_CONF": str(base / "etc" / "slurm.conf"), "SLURM_LO_SLURM_USER": "slurm",
           "SLURM_LO_HOOKS": "/usr/local/lib/gpufair",
           "SLURM_LO_JOB_SUBMIT": "/usr/local/share/gpufair/job_submit.lua"}
    cluster = Cluster(base, env, 0)
    shim_state = scratch / "systemd"
    admin = Admin(cluster, work, wheels, shim_state, shims)
    try:
        yield admin
    finally:
        subprocess.run([str(shims / "systemctl"), "stop", "gpufair"], env=admin.env,
                       capture_output=True, timeout=120, check=False)
        subprocess.run(["bash", str(SCRIPTS / "down.sh"), "--purge"], env=env,
                       capture_output=True, timeout=120, check=False)
        _remove_deployment()


def _edit_config(path: Path, **daemon: object) -> None:
    """What the admin changes in the written gpufair.toml: lines of [daemon], in place."""
    text = path.read_text()
    start = text.index("\n[daemon]\n")
    end = text.index("\n[", start + 1)
    section = text[start:end]
    for key, value in daemon.items():
        section, count = re.subn(rf"^{key} = [^#\n]*?( *#|$)", f"{key} = {json.dumps(value)}\\1",
                                 section, count=1, flags=re.M)
        assert count == 1, f"no '{key} = ' line in [daemon] of {path}"
    path.write_text(text[:start] + section + text[end:])
    assert tomllib.loads(path.read_text())["daemon"] | daemon == \
        tomllib.loads(path.read_text())["daemon"]


def _store(query: str) -> list[tuple]:
    with sqlite3.connect("file:/var/lib/gpufair/state.db?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


def _hook_kinds_by_job() -> dict[str, set[str]]:
    kinds: dict[str, set[str]] = {}
    for kind, job in _store("SELECT kind, job_id FROM events"):
        kinds.setdefault(str(job), set()).add(kind)
    return kinds


def _owner_and_mode(path: str) -> tuple[str, int]:
    st = os.stat(path)
    return pwd.getpwuid(st.st_uid).pw_name, st.st_mode & 0o777


def _wait_ended(cluster: Cluster, ids: list[str], timeout: float) -> None:
    cluster.wait_for(f"jobs {ids} to end",
                     lambda: all(cluster.jobs()[i]["job_state"] in ENDED for i in ids), timeout)


def _wait_for_events(cluster: Cluster, ids: list[str]) -> None:
    """Every hook of every job in the store (the last epilogs are ingested by a round)."""
    cluster.wait_for("every hook event in the store", lambda: all(
        _hook_kinds_by_job().get(i, set()) >= HOOK_KINDS for i in ids), 30)
    assert not os.listdir("/var/spool/gpufair/spool"), "events left in the spool"


def _sbatch(cluster: Cluster, name: str, steps: int, *extra: str) -> str:
    work = cluster.base / "work"
    out = cluster.run("sbatch", "--parsable", "-J", name, "-o", str(work / f"{name}.log"),
                      "-N", "1", "--gres=gpu:4", *extra, str(TRAIN_JOB), str(work),
                      str(steps), "0.5").stdout
    return out.strip().split(";")[0]


def _starts_logged(admin: Admin, cluster: Cluster, count: int) -> list[dict]:
    """The daemon's start lines, once ``count`` are in its journal: ``systemctl start``
    returns when the process is spawned, and under load its imports take seconds before it
    logs (CI read the journal first twice, under a soak's load: one start line of two)."""
    def starts() -> list[dict]:
        return [r for r in admin.daemon_lines() if r.get("event") == "start"]
    cluster.wait_for(f"{count} daemon start lines", lambda: len(starts()) >= count, 60)
    return starts()


def test_deploy_md_verbatim_with_a_non_root_slurm_user(admin: Admin) -> None:
    cluster = admin.cluster
    blocks = admin.blocks
    assert set(blocks) == {"install", "write-files", "start", "upgrade", "rollback",
                           "uninstall"}, "docs/deploy.md's marked blocks changed: update me"
    assert f"gpufair=={gpufair.__version__}" in blocks["install"], \
        "docs/deploy.md installs another version than this tree's"

    # ---- Install 2-3: the venv from the system python, the admin files, tmpfiles.d ------
    admin.follow("install")
    written = admin.follow("write-files")
    assert "warning" not in written, written   # slurm can run the venv's interpreter
    assert _owner_and_mode("/var/spool/gpufair") == ("slurm", 0o700)

    # ---- Install 4: slurm.conf with the page's lines, SlurmUser=slurm, job_submit.lua ---
    up = subprocess.run(["bash", str(SCRIPTS / "up.sh"), "--hard"], env=cluster.env,
                        capture_output=True, text=True, timeout=180, check=False)
    assert up.returncode == 0, f"loopback Slurm did not come up:\n{up.stdout}\n{up.stderr}"
    config = cluster.run("scontrol", "show", "config").stdout
    assert re.search(r"^SlurmUser\s*=\s*slurm\(", config, re.M), "SlurmUser is not slurm"
    assert re.search(r"^PrologSlurmctld\s*=\s*/usr/local/lib/gpufair/prolog-slurmctld",
                     config, re.M)
    ctld = int((cluster.base / "run" / "slurmctld.pid").read_text())
    assert os.stat(f"/proc/{ctld}").st_uid == pwd.getpwnam("slurm").pw_uid

    # ---- Install 5: edit gpufair.toml, the drop-in for SLURM_CONF, then the block ---------
    # no timer round and no poll after the first round: only hooks can start what waits
    config_file = Path("/etc/gpufair/gpufair.toml")
    _edit_config(config_file, policy="fifo", round_s=3600, poll_s=0, event_min_interval_s=1,
                 metrics_port=0, grace_s=0)
    dropin = Path("/etc/systemd/system/gpufair.service.d")
    dropin.mkdir()
    (dropin / "slurm-conf.conf").write_text(
        f"[Service]\nEnvironment=SLURM_CONF={cluster.env['SLURM_CONF']}\n")
    first = [_sbatch(cluster, f"first{i}", 6) for i in range(4)]     # all 16 GPUs
    waiting = [_sbatch(cluster, f"waiting{i}", 4) for i in range(2)]
    long = [_sbatch(cluster, f"long{i}", 12) for i in range(2)]
    out = admin.follow("start")
    assert "(dry run)" in out and "would start" in out, out
    slurm_uid = pwd.getpwnam("slurm").pw_uid
    status = Path(f"/proc/{admin.daemon_pid()}/status").read_text()
    assert re.search(rf"^Uid:\s+{slurm_uid}\s+{slurm_uid}\s", status, re.M), status
    _wait_ended(cluster, first + waiting, 120)
    jobs = cluster.jobs()
    assert {jobs[i]["job_state"] for i in first + waiting} == {"COMPLETED"}
    cluster.wait_for("the long jobs to run", lambda: all(
        cluster.jobs()[i]["job_state"] == "RUNNING" for i in long), 30)
    rounds = [r for r in admin.daemon_lines() if r.get("event") == "round"]
    assert len([r for r in rounds if r["preemptive"]]) == 1, \
        "a second timer round ran: the waiting jobs did not need the hooks"
    assert _owner_and_mode("/var/lib/gpufair/state.db") == ("slurm", 0o600)
    assert _owner_and_mode("/var/spool/gpufair/wake.sock")[0] == "slurm"
    _wait_for_events(cluster, first + waiting)

    # ---- Upgrade: the long jobs end while the daemon is stopped: their events wait ---------
    _edit_config(config_file, poll_s=2)   # from now on new submissions are found by the poll
    rounds_before = _store("SELECT count(*) FROM rounds")[0][0]

    def jobs_end_meanwhile() -> None:
        _wait_ended(cluster, long, 60)
        spooled = os.listdir("/var/spool/gpufair/spool")
        assert len(spooled) >= 4, f"the ended jobs' hook events are not in the spool: {spooled}"

    admin.follow("upgrade", meanwhile=jobs_end_meanwhile, NEW=NEW)
    started = _starts_logged(admin, cluster, 2)
    assert [r["version"] for r in started] == [gpufair.__version__, NEW]
    assert "store_migrated" not in admin.daemon_log()      # same schema: nothing to migrate
    assert not list(Path("/var/lib/gpufair").glob("state.db.schema-v*.bak"))
    _wait_for_events(cluster, long)
    assert _store("SELECT count(*) FROM rounds")[0][0] > rounds_before   # same store, grown

    # ---- Rollback ---------------------------------------------------------------------------
    admin.follow("rollback", OLD=gpufair.__version__)
    started = _starts_logged(admin, cluster, 3)
    assert [r["version"] for r in started] == [gpufair.__version__, NEW, gpufair.__version__]
    after = _sbatch(cluster, "after-rollback", 2)
    _wait_ended(cluster, [after], 60)
    assert cluster.jobs()[after]["job_state"] == "COMPLETED"
    _wait_for_events(cluster, [after])
    assert not os.listdir("/var/spool/gpufair/bad"), "hook events the daemon could not read"
    store_jobs = {row[0] for row in _store("SELECT job_id FROM jobs")}
    assert set(first + waiting + long + [after]) <= store_jobs

    # ---- Uninstall: slurm.conf first (prose), then the block --------------------------------
    # every GPU busy for a while, so gpufair keeps one job held; another is held by its owner
    blockers = [_sbatch(cluster, f"blocker{i}", 16) for i in range(4)]
    cluster.wait_for("the blockers to run", lambda: all(
        cluster.jobs()[i]["job_state"] == "RUNNING" for i in blockers), 30)
    queued = _sbatch(cluster, "queued-at-uninstall", 2)
    owners = _sbatch(cluster, "owner-held", 2, "--hold")
    conf = Path(cluster.env["SLURM_CONF"])
    conf.write_text("".join(line for line in conf.read_text().splitlines(keepends=True)
                            if not re.match(r"(Prolog|Epilog|PrologSlurmctld|EpilogSlurmctld|"
                                            r"JobSubmitPlugins)=", line)))
    cluster.run("scontrol", "shutdown", "slurmctld")
    cluster.wait_for("slurmctld to stop", lambda: not Path(f"/proc/{ctld}").exists(), 30)
    subprocess.run(["slurmctld", "-f", str(conf)], env=cluster.env, check=True, timeout=30)
    cluster.wait_for("slurmctld to answer", lambda: cluster.run(
        "scontrol", "ping", check=False).returncode == 0, 30)
    jobs = cluster.jobs()
    assert jobs[queued]["job_state"] == jobs[owners]["job_state"] == "PENDING"
    out = admin.follow("uninstall")
    assert f"released  job {queued}" in out and owners not in out, out
    left = [p for p in DEPLOYED if os.path.lexists(p)]
    assert left == [], f"left after the uninstall: {left}"
    assert subprocess.run(["pgrep", "-u", "slurm", "-f", "gpufair serve"],
                          check=False).returncode == 1, "the daemon still runs"
    try:
        _wait_ended(cluster, [*blockers, queued], 90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{cluster.run('scontrol', 'show', 'job', queued).stdout}"
                             f"\n--- daemon\n{admin.daemon_log()}") from None
    jobs = cluster.jobs()
    assert {jobs[i]["job_state"] for i in [*blockers, queued]} == {"COMPLETED"}
    assert jobs[owners]["job_state"] == "PENDING", "the owner's own hold was released"
    assert cluster.drained() == []
