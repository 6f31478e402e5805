"""HTML reports of results directories (``gpufair report DIR… -o report.html``): one
self-contained file — styles, a few lines of script and every figure inline (SVG), nothing
fetched from anywhere — readable on a laptop, printable, and safe to mail.

Above ``core/``, below ``cli/``, never imported by ``plugin/``: jinja2, pandas and matplotlib
stay off the daemon's path (tests/test_daemon_imports.py).
"""

from gpufair.report.render import render_report, write_report

__all__ = ["render_report", "write_report"]
