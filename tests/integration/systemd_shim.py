#!/usr/bin/env python3
"""``systemctl`` and ``journalctl`` for one unit, for a container without systemd as PID 1.

The deployment test follows ``docs/deploy.md`` verbatim, and the doc starts the daemon with
``systemctl``. Installed on ``PATH`` under both names, this reads the unit file that
``gpufair admin write-files`` wrote (and its ``.d/*.conf`` drop-ins) and carries out the
parts of it that decide whether the daemon works as deployed: ``User=``/``Group=`` (with
supplementary groups cleared), ``UMask=``, ``StateDirectory=`` and its mode,
``Environment=``, ``AmbientCapabilities=`` (through ``setpriv``, as systemd does) and
``KillSignal=``/``TimeoutStopSec=``; the process gets systemd's clean environment, not the
caller's. The sandboxing lines are left to ``systemd-analyze`` (``tests/test_release.py``).

State (pid, journal) lives in ``$GPUFAIR_SHIM_STATE``. Only what the doc runs is supported:
``daemon-reload``, ``start``, ``stop``, ``restart``, ``is-active``, ``enable --now``,
``disable --now``; ``journalctl -u UNIT [-f]`` prints the journal (without following).
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

UNIT_DIR = Path(os.environ.get("GPUFAIR_SHIM_UNIT_DIR", "/etc/systemd/system"))
STATE = Path(os.environ.get("GPUFAIR_SHIM_STATE", "/run/gpufair-shim"))
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def unit_name(arg: str) -> str:
    return arg if arg.endswith(".service") else f"{arg}.service"


def read_unit(name: str) -> dict[str, list[str]]:
    """Key → values of the [Service] section, drop-ins after the unit (later wins or adds)."""
    files = [UNIT_DIR / name, *sorted((UNIT_DIR / f"{name}.d").glob("*.conf"))]
    if not files[0].is_file():
        sys.exit(f"Unit {name} not found.")
    keys: dict[str, list[str]] = {}
    for path in files:
        section = ""
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]" and "=" in line:
                key, value = line.split("=", 1)
                keys.setdefault(key.strip(), []).append(value.strip())
    return keys


def last(keys: dict[str, list[str]], key: str, default: str = "") -> str:
    return keys.get(key, [default])[-1]


def pid_of(name: str) -> int | None:
    """The unit's main process while it runs (a zombie waiting for init counts as ended)."""
    try:
        pid = int((STATE / f"{name}.pid").read_text())
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return None
    return None if state in ("Z", "X") else pid


def start(name: str) -> None:
    if pid_of(name):
        return
    keys = read_unit(name)
    user = last(keys, "User", "root")
    entry = pwd.getpwnam(user)
    group = last(keys, "Group") or grp.getgrgid(entry.pw_gid).gr_name
    gid = grp.getgrnam(group).gr_gid
    for state_dir in last(keys, "StateDirectory").split():
        path = Path("/var/lib") / state_dir
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, entry.pw_uid, gid)
        path.chmod(int(last(keys, "StateDirectoryMode", "0755"), 8))
    env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8", "HOME": entry.pw_dir, "USER": user,
           "LOGNAME": user, "SHELL": entry.pw_shell}
    for line in keys.get("Environment", []):
        for word in shlex.split(line):
            key, _, value = word.partition("=")
            env[key] = value
    caps = [c.strip().lower().removeprefix("cap_")
            for c in last(keys, "AmbientCapabilities").split() if c.strip()]
    argv = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={gid}", "--clear-groups"]
    if caps:
        flags = ",".join(f"+{c}" for c in caps)
        argv += [f"--inh-caps={flags}", f"--ambient-caps={flags}"]
    argv += ["--", *shlex.split(last(keys, "ExecStart"))]
    umask = int(last(keys, "UMask", "0022"), 8)
    STATE.mkdir(parents=True, exist_ok=True)
    journal = (STATE / f"{name}.journal").open("ab")
    proc = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=journal,
                            stderr=journal, start_new_session=True,
                            preexec_fn=lambda: os.umask(umask))
    (STATE / f"{name}.pid").write_text(str(proc.pid))
    time.sleep(1.0)
    if proc.poll() is not None:
        sys.exit(f"Job for {name} failed (status {proc.returncode}): journalctl -u {name}")


def stop(name: str) -> None:
    pid = pid_of(name)
    if pid is None:
        return
    keys = read_unit(name)
    os.kill(pid, signal.Signals[last(keys, "KillSignal", "SIGTERM")])
    deadline = time.monotonic() + float(last(keys, "TimeoutStopSec", "90").rstrip("s"))
    while time.monotonic() < deadline and pid_of(name):
        time.sleep(0.2)
    if pid_of(name):
        os.kill(pid, signal.SIGKILL)
    (STATE / f"{name}.pid").unlink(missing_ok=True)


def systemctl(args: list[str]) -> int:
    if not args:
        sys.exit("systemctl: no command")
    command, rest = args[0], [a for a in args[1:] if a != "--now"]
    now = "--now" in args
    if command == "daemon-reload":
        return 0
    if command in ("start", "restart", "stop", "is-active", "enable", "disable"):
        for arg in rest:
            name = unit_name(arg)
            if command in ("stop", "restart") or (command == "disable" and now):
                stop(name)
            if command in ("start", "restart") or (command == "enable" and now):
                start(name)
            if command == "is-active":
                print("active" if pid_of(name) else "inactive")
                return 0 if pid_of(name) else 3
        return 0
    sys.exit(f"systemctl shim: {command!r} is not emulated")


def journalctl(args: list[str]) -> int:
    if "-u" not in args:
        sys.exit("journalctl shim: only -u UNIT")
    journal = STATE / f"{unit_name(args[args.index('-u') + 1])}.journal"
    if journal.is_file():
        sys.stdout.write(journal.read_text(errors="replace"))
    return 0


if __name__ == "__main__":
    tool = Path(sys.argv[0]).name
    sys.exit(journalctl(sys.argv[1:]) if tool == "journalctl" else systemctl(sys.argv[1:]))
