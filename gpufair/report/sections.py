"""What the report says, computed with pandas from the results tables: each section a small
dict of tables (HTML) and figures (SVG) that the template lays out. A section whose tables
are empty (a dry run has no jobs, a simulation no nodes) is left out, not shown empty."""

from __future__ import annotations

import colorsys
import hashlib
import html
from typing import Any

import numpy as np
import pandas as pd

from gpufair.report import figures
from gpufair.results import AS_RUN, Results

#: tenants drawn one by one in a run's share figure; the others are summed as "others"
TOP_TENANTS = 8
#: per-tenant rows in the tenants table (by GPU-hours), the others summed as one row
TABLE_TENANTS = 25
ENDED = ("finished", "failed")


def table_html(frame: pd.DataFrame, *, caption: str | None = None) -> str:
    """A pandas table as a sortable HTML table (the page's script sorts by a header click;
    numbers are written plainly so it can read them back)."""
    text = frame.to_html(index=False, border=0, classes="sortable", na_rep="–",
                         float_format=_number,
                         escape=True)
    text = _mark_text_columns(text.replace(' style="text-align: right;"', ""), [
        i for i, column in enumerate(frame.columns)
        if not pd.api.types.is_numeric_dtype(frame[column])])
    if caption:
        text = text.replace("<thead>", f"<caption>{html.escape(caption)}</caption><thead>", 1)
    return text


def _number(value: float) -> str:
    """Three decimals below 10 (ρ, hours, fractions), one below 1,000, none above."""
    size = abs(value)
    return f"{value:,.3f}" if size < 10 else f"{value:,.1f}" if size < 1000 else f"{value:,.0f}"


def _mark_text_columns(text: str, columns: list[int]) -> str:
    """``class="text"`` on the cells of text columns (left-aligned; numbers align right).
    pandas writes one cell per line, so counting cells per row finds the column."""
    out, index = [], -1
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("<tr"):
            index = -1
        elif stripped.startswith(("<td>", "<td ", "<th>", "<th ")):
            index += 1
            if index in columns:
                line = line.replace("<td", '<td class="text"', 1).replace(
                    "<th", '<th class="text"', 1)
        out.append(line)
    return "\n".join(out)


def gpu_hours(results: Results) -> pd.DataFrame:
    """GPU-hours each job held, per run (from its allocation intervals)."""
    a = results.allocations
    used = (a["end_s"] - a["start_s"]) * a["gpus"] / 3600
    return a.assign(gpu_h=used).groupby(["run", "job_id"], sort=False)["gpu_h"].sum() \
        .reset_index()


def policies(results: Results) -> dict[str, Any] | None:
    jobs = results.jobs
    if jobs.empty:
        return None
    runs = [r for r in results.runs if r in set(jobs["run"])]
    metrics = results.metrics.set_index("run")
    held = gpu_hours(results).groupby("run")["gpu_h"].sum()
    rows = []
    for run in runs:
        mine = jobs[jobs["run"] == run]
        ended = mine[mine["outcome"].isin(ENDED)]
        started = mine[mine["start_s"].notna()]
        jct, wait, rho = ended["jct_s"], started["wait_s"], ended["rho"].dropna()
        makespan = (mine["end_s"].max() - mine["submit_s"].min()) if len(ended) else np.nan
        utilization = metrics["utilization"].get(run, np.nan) \
            if "utilization" in metrics.columns else np.nan
        rows.append({
            "run": run, "jobs": len(mine), "finished": int((mine["outcome"] == "finished")
                                                            .sum()),
            "not finished": int((~mine["outcome"].isin(ENDED)).sum()),
            "makespan (h)": makespan / 3600, "avg JCT (h)": jct.mean() / 3600,
            "p50 JCT (h)": jct.quantile(0.5) / 3600, "p90 JCT (h)": jct.quantile(0.9) / 3600,
            "avg wait (h)": wait.mean() / 3600, "p90 wait (h)": wait.quantile(0.9) / 3600,
            "worst ρ": rho.max() if len(rho) else np.nan,
            "mean ρ": rho.mean() if len(rho) else np.nan,
            "ρ > 1.1 (%)": 100 * (rho > 1.1).mean() if len(rho) else np.nan,
            "GPU-hours": held.get(run, 0.0), "utilization": utilization})
    table = pd.DataFrame(rows)
    by_run = {run: jobs[jobs["run"] == run] for run in runs}
    figs = [
        ("Job completion time (JCT), CDF",
         figures.cdf_figure({r: f.loc[f["outcome"].isin(ENDED), "jct_s"].to_numpy() / 3600
                             for r, f in by_run.items()}, "JCT (hours, log scale)", log=True)),
        ("Wait before the first start, CDF",
         figures.cdf_figure({r: f["wait_s"].dropna().to_numpy() / 3600
                             for r, f in by_run.items()}, "wait (hours)")),
        ("Finish-time fairness ρ (JCT against running alone; above 1: worse than a fair "
         "share), CDF",
         figures.cdf_figure({r: f["rho"].dropna().to_numpy() for r, f in by_run.items()},
                            "ρ")),
    ]
    return {"table": table_html(table), "figures": figs}


def tenants(results: Results) -> dict[str, Any] | None:
    series, jobs = results.tenants, results.jobs
    if series.empty and jobs.empty:
        return None
    hours = gpu_hours(results).merge(jobs[["run", "job_id", "tenant"]], on=["run", "job_id"],
                                     how="left")
    per = jobs.groupby(["run", "tenant"], sort=False).agg(
        jobs=("job_id", "size"), avg_wait_h=("wait_s", "mean"),
        p90_wait_h=("wait_s", lambda w: w.quantile(0.9)))
    per[["avg_wait_h", "p90_wait_h"]] /= 3600
    per["GPU-hours"] = hours.groupby(["run", "tenant"])["gpu_h"].sum()
    if not series.empty:
        over = series.assign(dt=series.groupby(["run", "tenant"])["t_s"].diff(-1).abs())
        over = over.assign(held_h=over["gpus"] * over["dt"] / 3600,
                           fair_h=over["fair_share_gpus"] * over["dt"] / 3600)
        sums = over.groupby(["run", "tenant"])[["held_h", "fair_h"]].sum()
        per["held / fair share"] = sums["held_h"] / sums["fair_h"].replace(0, np.nan)
    order = {run: i for i, run in enumerate(results.runs)}   # the runs in their order
    per = per.reset_index().fillna({"GPU-hours": 0.0})
    per = per.assign(order=per["run"].map(order)).sort_values(
        ["order", "GPU-hours"], ascending=[True, False], kind="stable").drop(columns="order")
    per = per.groupby("run", sort=False).head(TABLE_TENANTS)
    per = per.rename(columns={"avg_wait_h": "avg wait (h)", "p90_wait_h": "p90 wait (h)"})
    figs = []
    for run in results.runs:
        mine = series[series["run"] == run]
        if mine.empty:
            continue
        totals = mine.groupby("tenant")["gpus"].sum().sort_values(ascending=False)
        top = list(totals.index[:TOP_TENANTS])
        if len(totals) > TOP_TENANTS:
            rest = mine[~mine["tenant"].isin(top)].groupby("t_s", as_index=False)[
                ["gpus", "fair_share_gpus"]].sum().assign(tenant="others")
            mine = pd.concat([mine[mine["tenant"].isin(top)], rest], ignore_index=True)
            top.append("others")
        figs.append((f"{run}: each tenant's GPUs over time against its fair share",
                     figures.share_figure(run, mine, top)))
    return {"table": table_html(per), "figures": figs,
            "more": max(0, int(jobs.groupby("run")["tenant"].nunique().max() - TABLE_TENANTS))
            if not jobs.empty else 0}


def cluster(results: Results) -> dict[str, Any] | None:
    series = results.cluster
    if series.empty:
        return None
    whole = series.groupby(["run", "t_s"], sort=False).agg(
        total=("total", "sum"), busy=("busy", "sum"), queued=("queued_jobs", "first")) \
        .reset_index().sort_values(["run", "t_s"], kind="stable")
    runs = [r for r in results.runs if r in set(whole["run"])]
    util = {r: whole.loc[whole["run"] == r, ["t_s"]].assign(
        value=(whole["busy"] / whole["total"].replace(0, np.nan))[whole["run"] == r])
        for r in runs}
    queue = {r: whole.loc[whole["run"] == r, ["t_s"]].assign(
        value=whole.loc[whole["run"] == r, "queued"]) for r in runs}
    whole = whole.assign(dt=whole.groupby("run")["t_s"].diff(-1).abs().fillna(0.0))
    waiting = whole[whole["queued"] > 0]
    idle = waiting.assign(idle_h=(waiting["total"] - waiting["busy"]) * waiting["dt"] / 3600)
    rows = []
    for run in runs:
        mine, idle_mine = whole[whole["run"] == run], idle[idle["run"] == run]
        span = mine["dt"].sum()
        rows.append({"run": run, "mean utilization": (mine["busy"] * mine["dt"]).sum()
                     / (mine["total"] * mine["dt"]).sum() if span else np.nan,
                     "mean queue (jobs)": (mine["queued"] * mine["dt"]).sum() / span
                     if span else np.nan,
                     "idle GPU-hours while jobs waited": idle_mine["idle_h"].sum(),
                     "hours with idle GPUs and waiting jobs":
                     idle_mine.loc[idle_mine["total"] > idle_mine["busy"], "dt"].sum() / 3600})
    figs = [("Cluster utilization (busy GPUs / all GPUs), per round",
             figures.time_figure(util, "utilization")),
            ("Jobs waiting (queue length), per round", figures.time_figure(queue, "jobs"))]
    return {"table": table_html(pd.DataFrame(rows)), "figures": figs}


def replay(results: Results) -> dict[str, Any] | None:
    """Each policy against the history as it ran (the run ``as_run``), job by job."""
    jobs = results.jobs
    if AS_RUN not in set(jobs["run"]):
        return None
    base = jobs[jobs["run"] == AS_RUN].set_index("job_id")
    rows = []
    for run in results.runs:
        if run == AS_RUN:
            continue
        mine = jobs[jobs["run"] == run].set_index("job_id")
        both = mine.merge(base, left_index=True, right_index=True, suffixes=("", "_as_run"))
        ended = both[both["outcome"].isin(ENDED) & both["outcome_as_run"].isin(ENDED)]
        ratio = ended["jct_s"] / ended["jct_s_as_run"].replace(0, np.nan)
        rows.append({"run": run, "jobs compared": len(ended),
                     "avg JCT vs as run": ended["jct_s"].mean()
                     / ended["jct_s_as_run"].mean() if len(ended) else np.nan,
                     "median job's JCT ratio": ratio.median(),
                     "jobs faster (%)": 100 * (ratio < 1).mean() if len(ratio) else np.nan,
                     "jobs slower (%)": 100 * (ratio > 1).mean() if len(ratio) else np.nan,
                     "avg wait Δ (h)": (ended["wait_s"] - ended["wait_s_as_run"]).mean()
                     / 3600})
    return {"table": table_html(pd.DataFrame(rows))} if rows else None


def job_colour(job_id: str) -> str:
    """A light colour per job, the same in both grids (stable: a hash, not an order)."""
    if not job_id:
        return "#ffffff"
    hue = int(hashlib.sha256(job_id.encode()).hexdigest()[:4], 16) / 0xFFFF
    r, g, b = colorsys.hls_to_rgb(hue, 0.82, 0.65)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def dry_run(results: Results) -> dict[str, Any] | None:
    nodes = results.nodes
    if nodes.empty and results.actions.empty:
        return None
    grid = []
    for node, mine in nodes.groupby("node", sort=False):
        phases = {}
        for phase in ("before", "after"):
            cells = mine[mine["phase"] == phase].sort_values("gpu_index")
            phases[phase] = [(int(i), j, job_colour(j)) for i, j in
                             zip(cells["gpu_index"], cells["job_id"], strict=True)]
        changed = phases["before"] != phases["after"]
        grid.append({"node": node, "gpu_type": mine["gpu_type"].iloc[0], "changed": changed,
                     **phases})
    actions = results.actions.drop(columns=["t_s"]) if not results.actions.empty else None
    return {"grid": grid, "table": table_html(actions) if actions is not None else None}
