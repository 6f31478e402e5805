"""What the daemon and the dry run call things, in the resource manager's own words.

The plan is the same on Slurm and on YARN, but an admin reads its log and its explanations
in the terms of the system they run: Slurm has jobs that gpufair preempts by requeueing them;
YARN has apps in queues, that gpufair can only kill (YARN has no requeue), and whose GPUs
come as containers. One table of words per resource manager, chosen from the adapter's name
(``yarn/...``) or ``[daemon] adapter``, so no message hard-codes either."""

from __future__ import annotations

from dataclasses import dataclass

from gpufair.model import Action, Preempt


@dataclass(frozen=True)
class Words:
    rm: str          # the resource manager, as a subject: "Slurm places"
    job: str         # one unit of work
    jobs: str
    preempt: str     # what a Preempt action does there


SLURM = Words("Slurm", "job", "jobs", "preempt")
YARN = Words("YARN", "app", "apps", "kill")


def words_for(*names: object) -> Words:
    """YARN's words when any of ``names`` (an adapter name, ``[daemon] adapter``, a
    snapshot's source) is YARN's, else Slurm's."""
    yarn = any(isinstance(n, str) and (n == "yarn" or n.startswith("yarn/") or "(yarn/" in n)
               for n in names)
    return YARN if yarn else SLURM


def verb(action: Action, words: Words = SLURM) -> str:
    """The action's name as the resource manager's admin would say it."""
    return words.preempt if isinstance(action, Preempt) else type(action).__name__.lower()


def describe(action: Action, words: Words = SLURM) -> str:
    """``start app application_1_0001 on gpu01:0,gpu01:1``; ``kill app ...``."""
    gpus = getattr(action, "gpu_ids", None)
    return f"{verb(action, words)} {words.job} {action.job_id}" + \
        (f" on {','.join(gpus)}" if gpus else "")
