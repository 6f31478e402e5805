"""Only the optional native tokenizer lives here; all metadata is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gpufair.profiler._scan",
            ["gpufair/profiler/_scan.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
