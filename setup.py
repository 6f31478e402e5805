"""Only the optional native tokenizer lives here; all metadata is in pyproject.toml.

The default build is pure Python: its wheel is tagged ``py3-none-any`` and installs anywhere
Python 3.10+ runs, which is what a package index accepts. ``gpufair/profiler/_scan.c`` speeds
up the profiler's log scan (``bench/bench_profiler.py``) but uses the full CPython C API
(``PyBytesObject`` internals, so no ``abi3``), so a native wheel would be one per CPython
minor version and platform, repaired by auditwheel. Instead it is opt-in at build time:
``GPUFAIR_NATIVE_SCANNER=1 pip install --no-binary gpufair gpufair`` (or ``pip install .`` in
a checkout) compiles it, and still installs without it when no compiler is at hand (the
extension is optional; the pure-Python twin in ``scan.py`` behaves identically).
"""

import os

from setuptools import Extension, setup

NATIVE = os.environ.get("GPUFAIR_NATIVE_SCANNER", "0").strip().lower() in ("1", "true", "yes")

setup(
    ext_modules=[
        Extension(
            "gpufair.profiler._scan",
            ["gpufair/profiler/_scan.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ] if NATIVE else [],
)
