"""Weak labels from the graph (exHarmony) on a hand-made warehouse: a query paper's own authors
(held out of their profiles) or the authors of the papers it cites are its positives, among the
reviewers with more than N papers; the agreement with the survey is exact on hand-made pairs; the
folder ``revbench labels`` writes is what ``evaluate -b weak=DIR`` reads, and refused once edited;
it carries the graph around its papers and reviewers, and a scorer reading the label rule's
citations is warned about."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.errors import ReleaseTampered
from revbench.evaluation.importers.registry import load_benchmark
from revbench.evaluation.importers.weak import FILES, write_weak
from revbench.flows.evaluate import evaluate_flow
from revbench.flows.labels import write_labels
from revbench.schemas.graph import CITATIONS, PAPER_TOPICS
from revbench.schemas.tables import AUTHOR_LINKS, COAUTHOR_EDGES, PAPERS, QUERY_SAMPLES, RATINGS
from revbench.settings import Settings
from revbench.tasks.weak_labels import agreement
from revbench.warehouse import Warehouse
from tests.support.cli import one_line_error
from tests.support.common import run_cli

A, B, C, D, E = (f"author_{i:012x}" for i in range(1, 6))
Q1, Q2 = "2609.00001", "2609.00002"
P = {i: f"2609.001{i:02d}" for i in range(1, 8)}
WROTE = {A: [Q1, P[1], P[2]], B: [Q1, P[3]], C: [Q2, P[4], P[5]], D: [P[1]], E: [P[6], P[7]]}
CITES = [(Q1, P[6]), (Q1, P[1]), (Q2, P[3])]  # Q1 cites E's and A's (and D's) work, Q2 B's
RATED = [(A, Q1, 5), (B, Q1, 4), (C, Q1, 2), (E, Q1, 1), (C, Q2, 4), (A, Q2, 1), (D, Q1, 3)]
WORDS = {Q1: "dense retrieval of reviewers", Q2: "graph networks for molecules", P[1]: "retrieval with dense encoders",
         P[2]: "expert finding by retrieval", P[3]: "message passing on molecules", P[4]: "molecular graph learning",
         P[5]: "graph neural networks", P[6]: "learning to rank experts", P[7]: "ranking reviewers with text"}
OUTSIDE = "2609.00999"  # a paper of no weak benchmark: its topic stays out of the graph written
TOPICS = [(Q1, "cs.IR"), (P[1], "cs.IR"), (P[6], "cs.IR"), (Q2, "cs.LG"), (P[3], "cs.LG"), (OUTSIDE, "cs.CV")]
COAUTHORED = [(A, B), (A, D)]  # D is in no expert pool: the second edge stays out


def _warehouse(settings: Settings) -> None:
    now = datetime(2026, 9, 20, tzinfo=UTC)
    authors: dict[str, list[str]] = {}
    for who, papers in WROTE.items():
        for p in papers:
            authors.setdefault(p, []).append(who)
    papers = [dict(arxiv_id=p, version=1, title=t.capitalize(), abstract=f"We study {t}.", primary_category="cs.IR",
                   categories=["cs.IR"], updated=now, year=2026, pdf_sha256="0" * 64, title_similarity=1.0,
                   n_authors=len(authors[p]), input_hash="h", loaded_at=now) for p, t in WORDS.items()]
    links = [dict(arxiv_id=p, position=i, author_id=who, method="singleton", block_key="k")
             for p, whos in authors.items() for i, who in enumerate(whos)]
    queries = [dict(arxiv_id=q, round=1, revision=1, seed=0, category="cs.IR", sampled_at=now) for q in (Q1, Q2)]
    cites = [dict(citing_arxiv_id=a, source="s2", ordinal=i, cited_arxiv_id=b) for i, (a, b) in enumerate(CITES)]
    ratings = [dict(reviewer_id=r, paper_id=p, rating=x, invitation_id=f"inv_{r}", round=1, category="cs.IR", event_id=i,
                    epoch="e1", rated_at=now, n_events=1, status="kept", flags=[]) for i, (r, p, x) in enumerate(RATED)]
    with Warehouse.open(settings.warehouse_path) as wh:
        wh.upsert(PAPERS, pl.DataFrame(papers))
        wh.upsert(AUTHOR_LINKS, pl.DataFrame(links))
        wh.upsert(QUERY_SAMPLES, pl.DataFrame(queries))
        wh.upsert(CITATIONS, pl.DataFrame(cites))
        wh.upsert(RATINGS, pl.DataFrame(ratings, schema=RATINGS.polars_schema))
        wh.upsert(PAPER_TOPICS, pl.DataFrame([dict(arxiv_id=p, scheme="arxiv", topic=t, origin="arxiv", score=None)
                                              for p, t in TOPICS], schema_overrides={"score": pl.Float64}))
        wh.upsert(COAUTHOR_EDGES, pl.DataFrame([dict(author_a=a, author_b=b, n_papers=1, first_year=2026, last_year=2026)
                                                for a, b in COAUTHORED]))


@pytest.fixture
def world(settings: Settings) -> Settings:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    _warehouse(settings)
    return settings


def _positives(d: Path) -> set[tuple[str, str]]:
    labels = pl.read_parquet(d / "labels.parquet")
    return {(p, r) for r, p, x in labels.iter_rows() if x == 1}


def test_authorship_labels_own_authors_held_out_of_their_profiles(world: Settings, tmp_path: Path) -> None:
    r = write_labels(world, "authorship", tmp_path / "weak", experts=1, min_positives=3)
    assert _positives(tmp_path / "weak") == {(Q1, A), (Q1, B), (Q2, C)}
    b = load_benchmark("weak", tmp_path / "weak")
    profiles = b.draws[0]
    assert set(profiles["reviewer_id"]) == {A, B, C, E}  # D wrote one paper: no expert
    assert not profiles.filter(pl.col("paper_id").is_in([Q1, Q2])).height  # their own papers held out
    assert set(profiles.filter(pl.col("reviewer_id") == A)["paper_id"]) == {P[1], P[2]}
    # every other pool reviewer is a candidate (20 negatives asked, 4 in the pool), rated 1
    ratings = b.splits[0].ratings
    assert ratings.height == 8 and set(ratings.filter(pl.col("rating") == 1.0)["reviewer_id"]) == {C, E, A, B}
    assert r.agreement.n_pairs == 6 and r.agreement.auc == 1.0
    assert r.agreement.kendall_tau == pytest.approx(3 / math.sqrt(13), abs=1e-12)


def test_citations_label_the_authors_of_cited_papers_not_the_papers_own(world: Settings, tmp_path: Path) -> None:
    write_labels(world, "citations", tmp_path / "weak", experts=1)
    # Q1 cites P6 (E) and P1 (A, its own author; D, no expert); Q2 cites P3 (B)
    assert _positives(tmp_path / "weak") == {(Q1, E), (Q2, B)}


def test_experts_keep_only_reviewers_with_more_than_n_papers(world: Settings, tmp_path: Path) -> None:
    r = write_labels(world, "authorship", tmp_path / "weak", experts=2)
    assert _positives(tmp_path / "weak") == {(Q1, A), (Q2, C)} and r.reviewers == 2
    assert set(pl.read_parquet(tmp_path / "weak" / "profiles.parquet")["reviewer_id"]) == {A, C}


def test_sampled_candidates_are_fixed_by_the_seed(world: Settings, tmp_path: Path) -> None:
    lists = []
    for run in ("one", "two"):
        write_labels(world, "authorship", tmp_path / run, experts=1, negatives=1, seed=3)
        lists.append(pl.read_parquet(tmp_path / run / "labels.parquet"))
    assert lists[0].equals(lists[1])
    per_paper = lists[0].filter(pl.col("label") == 0).group_by("paper_id").len()
    assert per_paper["len"].to_list() == [1, 1]


def test_agreement_is_exact_on_hand_made_pairs() -> None:
    pairs = pl.DataFrame({"label": [1, 1, 0, 0, 1], "rating": [5.0, 4.0, 4.0, 2.0, 1.0]})
    got = agreement(pairs, min_positives=1)
    # AUC: rated >= 4 {1, 1, 0} against below {0, 1}: 3.5 of 6 pairs ordered (ties count one half)
    assert got.n_pairs == 5 and got.n_positive == 3 and got.auc == pytest.approx(7 / 12, abs=1e-12)
    # tau-b: 3 concordant, 2 discordant; 4 pairs tied in label, 1 in rating, of 10
    assert got.kendall_tau == pytest.approx(1 / math.sqrt(54), abs=1e-12)
    none = agreement(pairs.clear())
    assert none.n_pairs == 0 and none.line().startswith("agreement with the survey: no (reviewer, paper) pair")


def test_agreement_is_withheld_under_the_minimum_of_positives() -> None:
    pairs = pl.DataFrame({"label": [1, 1, 0, 0, 1], "rating": [5.0, 4.0, 4.0, 2.0, 1.0]})
    few = agreement(pairs)  # 3 weak positives, under the default minimum
    assert few.n_positive == 3 and few.kendall_tau is None and few.auc is None and few.too_few
    assert "not measured, 3 weak positives among 5 rated pairs (at least 30 needed)" in few.line()
    enough = agreement(pairs, min_positives=3)
    assert enough.kendall_tau is not None and not enough.too_few


def test_evaluate_reads_the_weak_benchmark_with_ranking_metrics(world: Settings, tmp_path: Path) -> None:
    write_labels(world, "authorship", tmp_path / "weak", experts=1)
    out = evaluate_flow.fn(world, benchmarks=[f"weak={tmp_path / 'weak'}"], scorers=["bm25"], bootstrap=0,
                           report_dir=str(tmp_path / "report"))
    got = {r["metric"]: r["value"] for r in out.rows if r["benchmark"] == "weak" and r["scorer"] == "bm25"}
    assert got["MRR_hard@10"] is not None and 0 < got["MRR_hard@10"] <= 1 and got["NDCG@10"] is not None


def test_the_command_prints_the_agreement_and_a_tampered_file_is_refused_in_one_line(world: Settings, tmp_path: Path,
                                                                                      isolated_env: Path) -> None:
    d = tmp_path / "cli"
    code, out, err = run_cli("labels", "--from", "authorship", "--experts", "1", "--out", str(d), "--min-positives", "3")
    assert code == 0, out + err
    assert "agreement with the survey on 6 pairs (3 weak positives): Kendall tau 0.832, AUC against rating >= 4 1.000" in out
    labels = pl.read_parquet(d / "labels.parquet")
    labels.with_columns(pl.lit(1, pl.Int8).alias("label")).write_parquet(d / "labels.parquet")
    with pytest.raises(ReleaseTampered):
        load_benchmark("weak", d)
    one_line_error(*run_cli("evaluate", "-b", f"weak={d}", "-s", "bm25", "--bootstrap", "0"), 2,
                   str(d / "labels.parquet"), "manifest.json")


def test_the_folder_carries_the_graph_around_its_papers_and_reviewers(world: Settings, tmp_path: Path) -> None:
    write_labels(world, "citations", tmp_path / "weak", experts=1)
    listed = {f["path"] for f in json.loads((tmp_path / "weak" / "manifest.json").read_text())["files"]}
    assert {"graph_citations.parquet", "graph_topics.parquet", "graph_institutions.parquet",
            "graph_coauthors.parquet"} <= listed
    b = load_benchmark("weak", tmp_path / "weak")
    assert b.graph is not None and b.labels_from == "citations"
    papers = set(b.submissions["paper_id"]) | set(b.draws[0]["paper_id"])
    people = set(b.draws[0]["reviewer_id"])
    # the warehouse importer's query over the whole warehouse, restricted here to the weak benchmark
    with Warehouse.open(world.warehouse_path, read_only=True) as wh:
        whole = wh.ratings.benchmark_graph([*WORDS, OUTSIDE], [A, B, C, D, E])
    want = {"citations": whole["citations"].filter(pl.col("citing_id").is_in(papers) & pl.col("cited_id").is_in(papers)),
            "topics": whole["topics"].filter(pl.col("paper_id").is_in(papers)),
            "reviewer_institutions": whole["reviewer_institutions"].filter(pl.col("reviewer_id").is_in(people)),
            "coauthors": whole["coauthors"].filter(pl.col("reviewer_id").is_in(people) & pl.col("other_id").is_in(people))}
    for name, frame in want.items():
        got = getattr(b.graph, name)
        assert got.sort(got.columns).equals(frame.cast(dict(got.schema)).sort(got.columns)), name
    assert {(c, d) for c, d in b.graph.citations.select("citing_id", "cited_id").iter_rows()} == set(CITES)
    assert OUTSIDE not in set(b.graph.topics["paper_id"]) and b.graph.topics.height == 5
    assert set(b.graph.coauthors.iter_rows()) == {(A, B), (B, A)}


def test_a_tampered_graph_file_is_refused_and_a_folder_without_one_reads_graphless(world: Settings, tmp_path: Path) -> None:
    d = tmp_path / "weak"
    write_labels(world, "citations", d, experts=1)
    topics = pl.read_parquet(d / "graph_topics.parquet")
    topics.with_columns(pl.lit("cs.CV").alias("topic")).write_parquet(d / "graph_topics.parquet")
    with pytest.raises(ReleaseTampered) as err:
        load_benchmark("weak", d)
    assert str(d / "graph_topics.parquet") in str(err.value) and "\n" not in str(err.value)
    assert "the weak benchmark is not as it was built" in str(err.value)
    # as `revbench labels` wrote it before the graph: the three files and their manifest
    old = tmp_path / "old"
    write_weak(old, {name: pl.read_parquet(d / f"{name}.parquet") for name in FILES}, {"source": "citations"})
    assert sorted(p.name for p in old.iterdir()) == ["labels.parquet", "manifest.json", "profiles.parquet",
                                                      "submissions.parquet"]
    assert load_benchmark("weak", old).graph is None


def test_evaluate_warns_when_a_scorer_reads_the_citations_the_labels_came_from(world: Settings, tmp_path: Path,
                                                                               isolated_env: Path) -> None:
    cites, authors = tmp_path / "cites", tmp_path / "authors"
    write_labels(world, "citations", cites, experts=1)
    write_labels(world, "authorship", authors, experts=1)
    code, out, err = run_cli("evaluate", "-b", f"weak={cites}", "-s", "topic", "--bootstrap", "0",
                             "--json-out", str(tmp_path / "rows.json"))
    assert code == 0, out + err
    mrr = [r["value"] for r in json.loads((tmp_path / "rows.json").read_text())
           if r["benchmark"] == "weak" and r["scorer"] == "topic" and r["metric"] == "MRR_hard@10"]
    assert len(mrr) == 1 and 0 < mrr[0] <= 1
    assert "warning" not in out + err  # topics are not what the labels were made from
    code, out, err = run_cli("evaluate", "-b", f"weak={cites}", "-s", "topic", "-s", "citation", "--bootstrap", "0",
                             "--report", str(tmp_path / "report"))
    assert code == 0, out + err
    warned = [ln for ln in out.splitlines() if ln.startswith("warning:")]
    assert warned == ["warning: weak: its labels came from citations and citation reads them too, so its results there "
                      "measure the label rule, not expertise"], out
    assert warned[0].removeprefix("warning: ") in (tmp_path / "report" / "report.md").read_text()
    code, out, err = run_cli("evaluate", "-b", f"weak={authors}", "-s", "citation", "--bootstrap", "0")
    assert code == 0, out + err
    assert "warning" not in out + err  # the graph holds no author of a held-out paper


def test_a_rewrite_that_fails_midway_leaves_a_folder_a_rerun_still_takes(world: Settings, tmp_path: Path) -> None:
    """A run that dies while rewriting a weak benchmark keeps the old manifest (the folder stays
    ours: a reader refuses it in one line, a rerun rewrites it); a new folder that fails is not made."""
    d = tmp_path / "weak"
    write_labels(world, "citations", d, experts=1)
    frames = {name: pl.read_parquet(d / f"{name}.parquet") for name in FILES}
    broken = {**frames, "profiles": frames["profiles"].drop("reviewer_id")}  # fails after submissions are written
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        write_weak(d, {**broken, "submissions": frames["submissions"].head(1)}, {"source": "citations"})
    assert json.loads((d / "manifest.json").read_text())["kind"] == "revbench-weak-labels"
    with pytest.raises(ReleaseTampered):
        load_benchmark("weak", d)
    write_weak(d, frames, {"source": "citations"})
    assert load_benchmark("weak", d).submissions.height
    fresh = tmp_path / "fresh"
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        write_weak(fresh, broken, {"source": "citations"})
    assert not fresh.exists()
