"""gpufair: fair and efficient GPU sharing for deep-learning training jobs on Slurm and YARN."""

__version__ = "0.1.0"
