"""One ownership model for the hook directory, with a root and a non-root SlurmUser.

Real processes under real uids (forked, then setuid): the daemon as SlurmUser or as root,
the Prolog as root, PrologSlurmctld as SlurmUser, and a user who is neither. The directory is
made the way the tmpfiles.d line does (SlurmUser, 0700). Needs root to change uids; skipped
otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufair.plugin import hooks
from gpufair.plugin.wake import WakeSocket

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as other uids")

SLURM = 54321     # SlurmUser (running as a uid needs no passwd entry)
STRANGER = 54322  # a cluster user


def as_user(uid: int, finish: Callable[[], Any], *, setup: Callable[[], None] | None = None,
            meanwhile: Callable[[], None] | None = None) -> Any:
    """In a child process running as ``uid`` (gid the same): ``setup()``, then — while the
    parent runs ``meanwhile()`` — wait, then ``finish()``, whose value (JSON) is returned.
    An exception in the child comes back as RuntimeError with its text."""
    result_r, result_w = os.pipe()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:   # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            if setup is not None:
                setup()
            os.write(ready_w, b"1")
            os.read(go_r, 1)
            reply = {"ok": finish()}
        except BaseException as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(ready_w, b"1")
        os.write(result_w, json.dumps(reply).encode())
        os._exit(0)
    os.close(result_w)
    try:
        os.read(ready_r, 1)
        if meanwhile is not None:
            meanwhile()
    finally:
        os.write(go_w, b"1")
        data = b""
        while chunk := os.read(result_r, 65536):
            data += chunk
        os.waitpid(pid, 0)
        for fd in (result_r, ready_r, ready_w, go_r, go_w):
            os.close(fd)
    reply = json.loads(data)
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply["ok"]


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every uid can traverse (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="gpufair-owner-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def tmpfiles_dir(base: Path) -> Path:
    """What ``d HOOK_DIR 0700 slurm slurm -`` (the written tmpfiles.d) makes."""
    hook_dir = base / "gpufair"
    hook_dir.mkdir()
    os.chown(hook_dir, SLURM, SLURM)
    hook_dir.chmod(0o700)
    return hook_dir


def hook(kind: str, hook_dir: Path, job: str) -> None:
    hooks.run(kind, {"GPUFAIR_HOOK_DIR": str(hook_dir), "SLURM_JOB_ID": job})


def every_hook(hook_dir: Path) -> None:
    hook("prolog", hook_dir, "1")                                     # slurmd runs it as root
    as_user(SLURM, lambda: hook("prolog-slurmctld", hook_dir, "2"))   # slurmctld: SlurmUser
    as_user(STRANGER, lambda: hook("epilog", hook_dir, "3"))          # a user: must not get in


def round_sees(wake: WakeSocket, hook_dir: Path) -> dict[str, Any]:
    """What the daemon's next round gets: wakes counted, the spool read (daemon.ingest_spool
    moves any file it cannot read to bad/, losing the event)."""
    spool = hook_dir / "spool"
    jobs = sorted(json.loads((spool / name).read_text())["job_id"]
                  for name in os.listdir(spool) if not name.startswith("."))
    return {"accepted": wake.drain(), "rejected": wake.counts.rejected, "jobs": jobs}


def test_daemon_as_a_non_root_slurm_user_gets_every_hook(base: Path) -> None:
    hook_dir = tmpfiles_dir(base)
    box: dict[str, WakeSocket] = {}
    seen = as_user(SLURM, lambda: round_sees(box["wake"], hook_dir),
                   setup=lambda: box.setdefault("wake", WakeSocket(hook_dir)),
                   meanwhile=lambda: every_hook(hook_dir))
    assert seen == {"accepted": 2, "rejected": 0, "jobs": ["1", "2"]}
    for name in os.listdir(hook_dir / "spool"):   # the root hook's file was handed over
        info = (hook_dir / "spool" / name).stat()
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (SLURM, SLURM, 0o600)


def test_root_daemon_with_a_non_root_slurm_user_gets_every_hook(base: Path) -> None:
    hook_dir = tmpfiles_dir(base)
    wake = WakeSocket(hook_dir)
    try:
        info = wake.path.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (SLURM, 0o600)
        every_hook(hook_dir)
        assert round_sees(wake, hook_dir) == {"accepted": 2, "rejected": 0, "jobs": ["1", "2"]}
        assert wake.allowed(SLURM, SLURM) and not wake.allowed(STRANGER, STRANGER)
    finally:
        wake.close()


def test_root_slurm_user_and_root_daemon(base: Path, caplog: pytest.LogCaptureFixture) -> None:
    hook_dir = base / "gpufair"   # created by the daemon itself: root's, 0700
    wake = WakeSocket(hook_dir)
    try:
        assert stat.S_IMODE(hook_dir.stat().st_mode) == 0o700
        # fine for a root SlurmUser; a non-root one would need tmpfiles.d: the log says so
        assert "created the hook directory" in caplog.text and "tmpfiles.d" in caplog.text
        hook("prolog", hook_dir, "1")
        hook("epilog-slurmctld", hook_dir, "2")
        as_user(STRANGER, lambda: hook("epilog", hook_dir, "3"))
        assert round_sees(wake, hook_dir) == {"accepted": 2, "rejected": 0, "jobs": ["1", "2"]}
    finally:
        wake.close()


def test_hooks_before_the_daemon_ever_ran(base: Path) -> None:
    """tmpfiles.d made the directory, no daemon made spool/ yet: the root Prolog makes it
    and hands it over, and SlurmUser's hook can still write there."""
    hook_dir = base / "gpufair"
    hook_dir.mkdir()
    os.chown(hook_dir, SLURM, SLURM)
    hook_dir.chmod(0o700)
    hook("prolog", hook_dir, "1")
    assert (hook_dir / "spool").stat().st_uid == SLURM
    as_user(SLURM, lambda: hook("prolog-slurmctld", hook_dir, "2"))
    assert len(os.listdir(hook_dir / "spool")) == 2


def test_a_daemon_makes_a_missing_directory_its_own_or_says_why_not(base: Path) -> None:
    parent = base / "var-spool"
    parent.mkdir()
    os.chown(parent, SLURM, SLURM)

    def make() -> list[Any]:
        wake = WakeSocket(parent / "gpufair")
        wake.close()
        return [[p.name, p.stat().st_uid, stat.S_IMODE(p.stat().st_mode)]
                for p in (parent / "gpufair", parent / "gpufair" / "spool",
                          parent / "gpufair" / "bad")]

    assert as_user(SLURM, make) == [["gpufair", SLURM, 0o700], ["spool", SLURM, 0o700],
                                    ["bad", SLURM, 0o700]]
    roots = base / "root-owned"
    roots.mkdir(mode=0o755)
    with pytest.raises(RuntimeError, match=r"RefusedToStart: hook directory .*root-owned: "
                                           r"not writable by uid 54321; create it owned by "
                                           r"SlurmUser, mode 0700"):
        as_user(SLURM, lambda: WakeSocket(roots).close())
