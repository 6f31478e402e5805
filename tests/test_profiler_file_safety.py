"""A root daemon opening logs at paths the job's owner chose: regular files only, no final
symlink, only what the owner could read, bounded, never blocking, never raising.

Real files, FIFOs, sockets and devices in ``tmp_path`` (no mock of ``os``). Every round that
could block runs in a thread with a deadline, so a regression fails instead of hanging the
suite. The owner checks need files owned by other users: those tests run as root only —
and as root ``os.access`` says yes to everything, which is why ``gpufair.profiler.files``
checks the opened file's owner and mode itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufair.errors import InputError
from gpufair.profiler import JobLog, Profiler, profile_file
from gpufair.profiler.files import Refused, check, open_log
from gpufair.profiler.tail import read_new
from gpufair.profiler.tensorboard_events import available as tensorboard_available

LOGS = Path(__file__).parent / "fixtures" / "logs"
DEADLINE = 1.0
NOBODY = 65534
USER = 1000

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown files")
needs_tensorboard = pytest.mark.skipif(not tensorboard_available(),
                                       reason="tensorboard (optional extra) not installed")


def _lines(first: int, last: int) -> str:
    return "".join(f"step {i}/100 loss 1.0 time 50.0ms\n" for i in range(first, last + 1))


def _within(call: Callable[[], Any], fifos: tuple[Path, ...] = (),
            seconds: float = DEADLINE) -> Any:
    """``call()``'s result if it returns within ``seconds``; a failure if it blocks (the
    thread is then released by opening the FIFOs it may wait on for writing)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # handed to the test below
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        for fifo in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
        pytest.fail(f"blocked for more than {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _round(profiler: Profiler, logs: list[JobLog], fifos: tuple[Path, ...] = ()
           ) -> dict[str, Any]:
    return _within(lambda: profiler.round(logs), fifos)


def _good(tmp_path: Path, name: str = "good.out") -> Path:
    log = tmp_path / name
    log.write_text(_lines(1, 5))
    return log


def _owned(path: Path, text: str, uid: int, mode: int, gid: int | None = None) -> Path:
    path.write_text(text)
    os.chown(path, uid, uid if gid is None else gid)
    os.chmod(path, mode)
    return path


@contextlib.contextmanager
def _fifo_writer(fifo: Path, data: bytes) -> Iterator[None]:
    """A writer holding the FIFO open (``O_RDWR`` never blocks on Linux) with data in it."""
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(fd, data)
        yield
    finally:
        os.close(fd)


# --- what is not a regular file -----------------------------------------------------------


def test_a_fifo_without_a_writer_is_refused_at_once_and_the_others_are_read(
        tmp_path: Path) -> None:
    fifo = tmp_path / "o"
    os.mkfifo(fifo)
    good = _good(tmp_path)
    profiler = Profiler()
    changed = _round(profiler, [JobLog("fifo", str(fifo)), JobLog("good", str(good))], (fifo,))
    assert profiler.problems == {"fifo": "refused: not a regular file"}
    assert "fifo" not in changed and changed["good"].iterations_done == 5


def test_a_fifo_with_a_writer_is_refused_and_not_drained(tmp_path: Path) -> None:
    fifo = tmp_path / "o"
    os.mkfifo(fifo)
    payload = _lines(1, 3).encode()
    with _fifo_writer(fifo, payload):
        profiler = Profiler()
        assert _round(profiler, [JobLog("j", str(fifo))], (fifo,)) == {}
        assert profiler.problems["j"] == "refused: not a regular file"
        # what the writer wrote is still in the pipe: the daemon did not read it
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert os.read(reader, 4096) == payload
        finally:
            os.close(reader)


def test_a_unix_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        sock.listen(1)
        profiler = Profiler()
        assert _round(profiler, [JobLog("j", str(path))]) == {}
    assert profiler.problems["j"] == "refused: not a regular file"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_character_device_is_refused(device: str) -> None:
    profiler = Profiler()
    assert _round(profiler, [JobLog("j", device)]) == {}
    assert profiler.problems["j"] == "refused: not a regular file"
    read = _within(lambda: read_new(device, None))
    assert (read.event, read.reason, read.data) == ("refused", "not a regular file", b"")


def test_a_directory_is_refused_not_raised(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    good = _good(tmp_path)
    profiler = Profiler()
    changed = _round(profiler, [JobLog("dir", str(tmp_path / "d")), JobLog("good", str(good))])
    assert profiler.problems == {"dir": "refused: not a regular file"}
    assert changed["good"].iterations_done == 5


# --- symlinks ----------------------------------------------------------------------------


def test_a_symlink_to_a_regular_file_is_refused_even_without_an_owner(tmp_path: Path) -> None:
    target = _good(tmp_path, "real.out")
    link = tmp_path / "link.out"
    link.symlink_to(target)
    profiler = Profiler()
    assert _round(profiler, [JobLog("j", str(link))]) == {}
    assert profiler.problems["j"] == "refused: symlink"
    assert read_new(str(link), None).reason == "symlink"
    # the file itself is fine
    assert _round(Profiler(), [JobLog("j", str(target))])["j"].iterations_done == 5


@as_root
def test_a_symlink_to_a_root_only_file_is_refused(tmp_path: Path) -> None:
    secret = _owned(tmp_path / "secret", _lines(1, 7), NOBODY, 0o600)
    link = tmp_path / "o"
    link.symlink_to(secret)
    for owner in (USER, None):
        profiler = Profiler()
        assert _round(profiler, [JobLog("j", str(link), owner_uid=owner)]) == {}
        assert profiler.problems["j"] == "refused: symlink"


@as_root
def test_a_symlinked_directory_leads_only_to_what_the_owner_could_read(tmp_path: Path) -> None:
    hidden = tmp_path / "root-only"
    hidden.mkdir(mode=0o700)
    _owned(hidden / "secret.out", _lines(1, 7), 0, 0o600)
    _owned(hidden / "public.out", _lines(1, 4), 0, 0o644)
    logs = tmp_path / "logs"           # ~/logs -> /root
    logs.symlink_to(hidden, target_is_directory=True)
    profiler = Profiler()
    changed = _round(profiler, [JobLog("secret", str(logs / "secret.out"), owner_uid=USER),
                                JobLog("public", str(logs / "public.out"), owner_uid=USER)])
    assert profiler.problems == {"secret": "refused: owner mismatch"}
    # the documented limit: a world-readable file is read (directory search bits unchecked)
    assert changed["public"].iterations_done == 4


# --- the job's owner ---------------------------------------------------------------------


@as_root
def test_a_file_of_another_user_mode_0600_is_refused_mode_0644_allowed(tmp_path: Path) -> None:
    private = _owned(tmp_path / "private.out", _lines(1, 6), NOBODY, 0o600)
    public = _owned(tmp_path / "public.out", _lines(1, 3), NOBODY, 0o644)
    profiler = Profiler()
    changed = _round(profiler, [JobLog("private", str(private), owner_uid=USER),
                                JobLog("public", str(public), owner_uid=USER)])
    assert profiler.problems == {"private": "refused: owner mismatch"}
    assert changed["public"].iterations_done == 3
    # the same private file for its owner, for a root job, and without an owner (the CLI)
    for owner in (NOBODY, 0, None):
        mine = Profiler()
        assert _round(mine, [JobLog("j", str(private), owner_uid=owner)])["j"] \
            .iterations_done == 6, owner
        assert mine.problems == {}


@as_root
def test_group_bits_grant_only_to_a_member_and_owner_bits_rule_the_owner(tmp_path: Path) -> None:
    shared = _owned(tmp_path / "shared.out", _lines(1, 2), NOBODY, 0o640, gid=4242)
    refused = Profiler()
    _round(refused, [JobLog("j", str(shared), owner_uid=USER)])
    assert refused.problems == {"j": "refused: owner mismatch"}
    member = Profiler()
    changed = _round(member, [JobLog("j", str(shared), owner_uid=USER, owner_gids=(4242,))])
    assert changed["j"].iterations_done == 2
    # the owner without the read bit cannot read it, whatever group and other bits say
    locked = _owned(tmp_path / "locked.out", _lines(1, 2), USER, 0o044)
    owner = Profiler()
    _round(owner, [JobLog("j", str(locked), owner_uid=USER, owner_gids=(USER,))])
    assert owner.problems == {"j": "refused: not readable by the job's owner"}


def test_the_mode_check_itself() -> None:
    st = os.stat_result((stat.S_IFREG | 0o600, 0, 0, 1, NOBODY, NOBODY, 10, 0, 0, 0))
    assert check(st, USER) == "owner mismatch"
    assert check(st, NOBODY) is None and check(st, 0) is None and check(st) is None
    fifo = os.stat_result((stat.S_IFIFO | 0o666, 0, 0, 1, USER, USER, 0, 0, 0, 0))
    assert check(fifo) == check(fifo, USER) == "not a regular file"


# --- bounded, and a file that changes its nature ------------------------------------------


def test_a_huge_sparse_file_is_read_in_bounded_steps(tmp_path: Path) -> None:
    huge = tmp_path / "sparse.out"
    with huge.open("wb") as fh:
        for size in (1 << 40, 1 << 34):       # 1 TiB where the file system allows it
            try:
                fh.truncate(size)
                break
            except OSError:
                continue
        fh.seek(0, os.SEEK_END)
        fh.write(_lines(1, 2).encode())
    profiler = Profiler(max_bytes=1 << 20)
    started = time.perf_counter()
    for _ in range(3):
        _round(profiler, [JobLog("j", str(huge))])
    assert time.perf_counter() - started < 3 * DEADLINE
    position = profiler._jobs["j"].position
    assert position is not None and position.offset == 3 << 20   # 1 MiB a round, no more
    read = read_new(str(huge), position, max_bytes=4096)
    assert read.skipped_bytes == 4096 and read.data == b""


def test_a_log_replaced_by_a_fifo_between_rounds(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(_lines(1, 3))
    profiler = Profiler()
    assert _round(profiler, [JobLog("j", str(log))])["j"].iterations_done == 3
    fifo = tmp_path / "fifo.tmp"
    os.mkfifo(fifo)
    os.replace(fifo, log)
    assert _round(profiler, [JobLog("j", str(log))], (log,)) == {}
    assert profiler.problems["j"] == "refused: not a regular file"
    assert profiler.reports["j"].iterations_done == 3          # what was measured stays
    os.unlink(log)
    log.write_text(_lines(4, 6))                               # a regular file again
    assert _round(profiler, [JobLog("j", str(log))])["j"].iterations_done == 6
    assert profiler.problems == {}


def test_a_fifo_left_where_the_rotated_log_should_be(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(_lines(1, 3))
    profiler = Profiler()
    _round(profiler, [JobLog("j", str(log))])
    os.rename(log, tmp_path / "elsewhere")
    os.mkfifo(tmp_path / "job.out.1")
    log.write_text(_lines(4, 5))
    changed = _round(profiler, [JobLog("j", str(log))], (tmp_path / "job.out.1",))
    assert changed["j"].iterations_done == 5


def test_open_log_hands_back_a_checked_descriptor(tmp_path: Path) -> None:
    log = _good(tmp_path)
    fd, st = open_log(str(log))
    try:
        assert stat.S_ISREG(st.st_mode) and os.fstat(fd).st_ino == log.stat().st_ino
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        os.close(fd)
    with pytest.raises(Refused) as refused:
        open_log(str(tmp_path))
    assert refused.value.reason == "not a regular file"
    with pytest.raises(FileNotFoundError):
        open_log(str(tmp_path / "nope"))


# --- gpufair profile, and TensorBoard event files ------------------------------------------


def test_profile_file_refuses_a_symlink_and_a_fifo_with_the_reason(tmp_path: Path) -> None:
    link = tmp_path / "latest.log"
    link.symlink_to(_good(tmp_path))
    with pytest.raises(InputError, match="refused: symlink"):
        profile_file(str(link))
    fifo = tmp_path / "o"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="refused: not a regular file"):
        _within(lambda: profile_file(str(fifo)), (fifo,))


@needs_tensorboard
def test_an_event_file_that_is_a_fifo_or_a_symlink_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "events.out.tfevents.1.fifo"
    os.mkfifo(fifo)
    link = tmp_path / "events.out.tfevents.2.link"
    link.symlink_to(LOGS / "tensorboard.tfevents")
    profiler = Profiler()
    changed = _round(profiler, [JobLog("fifo", str(fifo)), JobLog("link", str(link))], (fifo,))
    assert changed == {}
    assert profiler.problems == {"fifo": "refused: not a regular file",
                                 "link": "refused: symlink"}


@needs_tensorboard
@as_root
def test_an_event_file_of_another_user_is_refused(tmp_path: Path) -> None:
    events = tmp_path / "events.out.tfevents.3.host"
    shutil.copyfile(LOGS / "tensorboard.tfevents", events)
    os.chown(events, NOBODY, NOBODY)
    os.chmod(events, 0o600)
    profiler = Profiler()
    assert _round(profiler, [JobLog("j", str(events), owner_uid=USER)]) == {}
    assert profiler.problems == {"j": "refused: owner mismatch"}
    assert _round(Profiler(), [JobLog("j", str(events), owner_uid=NOBODY)])["j"].iterations_done


@needs_tensorboard
def test_event_files_are_read_in_bounded_steps_like_tensorboards_loader(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    from gpufair.profiler.tensorboard_events import EventFileSource

    fixture = str(LOGS / "tensorboard.tfevents")
    loaded = [e for e in EventFileLoader(fixture).Load() if e.HasField("summary")]
    whole = EventFileSource(fixture)
    samples = whole.read()
    assert whole.stats.lines - whole.stats.ignored == len(loaded)
    stepped = EventFileSource(fixture, max_bytes=300)
    pieces = []
    for _ in range(100):
        pieces += stepped.read()
    assert [s.step for s in pieces] == [s.step for s in samples]
    assert [s.loss for s in pieces] == [s.loss for s in samples]
    assert stepped.stats.malformed == whole.stats.malformed == 0


def test_without_proc_the_direct_open_refuses_the_same(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``/proc`` (or no ``O_PATH``): one non-blocking ``O_NOFOLLOW`` open, then ``fstat``."""
    from gpufair.profiler import files

    monkeypatch.setattr(files, "_PROC_FD", False)
    fifo = tmp_path / "o"
    os.mkfifo(fifo)
    (tmp_path / "d").mkdir()
    link = tmp_path / "link"
    link.symlink_to(_good(tmp_path))
    cases = {"fifo": str(fifo), "dir": str(tmp_path / "d"), "link": str(link),
             "null": "/dev/null"}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(tmp_path / "s"))
        cases["socket"] = str(tmp_path / "s")
        profiler = Profiler()
        changed = _round(profiler, [JobLog(k, v) for k, v in cases.items()]
                         + [JobLog("good", str(tmp_path / "good.out"))], (fifo,))
    assert profiler.problems == {"fifo": "refused: not a regular file",
                                 "dir": "refused: not a regular file",
                                 "link": "refused: symlink",
                                 "null": "refused: not a regular file",
                                 "socket": "refused: not a regular file"}
    assert changed["good"].iterations_done == 5


@needs_tensorboard
def test_event_file_torn_and_corrupt_records(tmp_path: Path) -> None:
    """A record cut by a write in progress is read once whole; a corrupt one is counted and
    skipped, the records around it still read."""
    from gpufair.profiler.tensorboard_events import EventFileSource

    data = (LOGS / "tensorboard.tfevents").read_bytes()
    whole = [s.step for s in EventFileSource(str(LOGS / "tensorboard.tfevents")).read()]
    events = tmp_path / "events.out.tfevents.4.host"
    events.write_bytes(data[:len(data) // 2 + 7])
    source = EventFileSource(str(events))
    steps = [s.step for s in source.read()]
    with events.open("ab") as fh:
        fh.write(data[len(data) // 2 + 7:])
    steps += [s.step for s in source.read()]
    assert steps == whole and source.stats.malformed == 0
    # flip a byte inside the last record's data: its CRC fails, the others are read
    corrupt = bytearray(data)
    corrupt[-6] ^= 0xFF
    events.write_bytes(bytes(corrupt))
    damaged = EventFileSource(str(events))
    got = [s.step for s in damaged.read()]
    assert damaged.stats.malformed == 1 and got and set(got) <= set(whole)


def test_the_daemon_reads_a_log_only_as_the_jobs_owner_could(tmp_path):
    """Slurm's user_id reaches the profiler: a log the job's owner cannot read (a symlinked
    directory into root's files, a 0600 file of another user) is not read by the daemon."""
    from gpufair.core.enrich import measure
    from gpufair.model import ClusterState, Job, JobState, Node
    from gpufair.profiler.profiler import Profiler
    secret = tmp_path / "secret.out"
    secret.write_text("Epoch: [0][ 10/100]\tTime  0.500 ( 0.500)\tLoss 1.0 (1.0)\n" * 5)
    secret.chmod(0o600)                                   # root's, not the job owner's
    job = Job("7", gpus=1, state=JobState.RUNNING, start_s=0.0, gpus_held=("n:0",),
              log_path=str(secret), owner_uid=65534, owner_gid=65534)
    state = ClusterState(10.0, nodes=(Node("n", "v100", 1),), jobs=(job,))
    profiler = Profiler()
    measured = measure(state, profiler)
    assert "owner" in profiler.problems["7"] or "not readable" in profiler.problems["7"]
    assert measured.jobs[0].progress.iterations_done == 0
    secret.chmod(0o644)                                   # world-readable: the owner could
    profiler = Profiler()
    assert measure(state, profiler).jobs[0].progress.iterations_done > 0
    assert "7" not in profiler.problems
