"""``gpufair report`` and ``--report``: self-contained HTML reports, tested like a page.

Every report this file makes is opened in headless Chromium (tests/browser.py): it renders
(the screenshot is not blank), has the expected headings and number of figures, writes
nothing to the console and requests nothing from the network; and the HTML parses without
an error. Bad results directories are refused by name, and a report is written whole or not
at all.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path

import pytest

from gpufair.cli.main import main
from gpufair.report import render as render_module
from gpufair.report import write_report
from gpufair.results import ResultsWriter, input_file
from tests.browser import ink_fraction, open_page, request_host
from tests.test_shadow_report import shadow_store

html5lib = pytest.importorskip("html5lib")

DATA = Path(__file__).parent / "data" / "slurm"
SECTIONS = {"policies": "Policies side by side", "tenants": "Tenants", "cluster": "Cluster",
            "replay": "Against the history as run", "dry": "Dry run", "inputs": "Inputs"}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """The results directories and reports of this module, made once."""
    tmp = tmp_path_factory.mktemp("reports")
    out: dict[str, Path] = {}
    assert main(["compare", "--policies", "fifo,themis", "-q", "--out",
                 str(tmp / "compare")]) == 0
    out["compare_dir"] = tmp / "compare"
    assert main(["report", str(tmp / "compare"), "-o", str(tmp / "compare.html")]) == 0
    out["compare"] = tmp / "compare.html"
    # --report alone (no --out): the results go to a temporary directory, the report stays
    assert main(["simulate", "--policy", "las", "-q", "--out", str(tmp / "las"),
                 "--report", str(tmp / "las.html")]) == 0
    out["las_dir"] = tmp / "las"
    assert main(["report", str(tmp / "compare"), str(tmp / "las"), "-o",
                 str(tmp / "both.html"), "--title", "Three <policies> & a title"]) == 0
    out["both"] = tmp / "both.html"
    assert main(["dry-run", "--squeue", str(DATA / "squeue.json"), "--sinfo",
                 str(DATA / "sinfo.json"), "--policy", "themis", "--report",
                 str(tmp / "dry.html")]) == 0
    out["dry"] = tmp / "dry.html"
    shadow_store(tmp / "shadow.db").close()   # a shadow run's store (test_shadow_report)
    assert main(["shadow-report", "--store", str(tmp / "shadow.db"), "--out",
                 str(tmp / "shadow")]) == 0
    assert main(["report", str(tmp / "shadow"), "-o", str(tmp / "shadow.html")]) == 0
    out["shadow"] = tmp / "shadow.html"
    out["replay_dir"] = _replay_results(tmp / "replay")
    write_report([out["replay_dir"]], tmp / "replay.html")
    out["replay"] = tmp / "replay.html"
    return out


def _replay_results(out: Path) -> Path:
    """A replay-shaped directory: the history (``as_run``) and two policies, 12 tenants (more
    than a share figure draws one by one), a GPU type with no GPUs, a job that never ran."""
    trace = out.parent / "history.csv"
    trace.write_text("a made-up history\n")
    w = ResultsWriter(out, kind="replay", command=["test"], inputs={"history":
                                                                     input_file(trace)})
    tenants = [f"team-{i:02d}" for i in range(12)]
    for k, run in enumerate(("as_run", "fifo", "themis")):
        w.add_run(run, {"utilization": 0.5 + 0.1 * k})
        jobs, allocations = [], []
        for j in range(60):
            submit = 600.0 * j
            start = submit + 100.0 * ((j * (k + 1)) % 7)
            end = start + 3600.0 + 50 * j
            jobs.append((str(j), tenants[j % 12], submit, start, end, start - submit,
                         end - submit, 1 + j % 2, "v100", 0.8 + 0.01 * j, "finished"))
            allocations.append((str(j), start, end, "v100", 1 + j % 2))
        jobs.append(("60", "team-00", 100.0, math.nan, math.nan, math.nan, math.nan, 4, "",
                     math.nan, "never_started"))
        w.add_rows("jobs", jobs, run=run)
        w.add_rows("allocations", allocations, run=run)
        for r in range(200):
            t = 180.0 * r
            w.add_rows("cluster", [(t, "v100", 16, (r * 3 + k) % 17, r % 5),
                                   (t, "k80", 0, 0, r % 5)], run=run)
            w.add_rows("tenants", [(t, name, (r + i + k) % 3, 16 / 12)
                                   for i, name in enumerate(tenants)], run=run)
    return w.commit()


# ---- the pages ----------------------------------------------------------------------------

PAGES = {
    # report: (title start, sections, figures)
    "compare": ("gpufair compare: fifo, themis", ["policies", "tenants", "cluster", "inputs"],
                3 + 2 + 2),
    "both": ("Three <policies> & a title", ["policies", "tenants", "cluster", "inputs"],
             3 + 3 + 2),
    "dry": ("gpufair dry-run: themis", ["dry", "inputs"], 0),
    "shadow": ("gpufair shadow: slurm, fifo", ["policies", "tenants", "cluster", "dry",
                                                "inputs"], 6),
    "replay": ("gpufair replay: as_run, fifo, themis",
               ["policies", "tenants", "cluster", "replay", "inputs"], 3 + 3 + 2),
}


SVG_NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


def _parse(text: str):
    parser = html5lib.HTMLParser(tree=html5lib.getTreeBuilder("etree"),
                                 namespaceHTMLElements=False)
    tree = parser.parse(text)
    return tree, parser.errors


def external_references(text: str) -> list[str]:
    """Everything the page would fetch: any src/href/… attribute that is not a fragment
    (``#id``) or inline data, any ``url(…)`` or ``@import`` in a style that is not."""
    tree, _ = _parse(text)
    found = []
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        for name, value in element.attrib.items():
            if name.split("}")[-1] in ("src", "href", "action", "data", "poster",
                                       "srcset", "background") \
                    and not value.startswith(("#", "data:")):
                found.append(f"<{element.tag} {name}={value!r}>")
        if element.tag.split("}")[-1] == "link":
            found.append(f"<link {dict(element.attrib)}>")
    for style in re.findall(r"<style[^>]*>(.*?)</style>", text, re.S) + \
            re.findall(r'style="([^"]*)"', text):
        found += [f"url({u})" for u in re.findall(r"url\(\s*['\"]?([^)'\"]*)", style)
                  if not u.startswith(("#", "data:"))]
        found += ["@import"] if "@import" in style else []
    return found


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_report_renders_as_a_page(made, name, tmp_path):
    title, sections, figure_count = PAGES[name]
    text = made[name].read_text(encoding="utf-8")
    _tree, errors = _parse(text)
    assert errors == [], errors[:5]
    assert external_references(text) == []
    # no URL at all but the SVG namespaces' names (which nothing fetches)
    assert set(re.findall(r"https?://[^\s\"'()<>]+", text)) <= SVG_NAMESPACES
    page = open_page(made[name], tmp_path)
    assert page.requests == [], page.requests
    assert page.console == [], page.console
    assert ink_fraction(page.screenshot) > 0.01    # a blank page: < 0.001 (below)
    dom, _ = _parse(page.dom)
    assert "".join(dom.find(".//h1").itertext()) == title
    assert ["".join(h.itertext()) for h in dom.iter("h2")] == [SECTIONS[s] for s in sections]
    figures = [f for f in dom.iter("figure") if f.find("figcaption") is not None
               and any(str(e.tag).endswith("}svg") for e in f)]
    assert len(figures) == len(list(dom.iter("figure"))) == figure_count
    assert not list(dom.iter("img"))      # vector figures only: nothing rasterised


def test_the_page_check_sees_a_request_and_a_console_error(tmp_path):
    """The checks above can fail: a page that loads an image over http and one whose script
    throws are both caught (the request only reaches this test's trap)."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><title>x</title></head><body><h1>x</h1>'
                   '<img src="http://example.invalid/a.png" alt="">'
                   '<script>null.boom();</script></body></html>')
    page = open_page(bad, tmp_path)
    assert any("example.invalid" in r for r in page.requests), page.requests
    assert page.console and "boom" in " ".join(page.console)
    assert external_references(bad.read_text()) == ["<img src='http://example.invalid/a.png'>"]
    assert request_host("CONNECT cdn.example.org:443 HTTP/1.1") == "cdn.example.org"
    assert request_host("GET http://fonts.googleapis.com/css?x HTTP/1.1") == \
        "fonts.googleapis.com"
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><head><title>x</title></head><body></body></html>")
    assert ink_fraction(open_page(blank, tmp_path).screenshot) < 0.001
    assert _parse("<p><div></p>")[1]   # and html5lib reports a broken page


def test_tables_sort_on_a_header_click(made, tmp_path):
    """The report's own script, clicked in Chromium: rows in order of the column, then the
    reverse, blanks last."""
    text = made["replay"].read_text(encoding="utf-8")
    probe = """<script>
      var table = document.querySelector("#tenants table.sortable");
      var th = Array.prototype.find.call(table.tHead.rows[0].cells,
                                         function (c) { return c.textContent === "jobs"; });
      var column = th.cellIndex, out = [];
      function read() { return Array.prototype.map.call(table.tBodies[0].rows,
          function (r) { return r.cells[column].textContent; }).join(","); }
      th.click(); out.push(read()); th.click(); out.push(read());
      document.body.setAttribute("data-sorted", JSON.stringify(out));
    </script></body>"""
    page_file = tmp_path / "probe.html"
    page_file.write_text(text.replace("</body>", probe, 1), encoding="utf-8")
    page = open_page(page_file, tmp_path)
    assert page.console == []
    sorted_ = json.loads(html5lib.parse(page.dom, namespaceHTMLElements=False)
                         .find("body").get("data-sorted"))
    up, down = ([int(v) for v in s.split(",")] for s in sorted_)
    assert up == sorted(up) and down == sorted(up, reverse=True) and up != down


def test_report_content_reads_the_results(made):
    text = made["replay"].read_text(encoding="utf-8")
    assert "others" in text                       # 12 tenants: the 9th on are summed
    assert text.count("<svg") == 8
    assert "as_run" in text and "jobs compared" in text
    both = made["both"].read_text(encoding="utf-8")
    tenants = both.split('id="tenants"', 1)[1].split("</table>", 1)[0]
    runs = re.findall(r'<td class="text">(fifo|themis|las)</td>', tenants)
    assert runs == ["fifo", "themis", "las"]      # the runs in their order, not A to Z
    dry = made["dry"].read_text(encoding="utf-8")
    assert "gpu-k80-2" in dry and "resume: unranked; placed by themis" in dry
    assert "<svg" not in dry


def test_a_large_series_is_cut_to_a_bounded_figure(tmp_path):
    """Many rounds and jobs do not make a figure bigger than its point budget."""
    import numpy as np

    from gpufair.report import figures
    t = np.arange(200_000, dtype=float)
    x, y = figures.downsample(t, t % 7)
    assert len(x) <= figures.MAX_POINTS and abs(y.mean() - 3.0) < 0.01
    q, p = figures.cdf_points(np.linspace(0, 1, 100_000))
    assert len(q) == figures.MAX_POINTS and p[0] == 0 and p[-1] == 1


# ---- bad inputs ---------------------------------------------------------------------------

def _rewrite_meta(directory: Path, **changes) -> None:
    meta = json.loads((directory / "meta.json").read_text())
    meta.update(changes)
    (directory / "meta.json").write_text(json.dumps(meta))


def _copy(source: Path, target: Path) -> Path:
    import shutil
    shutil.copytree(source, target)
    return target


@pytest.mark.parametrize("damage", ["missing", "unfinished", "truncated", "version", "mixed"])
def test_bad_results_exit_2_naming_them_and_leave_the_old_report(made, tmp_path, capsys,
                                                                  damage):
    good = _copy(made["compare_dir"], tmp_path / "good")
    report = tmp_path / "report.html"
    report.write_text("the previous report")
    argv = ["report", str(good), "-o", str(report)]
    if damage == "missing":
        argv[1] = str(tmp_path / "nowhere")
        named = f"{tmp_path / 'nowhere'}: no such results directory"
    elif damage == "unfinished":
        (good / "meta.json").unlink()
        named = f"{good}: incomplete results directory: no meta.json"
    elif damage == "truncated":
        jobs = good / "jobs.csv"
        jobs.write_bytes(jobs.read_bytes()[:-40])
        named = f"{jobs}: truncated or changed after it was written"
    elif damage == "version":
        _rewrite_meta(good, version=99)
        named = f"{good / 'meta.json'}: field 'version': results format version 99"
    else:
        other = _replay_results(tmp_path / "other")
        argv.insert(2, str(other))
        named = f"{other}: mixed results: its history"
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert report.read_text() == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_failed_write_leaves_the_old_report_and_no_debris(made, tmp_path, monkeypatch):
    report = tmp_path / "report.html"
    report.write_text("the previous report")

    def refuse(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(render_module.os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_report([made["compare_dir"]], report)
    assert report.read_text() == "the previous report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_output_that_is_a_directory_or_cannot_be_written_is_refused(made, tmp_path, capsys):
    assert main(["report", str(made["compare_dir"]), "-o", str(tmp_path)]) == 2
    assert f"{tmp_path}: is a directory" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["report", str(made["compare_dir"]), "-o", str(blocker / "r.html")]) == 2
    err = capsys.readouterr().err
    assert f"{blocker / 'r.html'}: cannot write the report here" in err
    assert "Traceback" not in err
    assert main(["simulate", "-q", "--out", str(blocker / "res")]) == 2
    err = capsys.readouterr().err
    assert f"{blocker / 'res'}: cannot write the results directory here" in err


# ---- the README --------------------------------------------------------------------------

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_report_commands() -> tuple[str, list[str]]:
    """The README's first command's gpufair part, and the commands of its Reports block."""
    text = README.read_text(encoding="utf-8")
    first = text.split("```sh\n", 1)[1].splitlines()[0].split("&& ")[-1]
    block = text.split("\n## Reports\n", 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    commands = [" ".join(shlex.split(line, comments=True)) for line in block.splitlines()]
    return first, [c for c in commands if c]


def test_the_readme_first_command_then_one_report_command_make_a_report(tmp_path,
                                                                        monkeypatch):
    """From an empty directory, as on a fresh clone: the first command, then the Reports
    block line by line; every report it makes opens cleanly in Chromium."""
    first, commands = readme_report_commands()
    assert first == "gpufair simulate --out results"
    assert commands[0] == "gpufair report results -o report.html"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    repo = README.parent
    for command in [first, *commands]:
        argv = [a if not a.startswith("gpufair/") else str(repo / a)
                for a in shlex.split(command)[1:]]
        assert main(argv) == 0, command
    made = sorted(p.name for p in work.glob("*.html"))
    assert made == ["both.html", "cmp.html", "dry.html", "report.html"]
    # dry.html's results were temporary (--report alone): it names no path that is gone
    assert "(not kept: --out DIR keeps the results)" in (work / "dry.html").read_text()
    assert "gpufair-results-" not in (work / "dry.html").read_text()
    assert "<code>cmp</code>" in (work / "cmp.html").read_text()   # --out's, as given
    for name in made:
        page = open_page(work / name, tmp_path)
        assert page.requests == [] and page.console == [], name
        assert ink_fraction(page.screenshot) > 0.01, name
        assert _parse(page.dom)[1] == [], name
