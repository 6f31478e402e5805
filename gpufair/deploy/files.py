"""What ``gpufair admin write-files`` writes, filled in for this install, and how.

Paths in the written files are the final ones (``/etc/gpufair/gpufair.toml``, ...); ``root``
is where the tree is written, like ``DESTDIR``: ``/`` installs, any other directory stages the
files for review or packaging. The interpreter baked into the unit and the hook wrapper's env
file is ``sys.executable`` unresolved (a venv's ``bin/python``, not the interpreter it links
to, or the venv's packages would be lost), and the hook's path is this install's
``gpufair/plugin/hooks.py``: re-run the command after moving or recreating the venv.

An admin edits ``gpufair.toml``, so a written one is never replaced: a differing new one goes
beside it as ``gpufair.toml.new`` (as dpkg does). Other files that differ from what would be
written are kept and reported unless ``force`` is set; identical files are left alone.
"""

from __future__ import annotations

import grp
import importlib.resources
import os
import pwd
import re
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpufair.errors import InputError
from gpufair.plugin.submit_stamp import STAMP_NAME

CONFIG = "/etc/gpufair/gpufair.toml"
UNIT = "/etc/systemd/system/gpufair.service"
TMPFILES = "/etc/tmpfiles.d/gpufair.conf"
HOOK_LIB = "/usr/local/lib/gpufair"   # etc/slurm.conf.gpufair names the hooks here
SHARE = "/usr/local/share/gpufair"
HOOK_KINDS = ("prolog", "epilog", "prolog-slurmctld", "epilog-slurmctld")
DEFAULT_HOOK_DIR = "/var/spool/gpufair"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_SAFE_PATH = re.compile(r"/[A-Za-z0-9._/@%+-]*")   # one field of tmpfiles.d and a unit line


@dataclass(frozen=True)
class Site:
    """What the files are filled in with."""

    python: str          # interpreter gpufair is installed in (sys.executable, unresolved)
    hooks_py: str        # this install's gpufair/plugin/hooks.py
    user: str            # the daemon's user: SlurmUser
    group: str
    uid: int
    hook_dir: str = DEFAULT_HOOK_DIR


@dataclass(frozen=True)
class Planned:
    """One file (or symlink, when ``link`` is set) at its final absolute path."""

    path: str
    content: bytes = b""
    mode: int = 0o644
    link: str | None = None
    config: bool = False   # admin-edited: never replaced


def site_for(user: str = "slurm", group: str | None = None,
             hook_dir: str = DEFAULT_HOOK_DIR) -> Site:
    """This install's :class:`Site`; the user and group must exist here (their uid goes into
    ``job_submit.lua``)."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise InputError("--user", f"no such user on this host: {user!r} (use SlurmUser, "
                         "from `scontrol show config`)") from None
    if group is None:
        try:
            group = grp.getgrgid(entry.pw_gid).gr_name
        except KeyError:
            raise InputError("--group", f"user {user}'s primary group {entry.pw_gid} has "
                             "no name: give --group") from None
    else:
        try:
            grp.getgrnam(group)
        except KeyError:
            raise InputError("--group", f"no such group on this host: {group!r}") from None
    if not _SAFE_PATH.fullmatch(hook_dir) or "//" in hook_dir or "/../" in hook_dir + "/":
        raise InputError("--hook-dir", f"{hook_dir!r}: expected an absolute path of letters, "
                         "digits and ._/@%+- (it is written into tmpfiles.d and the unit)")
    from gpufair.plugin import hooks
    for name, path in (("the interpreter", sys.executable), ("hooks.py", hooks.__file__)):
        if not path or "\n" in path:
            raise InputError(name, f"{path!r} cannot be written into a shell env file")
    return Site(python=sys.executable, hooks_py=str(Path(hooks.__file__).absolute()),
                user=user, group=group, uid=entry.pw_uid, hook_dir=hook_dir.rstrip("/") or "/")


def unreachable(site: Site) -> list[str]:
    """Why the daemon's user could not run this install's interpreter or hook, if it could not.

    A venv made from an interpreter under a private home (pyenv's under ``/root``, 0700) works
    for root and nobody else: the daemon as SlurmUser would not start and the
    PrologSlurmctld/EpilogSlurmctld, which fail open, would lose every event without a word.
    Checked by permission bits along the path and along the path its links resolve to (ACLs
    are not read): a warning, since only the admin knows who really runs what."""
    entry = pwd.getpwnam(site.user)
    if entry.pw_uid == 0:
        return []
    groups = {entry.pw_gid, *os.getgrouplist(site.user, entry.pw_gid)}

    def allowed(path: Path, bit: int) -> bool:
        st = path.stat()
        shift = 6 if st.st_uid == entry.pw_uid else 3 if st.st_gid in groups else 0
        return bool(st.st_mode >> shift & bit)

    problems = []
    for what, name, bit in (("the interpreter", site.python, 1), ("hooks.py", site.hooks_py, 4)):
        path = Path(name)
        for candidate in dict.fromkeys((path, path.resolve())):
            blocked = next((d for d in reversed(candidate.parents) if not allowed(d, 1)), None)
            if blocked is not None:
                problems.append(f"{site.user} cannot reach {what} {candidate}: {blocked} is "
                                f"mode {blocked.stat().st_mode & 0o777:o}, owner uid "
                                f"{blocked.stat().st_uid}")
                break
            if not allowed(candidate, bit):
                problems.append(f"{site.user} cannot {'run' if bit == 1 else 'read'} {what} "
                                f"{candidate}")
                break
    return problems


def packaged(name: str) -> str:
    """A file shipped in this package (``gpufair/deploy/``)."""
    return (importlib.resources.files("gpufair.deploy") / name).read_text(encoding="utf-8")


def fill(name: str, text: str, values: dict[str, str]) -> str:
    """``{{key}}`` → value; a placeholder without a value is a bug in the template."""
    def one(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"{name}: no value for {{{{{key}}}}}")
        return values[key]
    return _PLACEHOLDER.sub(one, text)


def replace_line(name: str, text: str, old: str, new: str) -> str:
    """Replace the one line ``old`` (the shipped file must still have it exactly once)."""
    lines = text.split("\n")
    if lines.count(old) != 1:
        raise ValueError(f"{name}: expected the line {old!r} exactly once")
    return "\n".join(new if line == old else line for line in lines)


def plan(site: Site) -> list[Planned]:
    values = {"user": site.user, "group": site.group, "python": site.python,
              "config": CONFIG, "hook_dir": site.hook_dir}
    config = packaged("gpufair.toml")
    if site.hook_dir != DEFAULT_HOOK_DIR:
        config = replace_line("gpufair.toml", config,
                              next(line for line in config.split("\n")
                                   if line.startswith("hook_dir = ")),
                              f'hook_dir = "{site.hook_dir}"   # spool + wake socket shared '
                              "with the prolog/epilog hooks")
    lua = packaged("job_submit.lua")
    if site.uid != 0:   # root is an operator already
        lua = replace_line("job_submit.lua", lua, "local SLURM_USER_UID = nil",
                           f"local SLURM_USER_UID = {site.uid}   -- {site.user}, written by "
                           "gpufair admin write-files")
    if site.hook_dir != DEFAULT_HOOK_DIR:
        lua = replace_line("job_submit.lua", lua,
                           f'local SUBMIT_STAMP = "{DEFAULT_HOOK_DIR}/{STAMP_NAME}"',
                           f'local SUBMIT_STAMP = "{site.hook_dir}/{STAMP_NAME}"   -- written '
                           "by gpufair admin write-files")
    env = "".join(f"{key}={shlex.quote(value)}\n" for key, value in (
        ("GPUFAIR_PYTHON", site.python), ("GPUFAIR_HOOK_PY", site.hooks_py),
        ("GPUFAIR_HOOK_DIR", site.hook_dir)))
    env = ("# written by `gpufair admin write-files` for this install; read by gpufair-hook "
           "beside it\n" + env)
    hook = f"{HOOK_LIB}/gpufair-hook"
    files = [
        Planned(CONFIG, config.encode(), 0o644, config=True),
        Planned(UNIT, fill("gpufair.service", packaged("gpufair.service.in"), values).encode()),
        Planned(TMPFILES, fill("gpufair.tmpfiles", packaged("gpufair.tmpfiles.in"),
                               values).encode()),
        Planned(hook, packaged("gpufair-hook").encode(), 0o755),
        Planned(f"{HOOK_LIB}/gpufair-hook.env", env.encode()),
        *(Planned(f"{HOOK_LIB}/{kind}", link="gpufair-hook") for kind in HOOK_KINDS),
        Planned(f"{SHARE}/job_submit.lua", lua.encode()),
        Planned(f"{SHARE}/slurm.conf.gpufair", packaged("slurm.conf.gpufair").encode()),
        Planned(f"{SHARE}/snapshot.example.json", packaged("snapshot.example.json").encode()),
    ]
    return files


def write(files: Iterable[Planned], root: str | Path, *, force: bool = False
          ) -> list[tuple[str, str]]:
    """Write ``files`` under ``root``; return (what happened, path) per file: ``wrote``,
    ``unchanged``, ``kept`` (differs; ``force`` replaces it) or ``wrote-new`` (a config that
    differs: the new one is ``PATH.new``)."""
    base = Path(root)
    done = []
    for item in files:
        target = base / item.path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.link is not None:
            status = _link(target, item.link, force)
        else:
            status = _file(target, item, force)
        done.append((status, str(target) + (".new" if status == "wrote-new" else "")))
    return done


def _link(target: Path, to: str, force: bool) -> str:
    if target.is_symlink() and os.readlink(target) == to:
        return "unchanged"
    if target.exists() or target.is_symlink():
        if not force:
            return "kept"
        target.unlink()
    target.symlink_to(to)
    return "wrote"


def _file(target: Path, item: Planned, force: bool) -> str:
    if target.is_file() and not target.is_symlink():
        if target.read_bytes() == item.content:
            if (target.stat().st_mode & 0o7777) != item.mode:
                target.chmod(item.mode)
            return "unchanged"
        if item.config:
            _atomic(Path(f"{target}.new"), item.content, item.mode)
            return "wrote-new"
        if not force:
            return "kept"
    elif (target.exists() or target.is_symlink()) and not force:
        return "kept"
    _atomic(target, item.content, item.mode)
    return "wrote"


def _atomic(target: Path, content: bytes, mode: int) -> None:
    """Write beside, then rename: a hook never runs half a wrapper."""
    tmp = target.with_name(f".{target.name}.gpufair-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(content)
        os.fchmod(out.fileno(), mode)
    os.replace(tmp, target)
