"""Boundary cases an adversary tried (issue 20, "Why" 9-12, 14, 15): each through the command line
where it was found, with the exit code, the one line, and nothing written where nothing should be."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.evaluation.evaluate import OWN_COVERAGE, Evaluator, cross_benchmark_average
from revbench.evaluation.importers.warehouse import pairwise_splits
from revbench.evaluation.model import (
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    RATINGS_SCHEMA,
    SCORES_SCHEMA,
    SPLIT_AVERAGE,
    Benchmark,
    Scores,
    Split,
    frame,
)
from revbench.evaluation.report import report_tables, results_frame
from revbench.schemas.tables import RATING_STATUSES, RATINGS, REJECT_REASONS, REJECTS
from revbench.warehouse import Warehouse
from tests.support.cli import RATED, evaluate_cli, gold_row, nothing_written, one_line_error, write_gold
from tests.support.common import run_cli
from tests.support.evaluation import write_openreview


@pytest.fixture
def data_dir(isolated_env: Path) -> Path:
    return isolated_env / "data"


# Why 9: --baseline must name a scorer of the run, before any work.

@pytest.mark.parametrize("baseline", ["tmps", "embedding", "oracle_typo"])
def test_a_baseline_that_is_no_scorer_of_the_run_is_refused_before_work(tmp_path: Path, data_dir: Path,
                                                                        baseline: str) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "oracle.json").write_text(json.dumps(RATED))
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-s", "trivial", "-s", "tpms",
                    "-p", f"oracle={tmp_path / 'oracle.json'}", "--baseline", baseline)
    one_line_error(*res, 2, f"--baseline '{baseline}' is not a scorer of this run", "trivial, tpms, oracle")
    nothing_written(data_dir, tmp_path)


@pytest.mark.parametrize("baseline", ["tpms", "tpms:compat=revbench", "oracle"])
def test_a_baseline_of_the_run_gives_paired_differences(tmp_path: Path, baseline: str) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "oracle.json").write_text(json.dumps(RATED))
    code, out, err = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-s", "trivial", "-s", "tpms",
                               "-p", f"oracle={tmp_path / 'oracle.json'}", "--baseline", baseline, "--bootstrap", "20")
    assert code == 0, out + err
    label = "tpms" if baseline.startswith("tpms") else baseline
    assert any(r["scorer"] == f"trivial - {label}" for r in json.loads((tmp_path / "rows.json").read_text()))


# Why 10: a truncated warehouse is damaged, wherever it is opened and whenever the damage is met.

def _filled_warehouse(path: Path, n: int = 20_000) -> bytes:
    """A warehouse whose rejects and ratings fill data blocks beyond its header (random text, so
    they do not compress into the header's block)."""
    def hexes() -> list[str]:
        return [os.urandom(16).hex() for _ in range(n)]

    with Warehouse.open(path) as wh:
        wh.upsert(REJECTS, pl.DataFrame({
            "arxiv_id": [f"2601.{i:05d}" for i in range(n)], "version": [1] * n, "stage": ["extract"] * n,
            "reason": [REJECT_REASONS[i % len(REJECT_REASONS)] for i in range(n)], "detail": hexes(),
            "input_hash": hexes(), "recorded_at": [datetime(2026, 1, 1, tzinfo=UTC)] * n}))
        wh.upsert(RATINGS, pl.DataFrame({
            "reviewer_id": hexes(), "paper_id": [f"2601.{i:05d}" for i in range(n)], "rating": [1 + i % 5 for i in range(n)],
            "invitation_id": hexes(), "round": [1] * n, "event_id": list(range(n)),
            "rated_at": [datetime(2026, 1, 1, tzinfo=UTC)] * n, "n_events": [1] * n, "status": [RATING_STATUSES[0]] * n}))
    return path.read_bytes()


def test_a_truncated_warehouse_is_damaged_on_every_read_path(data_dir: Path, tmp_path: Path) -> None:
    full = _filled_warehouse(tmp_path / "full.duckdb")
    data_dir.mkdir(parents=True)
    path = data_dir / "warehouse.duckdb"
    commands = {"status": ["status"], "evaluate": ["evaluate", "-b", "warehouse", "-s", "trivial", "--no-track"],
                "report": ["report", "--releases"], "flow": ["ratings", "--no-track", "--no-evaluate"]}
    damaged: dict[str, int] = {name: 0 for name in commands}
    for cut in (1000, len(full) // 20, len(full) // 10, len(full) // 5):
        for name, args in commands.items():
            path.write_bytes(full[:cut])
            for extra in data_dir.glob("warehouse.duckdb.*"):
                extra.unlink()
            code, out, err = run_cli(*args)
            # Never the raw DuckDB error with exit 1: the damaged-file line, or the command's own answer.
            assert code != 1, f"{name} at {cut} bytes: {err}"
            if code == 5:
                damaged[name] += 1
                if name == "flow":  # it logs its progress first; its error is still one line, the last
                    err = err.splitlines()[-1]
                one_line_error(code, out, err, 5, str(path), "cannot be read", "move it aside")
                if name != "flow":  # a read-only open leaves the file as it was
                    assert path.read_bytes() == full[:cut]
    assert all(damaged.values()), damaged


def test_a_file_that_is_not_duckdb_is_damaged(data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    path = data_dir / "warehouse.duckdb"
    path.write_text("PAR1 this is a parquet file, honestly\n" * 200)
    before = path.read_bytes()
    for args in (["status"], ["evaluate", "-b", "warehouse", "--no-track"]):
        one_line_error(*run_cli(*args), 5, str(path), "move it aside")
    assert path.read_bytes() == before


# Why 11: duplicates in an input file are an error naming the file and the first duplicate.

def test_a_repeated_key_in_json_predictions_is_refused(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    text = '{"ir": {"s1": 0.9, "s2": 0.1, "s1": 0.0}, "gnn": {"s1": 0.2, "s2": 0.8}}'
    (tmp_path / "dup.json").write_text(text)
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"x={tmp_path / 'dup.json'}")
    one_line_error(*res, 2, "dup.json", "key 's1' appears twice in the object at 'ir'")
    nothing_written(data_dir, tmp_path)
    (tmp_path / "dup.json").write_text('{"ir": {"s1": 0.9, "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}, "ir": {"s1": 0.1}}')
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"x={tmp_path / 'dup.json'}")
    one_line_error(*res, 2, "dup.json", "key 'ir' appears twice in the top-level object")
    nothing_written(data_dir, tmp_path)


def test_a_repeated_pair_in_csv_predictions_is_refused(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "dup.csv").write_text("s1,~ir,0.9\ns2,~ir,0.1\ns1,~gnn,0.2\ns2,~gnn,0.8\ns1,ir,0.0\n")
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"x={tmp_path / 'dup.csv'}")
    one_line_error(*res, 2, "dup.csv row 5", "reviewer 'ir' and paper 's1' already have a score in row 1")
    nothing_written(data_dir, tmp_path)


def _flat(n: int = 3) -> list[dict]:
    return [{"anchor_id": f"a{i}", "positive_id": f"p{i}", "negative_id": f"n{i}", "type": "paper_centric",
             "positive_score": 0.7, "negative_score": 0.2, "positive_ref_score": 4, "negative_ref_score": 2} for i in range(n)]


def test_a_repeated_tuple_or_two_scores_of_one_pair_in_lr_flat_predictions_are_refused(tmp_path: Path,
                                                                                     data_dir: Path) -> None:
    items = _flat()
    items.append(dict(items[0]))
    (tmp_path / "rate.json").write_text(json.dumps(items))
    res = evaluate_cli(tmp_path, "-p", f"rate={tmp_path / 'rate.json'}")
    one_line_error(*res, 2, "rate.json item 3", "the same tuple (a0, p0, n0) as item 0")
    nothing_written(data_dir, tmp_path)
    items = _flat()
    items.append({**items[0], "negative_id": "n9", "positive_score": 0.3})
    (tmp_path / "rate.json").write_text(json.dumps(items))
    res = evaluate_cli(tmp_path, "-p", f"rate={tmp_path / 'rate.json'}")
    one_line_error(*res, 2, "rate.json item 3 positive_score", "have score 0.3 here and 0.7 in item 0")
    nothing_written(data_dir, tmp_path)


def test_a_repeated_pair_in_a_ratings_file_is_refused(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    with (data / "ratings.csv").open("a") as f:
        f.write("~ir,s1,1\n")
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}")
    one_line_error(*res, 2, "ratings.csv row 6", "reviewer 'ir' and paper 's1' already have a rating in row 2")
    nothing_written(data_dir, tmp_path)


def test_a_repeated_tuple_of_an_lrbench_file_is_refused(tmp_path: Path) -> None:
    from revbench.errors import InputError
    from revbench.evaluation.importers import load_benchmark

    tuple_ = {"anchor": {"paper_id": "q1", "paper_title": "t", "abstract": "a"},
              "positive": {"author_id": "a1", "score": 5, "papers": []},
              "negative": {"author_id": "a2", "score": 1, "papers": []},
              "type": "paper_centric"}
    (tmp_path / "lr").mkdir()
    (tmp_path / "lr" / "evaluations_pc.json").write_text(json.dumps([tuple_, {**tuple_, "type": "paper_centric"}]))
    with pytest.raises(InputError, match=r"evaluations_pc.json item 1: the same tuple as item 0"):
        load_benchmark("lrbench", tmp_path / "lr")


@pytest.mark.parametrize(("rows", "needle"), [
    ([gold_row("ir", ["s1", "s2"], ["5", "1"]), gold_row("gnn", ["s1", "s2"], ["1", "5"]), gold_row("ir", ["s1"], ["2"])],
     "row 4: participant 'ir' also has row 2"),
    ([gold_row("ir", ["s1", "s2", "s1"], ["5", "1", "2"])], "row 2: Paper3 's1' is also Paper1"),
])
def test_a_repeated_participant_or_paper_in_the_gold_standard_is_refused(tmp_path: Path, data_dir: Path,
                                                                         rows: list[str], needle: str) -> None:
    gold = write_gold(tmp_path / "gold", rows)
    res = evaluate_cli(tmp_path, "-b", f"goldstandard={gold}")
    one_line_error(*res, 2, "evaluations.tsv", needle)
    nothing_written(data_dir, tmp_path)


# Why 12: oversize numbers, deep nesting and malformed list settings name the file or the variable.

@pytest.mark.parametrize(("score", "needle"), [
    ("1" + "0" * 400, "10000000... (401 characters) is too large to be a number here"),
    ("-9" * 2600, "characters) is too large"),  # beyond Python's 4,300-digit conversion limit
    ("1e400", "'1e400' is too large to be a number here"),
])
def test_a_score_too_large_for_a_number_is_named(tmp_path: Path, data_dir: Path, score: str, needle: str) -> None:
    data = write_openreview(tmp_path / "or")
    literal = score if not score.startswith("-9") else "-" + "9" * 5200
    (tmp_path / "big.json").write_text('{"ir": {"s1": %s, "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}}' % literal)
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"x={tmp_path / 'big.json'}")
    one_line_error(*res, 2, "big.json reviewer 'ir' paper 's1'", needle)
    nothing_written(data_dir, tmp_path)


def test_a_score_too_large_in_a_csv_is_named(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "big.csv").write_text("s1,~ir,1" + "0" * 400 + "\ns2,~ir,0.1\ns1,~gnn,0.2\ns2,~gnn,0.8\n")
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"x={tmp_path / 'big.csv'}")
    one_line_error(*res, 2, "big.csv row 1 score", "is too large to be a number here")
    nothing_written(data_dir, tmp_path)


def test_json_nested_deeper_than_the_parser_goes_is_named(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"x={tmp_path / 'deep.json'}")
    one_line_error(*res, 2, "deep.json", "nested deeper than the parser allows")
    nothing_written(data_dir, tmp_path)
    profile = next((data / "archives").glob("*.jsonl"))
    profile.write_text('{"id": "z", "content": ' * 100_000 + "1" + "}" * 100_000 + "\n")
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}")
    one_line_error(*res, 2, f"{profile.name} line 1", "nested deeper")
    nothing_written(data_dir, tmp_path)


@pytest.mark.parametrize(("value", "shown"), [
    ("cs.AI,cs.CL", "expected a JSON list, e.g. REVBENCH_ARXIV__CATEGORIES='[\"cs.AI\", \"cs.CL\"]'"),
    ("[cs.AI", "expected a JSON list, e.g. REVBENCH_ARXIV__CATEGORIES='[\"cs.AI\"]'"),
    ("[" * 50_000, "(50000 characters) in the environment: expected a JSON list"),
])
def test_a_list_setting_that_is_not_a_json_list_names_the_variable(data_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   value: str, shown: str) -> None:
    monkeypatch.setenv("REVBENCH_ARXIV__CATEGORIES", value)
    one_line_error(*run_cli("status"), 2, "REVBENCH_ARXIV__CATEGORIES=", shown)
    assert not data_dir.exists()


def test_a_list_setting_in_dotenv_names_the_file_and_a_secret_is_not_echoed(isolated_env: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (isolated_env / ".env").write_text("REVBENCH_EMBED__MODELS=all-MiniLM-L6-v2,specter2\n")
    one_line_error(*run_cli("status"), 2, "REVBENCH_EMBED__MODELS='all-MiniLM-L6-v2,specter2' in .env",
                    "'[\"all-MiniLM-L6-v2\", \"specter2\"]'")
    (isolated_env / ".env").unlink()
    monkeypatch.setenv("REVBENCH_SURVEY__OLD_SIGNING_KEYS", "old-secret-1,old-secret-2")
    line = one_line_error(*run_cli("status"), 2, "REVBENCH_SURVEY__OLD_SIGNING_KEYS in the environment", "JSON list")
    assert "old-secret" not in line


# Why 14: reports that cannot mislead.

def _world() -> tuple[Benchmark, list[Scores]]:
    """Six reviewers with pointwise ratings; the reviewer-centric tuples hold every pair of
    differing ratings (the same pairs as the pointwise split), the paper-centric ones pair
    reviewers of one paper. 'solo' has no publications: text scorers leave its pairs out."""
    reviewers = ["r1", "r2", "r3", "r4", "r5", "solo"]
    papers = ["p1", "p2", "p3", "p4"]
    grid = {"r1": [5, 1, 3, 2], "r2": [1, 5, 2, 3], "r3": [4, 2, 5, 1], "r4": [2, 4, 1, 5], "r5": [5, 3, 1, 2],
            "solo": [1, 2, 5, 4]}
    ratings = frame([dict(reviewer_id=r, paper_id=p, rating=float(grid[r][i])) for r in reviewers
                     for i, p in enumerate(papers)], RATINGS_SCHEMA)
    tuples = []
    for r in reviewers:
        for i, p in enumerate(papers):
            for j, q in enumerate(papers):
                if grid[r][i] > grid[r][j]:
                    tuples.append(dict(kind="reviewer_centric", anchor_id=r, positive_id=p, negative_id=q,
                                       rating_pos=grid[r][i], rating_neg=grid[r][j]))
    for i, p in enumerate(papers):
        for a in reviewers:
            for b in reviewers:
                if grid[a][i] > grid[b][i]:
                    tuples.append(dict(kind="paper_centric", anchor_id=p, positive_id=a, negative_id=b,
                                       rating_pos=grid[a][i], rating_neg=grid[b][i]))
    bench = Benchmark("w", "1", frame([dict(paper_id=p, title=p) for p in papers], PAPERS_SCHEMA),
                      [frame(None, PROFILE_SCHEMA)],
                      [Split("pointwise", ratings=ratings, candidate_lists=True), *pairwise_splits(pl.DataFrame(tuples))])

    def scores(name: str, f, skip: set[str] = frozenset()) -> Scores:  # type: ignore[assignment]
        return Scores(name, [frame([dict(reviewer_id=r, paper_id=p, score=float(f(r, i))) for r in reviewers if r not in skip
                                    for i, p in enumerate(papers)], SCORES_SCHEMA)], name)

    return bench, [
        scores("trivial", lambda r, i: 0.0),
        # Perfect where it scores, silent on 'solo' (the paper-centric tuples it leaves are the hard ones).
        scores("partial", lambda r, i: grid[r][i], skip={"solo"}),
        # Scores everything, agrees with the raters more often than not.
        scores("complete", lambda r, i: grid[r][i] if r in ("r1", "r2", "r3") else -grid[r][i] if r == "r4" else 0),
    ]


def test_scorers_are_compared_on_the_pairs_they_all_cover() -> None:
    bench, runs = _world()
    ev = Evaluator(bench, n_resamples=50)
    assert ev.same_as == {"reviewer_centric": "pointwise"}
    rows = ev.evaluate_all(runs)
    loss = {(r.split, r.scorer): r for r in rows if r.metric == "loss"}
    for split in ("pointwise", "paper_centric"):
        # One subset for every scorer: the same number of pairs behind each value.
        assert len({loss[split, s.scorer].n for s in runs}) == 1
        assert loss[split, "partial"].coverage < 1.0 and loss[split, "trivial"].coverage == 1.0
        # trivial keeps its value on every pair, under its own name and with its coverage.
        own = loss[split + OWN_COVERAGE, "trivial"]
        assert own.n > loss[split, "trivial"].n and own.coverage == 1.0
    assert loss["pointwise", "partial"].value == 0.0
    # The reviewer-centric split holds the pointwise pairs: the same numbers, counted once in the average.
    assert loss["reviewer_centric", "complete"].value == loss["pointwise", "complete"].value
    average = loss[SPLIT_AVERAGE, "complete"]
    assert average.n == 2
    assert average.value == pytest.approx((loss["pointwise", "complete"].value + loss["paper_centric", "complete"].value) / 2)
    assert loss[SPLIT_AVERAGE, "partial"].coverage == min(loss[s, "partial"].coverage for s in ("pointwise", "paper_centric"))


def test_the_report_never_marks_trivial_or_a_partial_scorer_over_a_complete_one_best() -> None:
    bench, runs = _world()
    ev = Evaluator(bench, n_resamples=50)
    df = results_frame(ev.evaluate_all(runs))
    same = {("w", split): ("w", other) for split, other in ev.same_as.items()}
    tables = report_tables(df, same_as=same)
    titles = [t.title for t in tables]
    assert not any(t.startswith("### w · reviewer_centric") for t in titles)
    assert any(t.startswith("### w · pointwise = reviewer_centric (the same pairs") for t in titles)
    assert any(t.startswith("### w · average of pointwise, paper_centric") for t in titles)
    for t in tables:
        if not t.title.startswith("### "):
            continue
        rows = {r[0]: r for r in t.rows}
        assert "coverage" in t.header, t.title  # a partial scorer is in every table, so is its coverage
        assert not any("**" in c for c in rows["trivial"]), t.title
        assert not any("**" in c for c in rows["partial"]), t.title  # 'complete' covers every pair
    headline = next(t for t in tables if t.title.startswith("### w · paper_centric:"))
    assert "pairs all of them cover" in headline.title
    assert any("**" in c for c in dict((r[0], r) for r in headline.rows)["complete"])
    # Without a complete scorer but trivial, the partial one is the best (on the common pairs).
    tables = report_tables(df.filter(pl.col("scorer") != "complete"), same_as=same)
    head = next(t for t in tables if t.title.startswith("### w · paper_centric:"))
    rows = {r[0]: r for r in head.rows}
    assert any("**" in c for c in rows["partial"]) and not any("**" in c for c in rows["trivial"])


def test_the_cross_benchmark_average_counts_a_repeated_split_once() -> None:
    bench, runs = _world()
    ev = Evaluator(bench, n_resamples=0)
    rows = ev.evaluate_all(runs)
    other = [r for r in Evaluator(Benchmark("v", "1", bench.submissions, bench.draws, bench.splits[:1]), 0)
             .evaluate_all(runs) if r.split == "pointwise"]
    avg = {(r.scorer, r.metric): r for r in cross_benchmark_average(rows + other, {("w", "reviewer_centric")})}
    assert avg["complete", "loss"].n == 3  # w pointwise, w paper_centric, v pointwise


def test_the_report_of_a_run_with_a_reviewer_without_publications(tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (data / "archives" / "~solo.jsonl").write_text("")
    with (data / "ratings.csv").open("a") as f:
        f.write("solo,s1,5\nsolo,s2,1\n")
    code, out, err = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-s", "trivial", "-s", "tpms", "--bootstrap", "20")
    assert code == 0, out + err
    report = (tmp_path / "report" / "report.md").read_text()
    head = "\n\n".join(report.split("\n\n")[:2])  # the first table, with its title
    assert "every scorer on the 2 pairs all of them cover" in head
    lines = {ln.split("|")[1].strip(): ln for ln in head.splitlines() if ln.startswith("| ")}
    assert "**" not in lines["trivial"] and "66.6%" in lines["tpms"] and "**" in lines["tpms"]
    rows = json.loads((tmp_path / "rows.json").read_text())
    trivial = {r["split"]: r for r in rows if r["scorer"] == "trivial" and r["metric"] == "loss"}
    assert trivial["pointwise"]["n"] == 2 and trivial["pointwise" + OWN_COVERAGE]["n"] == 3


# Why 15: a demo's data keeps its settings.

def _demo_data(data_dir: Path) -> None:
    from revbench.app.demo import DEMO_KEY_FILES, keep_demo_settings
    from revbench.settings import Settings

    keep_demo_settings(Settings(data_dir=data_dir))
    (data_dir / DEMO_KEY_FILES["survey.signing_key"]).write_text("the-demo-signing-key\n")


def test_later_commands_on_a_demos_data_use_its_settings(data_dir: Path, isolated_env: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from revbench.app.demo import DEMO_RATINGS
    from revbench.app.entry import build_settings

    plain = build_settings()
    _demo_data(data_dir)
    assert "the-demo-signing-key" not in (data_dir / ".demo-settings.json").read_text()
    s = build_settings()
    assert s.ratings.burst_window_seconds == DEMO_RATINGS["burst_window_seconds"] != plain.ratings.burst_window_seconds
    assert s.ratings.min_seconds_per_paper == DEMO_RATINGS["min_seconds_per_paper"]
    assert s.ratings.unattended_decision == "drop" and s.pools.queries_per_category == 10
    assert s.survey.signing_key is not None and s.survey.signing_key.get_secret_value() == "the-demo-signing-key"
    assert s.release.id_key is None  # the demo never made its release key here
    note = capsys.readouterr().err
    assert "holds a demo's data" in note and "REVBENCH_RATINGS__BURST_WINDOW_SECONDS=0.3" in note
    assert "the-demo-signing-key" not in note and "(the demo's key)" in note
    # What the user sets wins, in the environment or in .env.
    monkeypatch.setenv("REVBENCH_RATINGS__BURST_WINDOW_SECONDS", "7")
    (isolated_env / ".env").write_text("REVBENCH_POOLS__QUERIES_PER_CATEGORY=55\n")
    s = build_settings()
    assert s.ratings.burst_window_seconds == 7 and s.pools.queries_per_category == 55
    assert s.ratings.min_seconds_per_paper == DEMO_RATINGS["min_seconds_per_paper"]
    assert "BURST_WINDOW" not in capsys.readouterr().err
    # The demo itself does not read them back.
    assert build_settings(demo_data=False).ratings.min_seconds_per_paper == plain.ratings.min_seconds_per_paper


def test_a_command_on_a_demos_data_says_so_and_a_broken_file_is_one_line(data_dir: Path) -> None:
    _demo_data(data_dir)
    code, out, err = run_cli("status")
    assert "holds a demo's data" in err and "REVBENCH_RATINGS__UNATTENDED_DECISION=drop" in err
    (data_dir / ".demo-settings.json").write_text('{"settings": {"ratings": {"burst_window_seconds": -1}}}')
    one_line_error(*run_cli("status"), 2, ".demo-settings.json holds a setting", "delete it")
