"""``gpufair admin``: what an admin runs once per install or upgrade, beside the package.

``write-files`` writes the config, systemd unit, tmpfiles.d, hook wrapper and Slurm snippets
(:mod:`gpufair.deploy.files`); ``--list`` prints where, which is also what an uninstall
removes (docs/deploy.md).
"""

from __future__ import annotations

import argparse
import sys


def add_parsers(sub: argparse._SubParsersAction) -> None:
    admin = sub.add_parser("admin", help="install the admin files (unit, hooks, config)")
    commands = admin.add_subparsers(dest="admin_command", required=True, metavar="COMMAND")
    files = commands.add_parser(
        "write-files", help="write config, systemd unit, tmpfiles.d, hook wrapper, "
                            "job_submit.lua, slurm.conf lines, filled in for this install")
    files.add_argument("--root", default="/",
                       help="write the tree under this directory (like DESTDIR); paths inside "
                            "the files stay the final ones")
    files.add_argument("--user", default="slurm",
                       help="the daemon's user: SlurmUser (`scontrol show config`)")
    files.add_argument("--group", help="the daemon's group (default: the user's primary group)")
    files.add_argument("--hook-dir", default="/var/spool/gpufair",
                       help="[daemon] hook_dir: spool and wake socket")
    files.add_argument("--force", action="store_true",
                       help="replace files that differ (never gpufair.toml: a differing one "
                            "is written as gpufair.toml.new)")
    files.add_argument("--list", action="store_true",
                       help="only print the paths that would be written, one per line")
    files.set_defaults(func=write_files)


def write_files(args: argparse.Namespace) -> int:
    from gpufair.deploy.files import plan, site_for, unreachable, write
    site = site_for(args.user, args.group, args.hook_dir)
    files = plan(site)
    if args.list:
        print("\n".join(item.path for item in files))
        return 0
    for problem in unreachable(site):
        print(f"gpufair: warning: {problem}; the daemon (User={site.user}) and the "
              "PrologSlurmctld/EpilogSlurmctld would fail: install into a venv made from an "
              "interpreter every user can run (docs/deploy.md, Install)", file=sys.stderr)
    kept = False
    for status, path in write(files, args.root, force=args.force):
        print(f"{status:9} {path}")
        kept |= status == "kept"
    if kept:
        print("gpufair: some files differ from this install's and were kept; compare them, "
              "or --force to replace them", file=sys.stderr)
    return 0
