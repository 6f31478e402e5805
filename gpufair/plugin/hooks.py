"""Slurm Prolog/Epilog hook entry point: record the event, wake the daemon, exit 0. Always.

A Prolog that exits non-zero drains the node and requeues the job, so nothing here may fail
the hook: every error is swallowed. It must also be fast and must never wait for the daemon,
so it imports only small C-backed standard modules (``json`` and ``socket`` import ``re`` and
``enum``, which tripled the hook's run time; run it as a file with ``python3 -I -S``), writes
one small spool file (atomic rename, so the daemon never reads half of one; and nothing is
lost while the daemon is down), and sends a one-datagram wake-up on a unix
socket without blocking (a missing, full or dead socket is simply ignored).

The spool directory is ``$GPUFAIR_HOOK_DIR`` (default ``/var/spool/gpufair``), owned by
SlurmUser with mode 0700 (tmpfiles.d creates it so) so only root/SlurmUser can write events or
wake the daemon. Everything in it belongs to its owner (``wake.py``): a hook running as root
hands the files it creates to the directory's owner, so a daemon running as SlurmUser reads
them.
"""

from __future__ import annotations

import _socket  # the C module: ``socket`` pulls in enum and costs ~10 ms more per hook
import os
import sys
import time

KINDS = ("prolog", "epilog", "prolog-slurmctld", "epilog-slurmctld")
DEFAULT_DIR = "/var/spool/gpufair"
SPOOL = "spool"
WAKE_SOCKET = "wake.sock"
_ENV = {
    "job_id": "SLURM_JOB_ID", "node": "SLURMD_NODENAME", "gpus": "SLURM_JOB_GPUS",
    "nodelist": "SLURM_JOB_NODELIST", "partition": "SLURM_JOB_PARTITION",
    "user": "SLURM_JOB_USER", "restart_count": "SLURM_JOB_RESTART_COUNT",
    "exit_code": "SLURM_JOB_EXIT_CODE", "exit_code2": "SLURM_JOB_EXIT_CODE2",
    "derived_exit_code": "SLURM_JOB_DERIVED_EC", "stdout": "SLURM_JOB_STDOUT",
    "context": "SLURM_SCRIPT_CONTEXT",
}


def event_from_env(kind: str, env: dict[str, str]) -> dict[str, object]:
    event: dict[str, object] = {"kind": kind, "ts": time.time()}
    for key, var in _ENV.items():
        value = env.get(var)
        if value:
            event[key] = value
    if "nodelist" not in event and env.get("SLURM_NODELIST"):
        event["nodelist"] = env["SLURM_NODELIST"]
    return event


def _json_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch < " " or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def to_json(event: dict[str, object]) -> str:
    """Compact JSON of a flat dict of str/float (what ``json.dumps(sort_keys=True)`` gives)."""
    parts = []
    for key in sorted(event):
        value = event[key]
        shown = repr(value) if isinstance(value, float) else _json_string(str(value))
        parts.append(f"{_json_string(key)}: {shown}")
    return "{" + ", ".join(parts) + "}"


def record(kind: str, env: dict[str, str], hook_dir: str,
           event: dict[str, object] | None = None) -> str:
    """Write the event to the spool; return its file name."""
    event = event_from_env(kind, env) if event is None else event
    spool = os.path.join(hook_dir, SPOOL)
    created = not os.path.isdir(spool)
    if created:   # the daemon or tmpfiles.d makes it; a hook only when both are late
        os.makedirs(spool, mode=0o700, exist_ok=True)
    owner = _owner(hook_dir)
    if created and owner is not None:
        os.chown(spool, *owner)
    name = f"{time.time_ns()}-{os.getpid()}-{kind}.json"
    tmp = os.path.join(spool, "." + name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        if owner is not None:
            os.fchown(fd, *owner)
        os.write(fd, to_json(event).encode())
    finally:
        os.close(fd)
    os.rename(tmp, os.path.join(spool, name))
    return name


def _owner(hook_dir: str) -> tuple[int, int] | None:
    """The hook directory's owner, when this hook runs as root and must hand its files over
    (None: nothing to hand over)."""
    if os.geteuid() != 0:
        return None
    info = os.stat(hook_dir)
    return None if info.st_uid == 0 else (info.st_uid, info.st_gid)


def wake(hook_dir: str, message: bytes) -> None:
    """One non-blocking datagram; no daemon, a full queue or a stale socket are all fine."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        sock.sendto(message[:512], os.path.join(hook_dir, WAKE_SOCKET))
    except OSError:
        pass
    finally:
        sock.close()


def forward(event: dict[str, object], env: dict[str, str]) -> None:
    """Send the event to the daemon over UDP when it runs on another host: one datagram,
    ``gpufair1 <hex HMAC-SHA256 of the body> <body>``, keyed with a secret only root and
    SlurmUser can read (``GPUFAIR_EVENT_KEY``, a file). Non-blocking; a lost datagram loses
    only an early wake (the local spool keeps the event, and the daemon's timer still runs).
    """
    addr, key_file = env.get("GPUFAIR_EVENT_ADDR"), env.get("GPUFAIR_EVENT_KEY")
    if not addr or not key_file:
        return
    host, _, port = addr.rpartition(":")
    fd = os.open(key_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        key = os.read(fd, 4096).strip()
    finally:
        os.close(fd)
    import _hashlib  # C module: a few ms, and only on hosts that forward
    body = to_json(event).encode()
    mac = _hashlib.hmac_digest(key, body, "sha256").hex().encode()
    family = _socket.AF_INET6 if ":" in host.strip("[]") else _socket.AF_INET
    sock = _socket.socket(family, _socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        sock.sendto(b"gpufair1 " + mac + b" " + body, (host.strip("[]"), int(port)))
    except OSError:
        pass
    finally:
        sock.close()


def hook_dir_of(env: dict[str, str]) -> str:
    """``GPUFAIR_HOOK_DIR``; ``%n`` in it is the node's name (a node-local spool)."""
    template = env.get("GPUFAIR_HOOK_DIR") or DEFAULT_DIR
    return template.replace("%n", env.get("SLURMD_NODENAME") or "controller")


def run(kind: str, env: dict[str, str] | None = None) -> int:
    env = dict(os.environ) if env is None else env
    try:
        if kind not in KINDS:
            return 0
        hook_dir = hook_dir_of(env)
        event = event_from_env(kind, env)
        event["nonce"] = os.urandom(8).hex()
        try:
            name = record(kind, env, hook_dir, event)
            wake(hook_dir, name.encode())
        finally:
            forward(event, env)
    except BaseException:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return run(args[0] if args else "")


def _deadline(seconds: int) -> None:
    """Never hang a Prolog: after ``seconds`` give up, still exiting 0 (``_signal``: cheap)."""
    import _signal
    _signal.signal(_signal.SIGALRM, lambda *_: os._exit(0))
    _signal.alarm(seconds)


if __name__ == "__main__":
    try:
        _deadline(2)
        main()
    finally:
        os._exit(0)  # skip interpreter teardown: faster, and nothing can make us exit non-zero
