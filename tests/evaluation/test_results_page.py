"""``revbench report --html DIR``: one line for a folder it cannot write or a warehouse without
results; otherwise a page that Debian's chromium opens from file:// with the network cut off,
showing every scorer's row and loss error bars, whose tables stay inside the page at 1,280 pixels
(a wide one scrolls within its own box). The docs' screenshot is of a demo run's page
(``make screenshots``)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from revbench.flows.evaluate import evaluate_flow
from revbench.settings import Settings
from tests.support.browser import chromium
from tests.support.cli import one_line_error
from tests.support.common import run_cli

TOPICS = ["retrieval", "graphs", "vision", "speech"]
WIDTH = 1280
"""The narrowest desktop window the page is made for: nothing may overflow it."""

OVERFLOW = """() => {
  const width = document.documentElement.clientWidth, out = [];
  if (document.documentElement.scrollWidth > width) out.push(`the page scrolls sideways: ${document.documentElement.scrollWidth}px`);
  for (const t of document.querySelectorAll('table')) {
    const box = t.closest('.wide');
    if (!box) { out.push(`table.${t.className} has no scroll box`); continue; }
    const r = box.getBoundingClientRect(), scrolls = ['auto', 'scroll'].includes(getComputedStyle(box).overflowX);
    if (r.left < 0 || r.right > width) out.push(`the box of table.${t.className} reaches ${r.right}px`);
    if (!scrolls && t.getBoundingClientRect().right > r.right + 0.5) out.push(`table.${t.className} spills out of its box`);
  }
  for (const e of document.querySelectorAll('body *')) {
    if (e.closest('.wide')) continue;
    const r = e.getBoundingClientRect();
    if (r.width && r.right > width + 0.5) out.push(`${e.tagName.toLowerCase()}.${e.className} reaches ${r.right}px`);
  }
  return out;
}"""
"""What overflows the window sideways, in words (nothing, as it should be): every table inside a
scroll box (``.wide``) that itself stays inside, and nothing outside such a box wider than the window."""

HIDDEN = """() => [...document.querySelectorAll('.wide')].filter(b => b.scrollWidth > b.clientWidth + 1)
  .map(b => b.firstElementChild.className)"""
"""The tables whose box scrolls (some columns out of sight until scrolled to)."""


def fits(page) -> None:  # type: ignore[no-untyped-def]
    """Every folded table opened, nothing overflows the window (:data:`OVERFLOW`), and the tables
    of scorers, differences and pairs show every column without scrolling (the coverage column
    last of all)."""
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
    assert page.evaluate(OVERFLOW) == []
    assert not {"results", "differences", "separation"} & set(page.evaluate(HIDDEN))


def test_a_file_or_an_unwritable_folder_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "page").write_text("x")
    one_line_error(*run_cli("report", "--html", str(tmp_path / "page")), 2, "--html", "is a file")
    # A read-only folder, as root sees one too (root may write into a folder of mode 0o500).
    monkeypatch.setattr("revbench.app.entry.os.access", lambda path, mode: False)
    one_line_error(*run_cli("report", "--html", str(tmp_path / "locked" / "out")), 2, "--html", "not writable")
    assert not (tmp_path / "locked").exists()


def test_no_results_is_one_line(tmp_path: Path) -> None:
    one_line_error(*run_cli("report", "--html", str(tmp_path / "out")), 2, "no evaluation results", "revbench evaluate")
    assert not (tmp_path / "out" / "index.html").exists()


def write_benchmark(d: Path, seed: int) -> dict[str, Path]:
    """An OpenReview-layout benchmark (12 reviewers x 8 papers on four topics, ratings by topic
    with noise) and three prediction files of decreasing quality; returns the files by name."""
    rng = random.Random(seed)
    papers = {f"p{i}": TOPICS[i % 4] for i in range(8)}
    reviewers = {f"r{j}": TOPICS[j % 4] for j in range(12)}
    (d / "archives").mkdir(parents=True)
    (d / "submissions.json").write_text(json.dumps(
        {p: {"id": p, "content": {"title": f"Work on {t} {p}", "abstract": f"A study of {t}."}} for p, t in papers.items()}))
    for r, t in reviewers.items():
        (d / "archives" / f"~{r}.jsonl").write_text(json.dumps(
            {"id": f"a-{r}", "content": {"title": f"Earlier {t} work", "abstract": f"We study {t}.", "year": 2024}}) + "\n")
    truth = {(r, p): (4.0 if papers[p] == t else 2.0) + rng.choice([-1.0, 0.0, 0.0, 1.0])
             for r, t in reviewers.items() for p in rng.sample(sorted(papers), 5)}
    (d / "ratings.csv").write_text("reviewer,paper,rating\n" + "".join(f"{r},{p},{x:g}\n" for (r, p), x in truth.items()))
    files = {}
    for name, noise in [("<b>close</b>", 0.6), ("rough", 1.5), ("coin", 50.0)]:
        scores: dict[str, dict[str, float]] = {}
        for (r, p), x in truth.items():
            scores.setdefault(r, {})[p] = x + rng.gauss(0, noise)
        files[name] = d / f"{len(files)}.json"
        files[name].write_text(json.dumps(scores))
    return files


@pytest.fixture
def evaluated(settings: Settings, tmp_path: Path) -> Settings:
    """Two versions of the benchmark, each evaluated with tpms, trivial and three prediction files."""
    for seed in (1, 2):
        files = write_benchmark(tmp_path / f"bench{seed}", seed)
        evaluate_flow.fn(settings, benchmarks=[f"openreview={tmp_path / f'bench{seed}'}"], scorers=["trivial", "tpms"],
                         predictions=[f"{name}={path}" for name, path in files.items()], bootstrap=200, plot=False,
                         report_dir=str(tmp_path / f"report{seed}"))
    return settings


@pytest.fixture
def browser() -> Iterator[object]:
    with chromium() as b:
        yield b


@pytest.mark.slow
def test_the_page_opens_offline_from_a_file(evaluated: Settings, browser, tmp_path: Path) -> None:
    stray = tmp_path / "elsewhere"  # a report folder of a version this warehouse never evaluated
    stray.mkdir()
    (stray / "results.json").write_text(json.dumps([{"benchmark": "openreview", "benchmark_version": "0ther", "run_id": "x"}]))
    (stray / "separation.json").write_text((tmp_path / "report1" / "separation.json").read_text())
    code, out, err = run_cli("report", "--html", str(tmp_path / "share"), "--evaluation-report", str(tmp_path / "report1"),
                             "--evaluation-report", str(stray))
    assert code == 0, out + err
    assert err.strip() == ("The scorer pairs of openreview 0ther are left out: this warehouse has no results of that "
                           "version.")
    index = tmp_path / "share" / "index.html"

    context = browser.new_context(viewport={"width": WIDTH, "height": 900})  # type: ignore[attr-defined]
    attempted: list[str] = []

    def cut_off(route) -> None:  # type: ignore[no-untyped-def]
        attempted.append(route.request.url)
        route.abort()

    context.route(lambda url: url.startswith(("http:", "https:", "ws:", "wss:")), cut_off)
    page = context.new_page()
    page.goto(index.as_uri())
    assert attempted == []

    sections = page.locator("section.benchmark")
    assert sections.count() == 2
    first = sections.first
    rows = first.locator("table.results tbody tr")
    assert rows.count() == 5  # three prediction files, tpms and trivial, on the one split
    # The hostile name shows as text, never as markup.
    assert first.locator("table.results").get_by_role("cell", name="<b>close</b>", exact=True).is_visible()
    assert page.locator("b").count() == 0
    bars = first.locator("svg.loss-chart .error-bar")
    assert bars.count() >= 3 and first.locator("svg.loss-chart circle.dot").count() == 5
    box = bars.first.bounding_box()
    assert box is not None and box["width"] > 1  # a visible whisker, not a point
    assert first.locator("ul.runs li").count() == 1 and "run " in first.locator("ul.runs li").inner_text()
    assert page.locator(".template-version").inner_text().startswith("4-")
    pairs = first.locator("table.separation tbody tr")  # the scorer pairs of the first version's report folder
    assert pairs.count() == 10 and sections.nth(1).locator("table.separation").count() == 0
    assert first.locator("table.separation").get_by_text("separated", exact=True).count() >= 1

    fits(page)
    assert attempted == []
    context.close()


@pytest.mark.slow
def test_the_demo_s_page_fits_the_window_and_is_the_docs_picture(browser, tmp_path: Path,
                                                                 request: pytest.FixtureRequest) -> None:
    """The page of a whole demo run (the warehouse and its release, every scorer, the scorer pairs):
    a split repeated shown once, both benchmarks SYNTHETIC, no table out of the window at 1,280
    pixels. It runs the demo (a few minutes), so only when the screenshots are taken."""
    shots = request.config.getoption("--screenshots")
    if not shots:
        pytest.skip("runs the whole demo: `make screenshots` runs it, and saves the docs' picture of its page")
    revbench = Path(sys.executable).parent / "revbench"
    done = subprocess.run([str(revbench), "demo", "--no-track"], cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = Path(os.environ["REVBENCH_DATA_DIR"])
    folders = [data / "reports" / "warehouse", *sorted((data / "reports" / "releases").iterdir())]
    code, out, err = run_cli("report", "--html", str(tmp_path / "share"),
                             *(a for f in folders for a in ("--evaluation-report", str(f))))
    assert code == 0, out + err
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto((tmp_path / "share" / "index.html").as_uri())
    titles = page.locator("section.benchmark h2")
    assert titles.count() >= 2 and all("SYNTHETIC" in t for t in titles.all_inner_texts())
    assert page.locator("p.same-splits").count() >= 1  # the demo's pointwise and reviewer-centric hold the same pairs
    assert page.locator("table.results").first.get_by_role("cell", name="pointwise = reviewer_centric").count() >= 1
    first = page.locator("section.benchmark").first
    chart = first.locator("svg.loss-chart").first.bounding_box()
    # The top of the page and the first version down to its loss chart: the rest repeats the layout.
    page.screenshot(path=str(request.config.invocation_params.dir / shots / "results-page.png"), full_page=True,
                    clip={"x": 0, "y": 0, "width": WIDTH, "height": chart["y"] + chart["height"] + 16})
    fits(page)
    context.close()


def test_without_a_choice_the_command_says_what_it_reports(tmp_path: Path) -> None:
    one_line_error(*run_cli("report"), 2, "--releases", "--html DIR")
    one_line_error(*run_cli("report", "--evaluation-report", str(tmp_path)), 2, "give --html DIR too")
    one_line_error(*run_cli("report", "--html", str(tmp_path / "out"), "--evaluation-report", str(tmp_path)), 2,
                   "cannot read separation.json")
    (tmp_path / "separation.json").write_text('[{"benchmark": "b"}]')
    one_line_error(*run_cli("report", "--html", str(tmp_path / "out"), "--evaluation-report", str(tmp_path)), 2,
                   "separation.json is not a list of rows with")


@pytest.mark.slow
def test_tracked_runs_link_to_their_page_in_the_prefect_ui(prefect_server: str, settings: Settings, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tracked = evaluate_flow(settings, benchmarks=[f"openreview={tmp_path / 'b1'}"], scorers=["trivial"],
                            predictions=[f"{n}={p}" for n, p in write_benchmark(tmp_path / "b1", 1).items()],
                            bootstrap=20, plot=False)
    local = evaluate_flow.fn(settings, benchmarks=[f"openreview={tmp_path / 'b2'}"], scorers=["trivial"],
                             predictions=[f"{n}={p}" for n, p in write_benchmark(tmp_path / "b2", 2).items()],
                             bootstrap=20, plot=False)
    monkeypatch.setenv("PREFECT_API_URL", prefect_server)  # as a user's configured API is seen
    code, out, err = run_cli("report", "--html", str(tmp_path / "share"))
    assert code == 0, out + err
    page = (tmp_path / "share" / "index.html").read_text()
    assert f'/runs/flow-run/{tracked.run_id}">run <code>{tracked.run_id}</code> in the Prefect UI</a>' in page
    assert f"run <code>{local.run_id}</code>: " in page and f"flow-run/{local.run_id}" not in page
