"""The pure pieces of the pools flow after the conflicts: pairs left out, candidates' S2 ids,
addresses, and a round in numbers."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from revbench.tasks.pools import (
    author_names,
    candidate_s2_ids,
    first_emails,
    first_recent_year,
    paper_texts,
    query_sample_rows,
    round_stats,
    without_pairs,
)

AUTHORS = pl.DataFrame({"author_id": ["a", "b", "c"], "name": ["Ada", "Bo", "Cy"],
                        "emails": [["ada@x.org", "ada@y.org"], [], None], "s2_author_ids": [["9", "1"], None, ["1", "5"]]},
                       schema={"author_id": pl.Utf8, "name": pl.Utf8, "emails": pl.List(pl.Utf8),
                               "s2_author_ids": pl.List(pl.Utf8)})


def evidence(pairs: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame({"query_id": [q for q, _ in pairs], "author_id": [a for _, a in pairs],
                         "neighbor_id": ["n"] * len(pairs), "similarity": [0.9] * len(pairs)})


def test_without_pairs_drops_every_row_of_an_excluded_pair() -> None:
    ev = evidence([("q1", "a"), ("q1", "a"), ("q1", "b"), ("q2", "a")])
    excluded = pl.DataFrame({"query_id": ["q1"], "author_id": ["a"], "reason": ["coauthor"], "detail": [""]})
    assert sorted(without_pairs(ev, excluded).select("query_id", "author_id").iter_rows()) == [("q1", "b"), ("q2", "a")]
    assert without_pairs(ev, excluded.clear()).equals(ev)


def test_candidates_names_and_addresses() -> None:
    assert candidate_s2_ids(evidence([("q1", "a"), ("q2", "c"), ("q2", "a")]), AUTHORS) == ["1", "5", "9"]
    assert candidate_s2_ids(evidence([("q1", "b")]), AUTHORS) == []
    assert first_emails(AUTHORS) == {"a": "ada@x.org", "b": None, "c": None}
    assert author_names(AUTHORS) == {"a": "Ada", "b": "Bo", "c": "Cy"}


def test_texts_years_and_sample_rows() -> None:
    papers = pl.DataFrame({"title": ["T", None], "abstract": [None, "A"], "year": [2024, 2026]})
    assert paper_texts(papers) == ["T ", " A"]
    assert first_recent_year(papers, 3) == 2024
    when = datetime(2026, 9, 1, tzinfo=UTC)
    rows = query_sample_rows(pl.DataFrame({"arxiv_id": ["q1"], "category": ["cs.IR"]}), 7, when)
    assert rows.row(0, named=True) == {"arxiv_id": "q1", "category": "cs.IR", "seed": 7, "sampled_at": when}


def test_round_stats_count_each_step() -> None:
    queries = ["q1", "q2", "q3"]
    ev = evidence([("q1", "a"), ("q1", "b"), ("q1", "c"), ("q2", "a")])
    after_coi = evidence([("q1", "b"), ("q1", "c"), ("q2", "a")])
    kept = evidence([("q1", "b"), ("q2", "a")])
    exclusions = pl.DataFrame({"query_id": ["q1", "q1"], "author_id": ["a", "c"], "reason": ["query_author", "screening"]})
    assignments = pl.DataFrame({"query_id": ["q1", "q2"], "author_id": ["b", "b"], "score": [0.9, 0.8], "rank": [1, 1]})
    s = round_stats(queries, 40, ev, after_coi, kept, exclusions, assignments, per_query=2)
    assert (s.queries, s.papers, s.assignments, s.invited_candidates, s.max_queries_per_candidate) == (3, 40, 2, 1, 2)
    assert s.pool_before_coi == {"median": 1.0, "mean": 4 / 3, "zero": 1}
    assert s.pool_after_coi["zero"] == 1 and s.pool_after_screening == {"median": 1.0, "mean": 2 / 3, "zero": 1}
    assert s.exclusions == {"query_author": 1, "screening": 1}
    assert s.queries_short_of_target == 3  # q1 and q2 have one candidate each of two, q3 none
