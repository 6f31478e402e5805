"""Slurm adapter: reads squeue/sinfo JSON (CLI or slurmrestd) into the cluster model and
carries actions back as scontrol/scancel verbs (argument lists, never a shell).

pyslurm is not supported: no release builds against Slurm 22.05 (see the README)."""

from gpufair.adapters.slurm.adapter import SlurmAdapter, SlurmSettings, SlurmUnavailable
from gpufair.adapters.slurm.transport import CliTransport, RestTransport, TransportError

__all__ = ["CliTransport", "RestTransport", "SlurmAdapter", "SlurmSettings",
           "SlurmUnavailable", "TransportError"]
