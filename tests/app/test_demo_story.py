"""``make demo`` tells its story on one screen: run as a newcomer runs it (tracked, read in an
80-column log), twice in a fresh folder, then once more with ``-v``. The default run prints at
most about 60 lines, none over 100 characters but for a path or a URL, the evaluation as one table
that fits 80 columns, and ends with how to open the UI; the second says what it did not need to
do; the full output goes to ``data/reports/demo.txt`` and comes back on the screen with ``-v``,
without Prefect's per-task lines by default and without a line said twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app.test_docs_numbers import gen

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 60
WIDEST = 100
TABLE_WIDTH = 80
PATH_OR_URL = re.compile(r"\S*/\S*")
"""A word with a slash: a path or a URL, which a log keeps whole however long."""


def problems(out: str) -> list[str]:
    """What keeps ``out`` from being the demo's one screen: too many lines, a line over 100
    characters once its paths and URLs are taken out, a row of the evaluation table over 80, or
    a last line other than how to open the UI."""
    lines = out.splitlines()
    found = [f"{len(lines)} lines"] if len(lines) > MAX_LINES else []
    found += [f"{len(x)} characters: {x[:60]}" for x in lines if len(PATH_OR_URL.sub("", x)) > WIDEST]
    found += [f"a table row of {len(x)}: {x[:60]}" for x in lines if re.search(r"\d\.\d{3} \[", x) and len(x) > TABLE_WIDTH]
    if not lines or not ("revbench ui" in lines[-1] and "http://127.0.0.1:4200" in lines[-1]):
        found.append(f"the last line is not the UI hint: {lines[-1] if lines else '(none)'}")
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """``revbench demo`` in a fresh folder, then again, then again with ``-v``."""
    work = tmp_path_factory.mktemp("demo-story")
    # A fresh folder and Prefect home of its own; nothing that quiets or configures it for us.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("REVBENCH_", "PREFECT_API", "PREFECT_LOGGING", "PREFECT_HOME"))}
    env.update(REVBENCH_DATA_DIR=str(work / "data"), PREFECT_HOME=str(work / "data" / "prefect"), COLUMNS="80")
    out = {}
    for name, extra in (("first", []), ("second", []), ("verbose", ["-v"])):
        out[name] = subprocess.run([sys.executable, "-m", "revbench", "demo", "--papers", "120", "--fault-rate", "0",
                                    *extra], cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert out[name].returncode == 0, out[name].stdout[-2000:] + out[name].stderr[-3000:]
        if name == "first":
            out["facts"] = json.loads((work / "data" / "reports" / "demo.json").read_text())  # type: ignore[assignment]
            out["report"] = (work / "data" / "reports" / "demo.txt").read_text()  # type: ignore[assignment]
    return out


@pytest.mark.slow
def test_the_first_run_tells_its_story_on_one_screen(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    first = runs["first"]
    assert problems(first.stdout) == [], first.stdout
    said = first.stdout
    for figure in ("ingest: ", "graph: ", "authors: ", "pools, round 1: ", "COI audit against the truth: 0 violations",
                   "survey: ", "link scanners: ", "0 recorded", "ratings: ", "flags: ", "tuples: ", "release v1: ",
                   "targets hold", "Full output: ", "demo.txt", "report.md"):
        assert figure in said, figure
    # The evaluation is one table: a row per scorer, with its interval.
    facts = runs["facts"]
    assert len(re.findall(r"^\S+ +\d\.\d{3} \[\d\.\d\d, \d\.\d\d\]", said, re.M)) == len(facts["losses"])  # type: ignore[index]
    # Prefect's lines stay in its UI, the details in the report: nothing else on the screen.
    assert not re.search(r"Task run '|Flow run '|\| INFO|Starting temporary server", said + first.stderr), first.stderr[:2000]
    assert first.stderr.strip() == "", first.stderr[:2000]


@pytest.mark.slow
def test_the_second_run_says_what_it_did_not_need_to_do(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    second = runs["second"].stdout
    assert problems(second) == [], second
    assert len(second.splitlines()) < len(runs["first"].stdout.splitlines())
    block = second.split("Nothing new since the last run, so it did not need to:\n")[1]
    for skipped in ("fetch papers: ", "ask for references: ", "call the LLM: ", "email anyone: ", "pull answers: ",
                    "build a release: nothing changed since v1"):
        assert skipped in block, skipped
    assert "ingest: " not in second and "survey: " not in second and "nothing was new" in second


@pytest.mark.slow
def test_the_full_output_goes_to_the_report_and_to_the_screen_with_v(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    report = str(runs["report"])
    for table in ("Ingest stages", "Author disambiguation", "Can the benchmark tell the scorers apart?", "Ranking metrics",
                  "Diversity of the top k", "Quality flags"):
        assert table in report, table
    verbose = runs["verbose"]
    assert "Can the benchmark tell the scorers apart?" in verbose.stdout and "Task run" in verbose.stderr
    # What the check would say of the full output: the test can fail.
    assert any(p.endswith(" lines") for p in problems(report)) and problems(verbose.stdout)


@pytest.mark.slow
def test_no_line_is_said_twice(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    """The survey store's epoch and "Nothing changed" once each, not as a log line and again plain."""
    said = (runs["verbose"].stdout + runs["verbose"].stderr).lower()
    assert said.count("survey store epoch") == 1, said.count("survey store epoch")
    assert said.count("nothing changed since the published release v1") == 1


@pytest.mark.slow
def test_the_facts_render_the_pages_numbers(runs: dict[str, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    """``reports/demo.json`` still holds every fact the README and Getting started render."""
    facts = runs["facts"]
    timing = {"seconds": 1.0, "lines": len(runs["first"].stdout.splitlines()), "widest": 80}
    (tmp_path / "demo.json").write_text(json.dumps({"when": "2026-01-01T00:00:00+00:00", "machine": "2 cores, python 3",
                                                    "first": timing, "second": {**timing, "invitations_sent": 0},
                                                    "facts": facts}))
    g = gen()
    assert f"{facts['ratings']['counts']['kept']:,} kept ratings" in g.demo_readme(tmp_path)  # type: ignore[index]
    assert "planted low-effort respondents" in g.demo_story(tmp_path) and g.demo_timing(tmp_path)
    assert facts["evaluation"]["loss"]["pointwise"] and facts["authors"][0]["authors"]  # type: ignore[index]


def _report(folder: Path, pairs: list[tuple[str, str, bool]],
            scorers: tuple[tuple[str, float], ...] = (("trivial", 0.5), ("tpms", 0.3), ("embedding:pooling=mean", 0.2))) -> Path:
    """An evaluation report folder: three scorers' losses on both splits, and which pairs separate."""
    rows = [{"split": split, "metric": "loss", "scorer": scorer, "value": v, "ci_low": v - 0.05, "ci_high": v + 0.05, "n": 9}
            for split in ("pointwise", "paper_centric") for scorer, v in scorers]
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(rows))
    (folder / "separation.json").write_text(json.dumps([{"split": split, "scorer_a": a, "scorer_b": b, "separated": sep}
                                                        for split in ("pointwise", "paper_centric") for a, b, sep in pairs]))
    return folder


def test_the_best_is_marked_only_where_the_intervals_separate_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from revbench.app.demo_story import Story

    apart = [("embedding:pooling=mean", "tpms", True), ("embedding:pooling=mean", "trivial", True), ("tpms", "trivial", True)]
    facts = Story().evaluation(_report(tmp_path / "apart", apart))
    out = capsys.readouterr().out
    assert re.search(r"^embedding +0\.200 \[0\.15, 0\.25\]\*", out, re.M) and "tpms" in out and "0.300 [0.25, 0.35]*" not in out
    assert facts["best"] == {"pointwise": "embedding:pooling=mean", "paper_centric": "embedding:pooling=mean"}
    assert "embedding: short for embedding:pooling=mean" in out  # the abbreviation, explained once
    close = [("embedding:pooling=mean", "tpms", False), *apart[1:]]
    facts = Story().evaluation(_report(tmp_path / "close", close))
    out = capsys.readouterr().out
    assert "*" not in out.split("\n  ")[0] and "embedding lowest, not separated from tpms: no best" in out
    assert facts["best"] == {"pointwise": None, "paper_centric": None}


def test_no_best_for_a_long_named_scorer_still_fits_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from revbench.app.demo_story import Story

    low, mean = "embedding:pooling=topk_mean:3", "embedding:pooling=mean"
    scorers = (("trivial", 0.5), (mean, 0.3), (low, 0.2), *((f"tpms:variant={i}", 0.3) for i in range(6)))
    pairs = [(low, other, False) for other, _ in scorers[1:] if other != low] + [(low, "trivial", True)]
    Story().evaluation(_report(tmp_path / "long", pairs, scorers))
    out = capsys.readouterr().out
    assert f"pointwise: {low} lowest,\n    not separated from 7 others: no best" in out, out
    assert max(len(x) for x in out.splitlines()) <= 80, out
