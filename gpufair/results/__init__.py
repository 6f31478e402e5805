"""Results directories (docs/FORMATS.md, section 9): the one writer and the one reader of the
full results that ``simulate``, ``compare``, ``replay``, ``dry-run``, shadow runs and sweep
cells write with ``--out DIR`` and ``gpufair report`` reads.

Above ``core/``, below ``cli/``, never imported by ``plugin/``: it needs pandas, which the
daemon must not load.
"""

from gpufair.results.reader import Results, read_meta, read_results
from gpufair.results.schema import AS_RUN, FORMAT, KINDS, OBSERVED, OUTCOMES, TABLES, VERSION
from gpufair.results.writer import ResultsWriter, input_file, parquet_available, scalar_metrics

__all__ = ["AS_RUN", "FORMAT", "KINDS", "OBSERVED", "OUTCOMES", "TABLES", "VERSION", "Results",
           "ResultsWriter", "input_file", "parquet_available", "read_meta", "read_results",
           "scalar_metrics"]
