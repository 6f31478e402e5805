"""The submission stamp: a file job_submit.lua truncates at every managed submission.

Why: a submission is no Prolog/Epilog event, so the daemon learnt of one only at its next poll
(``[daemon] poll_s``, 5 s: 2.5 s on average while GPUs sat idle, where Slurm alone starts a
fitting job at once). job_submit.lua runs inside slurmctld and has no socket to wake the
daemon with, but it can open a file: opening ``<hook_dir>/submitted`` for writing (``"w"``)
truncates it, which marks its modification time, and nothing more (no growth, no data, a
failure ignored: the hook fails open). The daemon looks at that time between rounds (a
``stat`` every half second: nothing asked of slurmctld) and, when it moved, brings its
poll forward, so the poll's own test (a new job with idle GPUs) decides whether a fill-only
round runs, as for any other submission.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the stamp's name in the hook directory (job_submit.lua's SUBMIT_STAMP)
STAMP_NAME = "submitted"


class SubmitStamp:
    """Whether the stamp moved since the last look (or since the daemon started)."""

    def __init__(self, hook_dir: str | Path) -> None:
        self.path = Path(hook_dir) / STAMP_NAME
        self.seen = self._read()

    def _read(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:    # not there (no submission yet, or job_submit.lua without it)
            return None
        return st.st_mtime_ns, st.st_ctime_ns

    def moved(self) -> bool:
        now = self._read()
        if now is None or now == self.seen:
            return False
        self.seen = now
        return True
