"""The artifacts' tables readable in the Prefect UI at 1,280 pixels: its cells never wrap and its
artifact page leaves a table about 710 pixels, so every markdown artifact's table is narrowed
(intervals under their values, headers broken between words, long cells wrapped) and the flags
come in two columns. The slow test opens a real ``revbench ui`` in chromium: the runs of a command
run meanwhile appear in it, no table reaches past its box, and the server says no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from revbench.evaluation.report import ReportTable
from revbench.flows.artifact_markdown import (
    WRAP,
    evaluation_markdown,
    narrow_cell,
    narrow_header,
    narrow_tables,
    wrap_line,
)
from revbench.flows.ratings import flags_markdown
from revbench.replay.server import free_port
from tests.evaluation.test_results_page import write_benchmark
from tests.support.browser import chromium

TITLE = "Towards Causal Few-Shot Medical Imaging: A Benchmark Based on Medical Image Segmentation"


def flags() -> tuple[pl.DataFrame, pl.DataFrame, dict[str, str]]:
    """Two flags of one respondent on papers with long titles, their ratings and the titles."""
    papers = ["2610.00030", "2609.00115"]
    frame = pl.DataFrame({
        "flag_id": ["burst:inv_91ef2a64153ecaa63900", "near_zero_variance:author_2aef5b861776"],
        "rule": ["burst", "near_zero_variance"], "reviewer_id": ["author_2aef5b861776"] * 2,
        "paper_ids": [papers, papers],
        "evidence": [json.dumps({"max_in_window": 4, "seconds_per_paper": 0.025, "span_seconds": 0.075}),
                     json.dumps({"n": 2, "variance": 0.0})]})
    ratings = pl.DataFrame({"reviewer_id": ["author_2aef5b861776"] * 2, "paper_id": papers, "rating": [3.0, 3.0]})
    return frame, ratings, {p: f"{TITLE} ({p})" for p in papers}


def shown_lines(cell: str) -> list[str]:
    """A cell's lines as shown (links as their text, markup left out)."""
    import re

    return [re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line).replace("**", "").replace("`", "").strip()
            for line in cell.split("<br>")]


def test_an_interval_goes_under_its_value_and_bold_stays_on_both() -> None:
    assert narrow_cell("0.271 [0.19, 0.38]") == "0.271 <br>[0.19, 0.38]"
    assert narrow_cell("**0.271 [0.19, 0.38]**") == "**0.271** <br>**[0.19, 0.38]**"
    assert narrow_cell("-0.218 [-0.317, -0.108]") == "-0.218 <br>[-0.317, -0.108]"
    assert narrow_cell("[2609.00115](https://arxiv.org/abs/2609.00115) = 3") == "[2609.00115](https://arxiv.org/abs/2609.00115) = 3"


def test_long_cells_wrap_and_keep_links_and_code_whole() -> None:
    assert wrap_line("embedding:pooling=topk_mean:3") == ["embedding:", "pooling=", "topk_mean:3"]
    cell = narrow_cell(f"[2610.00030](https://arxiv.org/abs/2610.00030) “{TITLE}” = 5<br>`near_zero_variance:author_2aef5b861776`")
    assert "[2610.00030](https://arxiv.org/abs/2610.00030)" in cell and "`near_zero_variance:author_2aef5b861776`" in cell
    assert all(len(line) <= WRAP for line in shown_lines(cell) if "near_zero" not in line)  # a code span is never cut
    assert " ".join(shown_lines(cell)[:-1]) == f"2610.00030 “{TITLE}” = 5"  # nothing lost, only broken


def test_headers_break_between_words_and_keep_their_names() -> None:
    assert narrow_header("easy_accuracy") == "easy_<br>accuracy"
    assert narrow_header("InstitutionDiversity@10") == "Institution<br>Diversity<br>@10"
    assert narrow_header("loss") == "loss" and narrow_header("`flag id`") == "`flag id`"


def test_only_tables_change_and_escaped_pipes_stay_in_their_cell() -> None:
    md = "# A title that is rather long, longer than a cell\n\n| scorer | order holds |\n|---|---|\n| a \\| b | 0.3 [0.2, 0.4] |\n\n- a note"
    out = narrow_tables(md)
    assert out.split("\n")[0] == md.split("\n")[0] and out.endswith("- a note")
    assert "| scorer | order <br>holds |" in out and "| a \\| b | 0.3 <br>[0.2, 0.4] |" in out
    assert narrow_tables(out) == out  # published once more (publish_markdown narrows again): unchanged
    fenced = "```\n| a rather long cell of a block | b |\n|---|---|\n```"
    assert narrow_tables(fenced) == fenced  # a fenced block (a manifest, an email) is left as it is


def test_the_scorer_pairs_come_one_table_per_split() -> None:
    pairs = ReportTable("Can the benchmark tell the scorers apart?", ["scorer A", "scorer B", "split", "diff [95% CI]"],
                        [["tpms", "trivial", "wh · pointwise", "-0.2 [-0.3, -0.1]"],
                         ["tpms", "trivial", "wh · paper_centric", "-0.1 [-0.2, 0.0]"]])
    out = evaluation_markdown([ReportTable("### wh · pointwise", ["scorer", "loss"], [["tpms", "0.3"]]), pairs], ["w"])
    assert "apart? · wh · pointwise\n" in out and "apart? · wh · paper_centric\n" in out
    headers = [line for line in out.split("\n") if line.startswith("| scorer")]
    assert [h.replace(" <br>", " ") for h in headers[1:]] == ["| scorer A | scorer B | diff [95% CI] |"] * 2
    assert out.endswith("> warning: w")


def test_the_flags_come_in_two_columns_with_every_fact() -> None:
    md = flags_markdown(*flags())
    header = next(line for line in md.split("\n") if line.startswith("|"))
    assert header == "| flag | ratings in doubt |"
    row = next(line for line in md.split("\n") if line.startswith("| **author_2aef5b861776**"))
    assert "`burst:inv_91ef2a64153ecaa63900`" in row and "span_seconds=0.075" in row and TITLE in row
    assert flags_markdown(flags()[0].clear(), flags()[1]) == "No flags."


TABLE_FITS = """() => [...document.querySelectorAll('table')].map(t => {
  let box = t.parentElement;
  while (box && !['auto', 'scroll', 'hidden'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
  return {cols: t.rows[0].cells.length, table: Math.round(t.getBoundingClientRect().width),
          box: box ? Math.round(box.getBoundingClientRect().width) : null};
})"""
"""Each table's width beside that of the box that scrolls it (the UI hides that box's scroll bar)."""


def _api(api: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(f"{api}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


@pytest.fixture
def ui_server(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], subprocess.Popen[str]]]:
    """``revbench ui`` on a data folder of this test's own, as a user starts it: yields its API,
    the environment of commands on the folder, and the process (stopped after, as Ctrl-C stops it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env |= {"REVBENCH_DATA_DIR": str(tmp_path / "data")}
    port = free_port()
    ui = subprocess.Popen([str(Path(sys.executable).parent / "revbench"), "ui", "--port", str(port)], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marker = tmp_path / "data" / "prefect" / "revbench-ui.json"
    deadline = time.monotonic() + 240
    try:
        while not marker.exists():
            assert ui.poll() is None and time.monotonic() < deadline, "revbench ui did not start"
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/api", env, ui
    finally:
        if ui.poll() is None:
            ui.send_signal(signal.SIGTERM)
            try:
                ui.wait(60)
            except subprocess.TimeoutExpired:
                ui.kill()


@pytest.mark.slow
def test_the_ui_shows_a_run_made_meanwhile_and_its_tables_fit_at_1280_pixels(ui_server, tmp_path: Path) -> None:
    api, env, ui = ui_server
    files = write_benchmark(tmp_path / "bench", 1)
    named = {"scores_of_a_rather_long_model_name": files["<b>close</b>"], "rough": files["rough"]}
    done = subprocess.run([str(Path(sys.executable).parent / "revbench"), "evaluate", "-b", f"openreview={tmp_path / 'bench'}",
                           "-s", "trivial", "-s", "tpms", "--bootstrap", "50", "--track",
                           *(a for n, p in named.items() for a in ("-p", f"{n}={p}"))],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "no second server is started" in done.stderr and "Starting temporary server" not in done.stdout + done.stderr
    runs = _api(api, "/flow_runs/filter", {"limit": 50})
    assert [r["name"] for r in runs if r["state_type"] == "COMPLETED"]  # the command's run, in the UI's database
    flagged = _api(api, "/artifacts/", {"type": "markdown", "key": "ratings-flags", "data": narrow_tables(flags_markdown(*flags())),
                                        "description": "the flags as the ratings flow publishes them"})
    report = _api(api, "/artifacts/filter", {"artifacts": {"key": {"any_": ["evaluation-report"]}}, "limit": 1})
    assert report and " <br>[" in report[0]["data"]  # published narrowed
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for artifact in (flagged, report[0]):
            page.goto(f"{api.removesuffix('/api')}/artifacts/artifact/{artifact['id']}")
            page.wait_for_selector("table", timeout=60_000)
            widths = page.evaluate(TABLE_FITS)
            assert widths and all(w["box"] is not None and w["table"] <= w["box"] for w in widths), (artifact["key"], widths)
        page.goto(f"{api.removesuffix('/api')}/runs")
        page.get_by_text(runs[0]["name"]).first.wait_for(timeout=60_000)
    ui.send_signal(signal.SIGTERM)
    out, _ = ui.communicate(timeout=60)
    assert "Prefect UI: http://127.0.0.1:" in out and "telemetry off" in out
    assert not [line for line in out.splitlines() if any(w in line for w in ("Traceback", "ERROR", "database is locked"))]
