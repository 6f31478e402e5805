"""The report's figures: matplotlib (Agg, no display) drawn to SVG text that the page inlines.

Sized for large results: every series is cut to at most ``MAX_POINTS`` points before it is
drawn (a CDF as quantiles, a time series as per-bin means), so a 15,000-job, 11-run report
stays a few megabytes of vector graphics and never a raster image; text stays text
(``svg.fonttype = none``), which keeps it small, selectable and printable.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")   # before pyplot: no display, on any machine

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

#: the most points one line of a figure gets
MAX_POINTS = 400
#: Okabe–Ito colours (distinguishable with the common colour-vision deficiencies), then grey
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000", "#999999")
STYLES = ("-", "--", "-.", ":")
STYLE = {"svg.fonttype": "none", "svg.hashsalt": "gpufair", "font.size": 9,
         "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
         "grid.alpha": 0.3, "legend.frameon": False, "figure.dpi": 96}


def line_style(i: int) -> dict[str, object]:
    """Colour and dash of the i-th line: colours first, then dashes, so 11 runs stay apart."""
    return {"color": PALETTE[i % len(PALETTE)],
            "linestyle": STYLES[(i // len(PALETTE)) % len(STYLES)]}


@contextmanager
def figure(width: float = 6.4, height: float = 3.0, ncols: int = 1,
           nrows: int = 1) -> Iterator[tuple[plt.Figure, np.ndarray]]:
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
        # fixed margins (room for the legend on the right), not bbox_inches="tight": that
        # draws each figure twice, and drawing is most of a large report's time
        fig.subplots_adjust(left=0.09, right=0.8, bottom=0.16, top=0.9)
        try:
            yield fig, axes
        finally:
            plt.close(fig)


def to_svg(fig: plt.Figure) -> str:
    """The figure as an inline ``<svg>`` element: no XML header, no DOCTYPE (which names a
    DTD on the web), no metadata, scaled to the page's width by its viewBox."""
    buffer = io.StringIO()
    with plt.rc_context(STYLE):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    # its RDF metadata (creator, format) names vocabularies by URL: nothing a reader needs
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, count=1, flags=re.S)
    return re.sub(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"',
                  r'<svg\1 width="100%" preserveAspectRatio="xMidYMid meet"', text, count=1)


def cdf_points(values: np.ndarray, points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """An empirical CDF as at most ``points`` quantiles: the same curve to the eye, a fixed
    size whatever the number of jobs."""
    values = np.sort(values[np.isfinite(values)])
    if len(values) <= points:
        return values, np.arange(1, len(values) + 1) / max(len(values), 1)
    q = np.linspace(0, 1, points)
    return np.quantile(values, q), q


def downsample(t: np.ndarray, y: np.ndarray, points: int = MAX_POINTS
               ) -> tuple[np.ndarray, np.ndarray]:
    """A time series cut to at most ``points`` bins of equal time, each its mean (a step
    series of per-round samples keeps its level; a spike narrower than a bin is averaged)."""
    if len(t) <= points:
        return t, y
    edges = np.linspace(t[0], t[-1], points + 1)
    index = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, points - 1)
    sums = np.bincount(index, weights=y, minlength=points)
    counts = np.bincount(index, minlength=points)
    keep = counts > 0
    return ((edges[:-1] + edges[1:]) / 2)[keep], sums[keep] / counts[keep]


def cdf_figure(series: Mapping[str, np.ndarray], xlabel: str, *, log: bool = False) -> str:
    """One CDF line per run."""
    with figure() as (fig, axes):
        ax = axes[0, 0]
        for i, (run, values) in enumerate(series.items()):
            x, y = cdf_points(np.asarray(values, dtype=float))
            if len(x):
                ax.step(x, y, where="post", label=run, linewidth=1.4, **line_style(i))
        if log and all(np.nanmin(v) > 0 for v in series.values() if len(v)):
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10,
                                                                    subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain_number))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of jobs")
        ax.set_ylim(0, 1.02)
        _legend(ax, len(series))
        return to_svg(fig)


def time_figure(series: Mapping[str, pd.DataFrame], ylabel: str, *,
                hours: bool = True) -> str:
    """One line per run of ``t_s`` against ``value`` (each frame sorted by time)."""
    with figure() as (fig, axes):
        ax = axes[0, 0]
        for i, (run, frame) in enumerate(series.items()):
            t, y = downsample(frame["t_s"].to_numpy(float), frame["value"].to_numpy(float))
            ax.step(t / 3600 if hours else t, y, where="post", label=run, linewidth=1.2,
                    **line_style(i))
        ax.set_xlabel("time (hours from the start)" if hours else "time (s)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        _legend(ax, len(series))
        return to_svg(fig)


def share_figure(run: str, tenants: pd.DataFrame, top: list[str]) -> str:
    """A run's tenants: GPUs held (solid) against the fair share (dashed, same colour)."""
    with figure(height=2.8) as (fig, axes):
        ax = axes[0, 0]
        for i, tenant in enumerate(top):
            mine = tenants[tenants["tenant"] == tenant].sort_values("t_s")
            t = mine["t_s"].to_numpy(float)
            style = {"color": PALETTE[i % len(PALETTE)]}
            tg, g = downsample(t, mine["gpus"].to_numpy(float))
            ax.step(tg / 3600, g, where="post", linewidth=1.3, label=f"{tenant}", **style)
            tf, f = downsample(t, mine["fair_share_gpus"].to_numpy(float))
            ax.step(tf / 3600, f, where="post", linewidth=1.0, linestyle="--", alpha=0.8,
                    **style)
        ax.set_title(f"{run}: GPUs held (solid) and fair share (dashed)", fontsize=9,
                     loc="left")
        ax.set_xlabel("time (hours from the start)")
        ax.set_ylabel("GPUs")
        ax.set_ylim(bottom=0)
        _legend(ax, len(top))
        return to_svg(fig)


def _plain_number(value: float, _position: int) -> str:
    """Log-axis ticks as plain numbers (0.1, 1, 10), not powers of ten."""
    return f"{value:g}"


def _legend(ax: plt.Axes, entries: int) -> None:
    if entries:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
