"""The profiler: training logs in, iteration times, throughputs, progress and regimes out.

Public surface: :class:`Profiler` (incremental rounds over many logs), :func:`profile_file`
(one file, read whole), :class:`ThroughputModel`, and the optional job-side
:class:`~gpufair.profiler.reporter.Reporter`.
"""

from gpufair.profiler.profiler import JobLog, Profiler, profile_file
from gpufair.profiler.summary import JobReport
from gpufair.profiler.throughput import ThroughputModel

__all__ = ["JobLog", "JobReport", "Profiler", "ThroughputModel", "profile_file"]
