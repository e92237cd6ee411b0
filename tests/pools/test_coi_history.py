"""Co-authorship the corpus cannot show: a paper the ingest rejected still binds its authors, and
their Semantic Scholar histories say so, so the pools exclude the pair."""

from __future__ import annotations

import polars as pl

from revbench.tasks.coi import history_coauthors

AUTHORS = pl.DataFrame({"author_id": ["q", "c", "d", "e"], "s2_author_ids": [["1"], ["2", "2b"], ["3"], None]},
                       schema={"author_id": pl.Utf8, "s2_author_ids": pl.List(pl.Utf8)})
QUERY_AUTHORS = pl.DataFrame({"arxiv_id": ["Q"], "author_id": ["q"]})
PAIRS = pl.DataFrame({"query_id": ["Q", "Q", "Q"], "author_id": ["c", "d", "e"]})


def histories(rows: list[tuple[str, str]], arxiv: dict[str, str] | None = None) -> pl.DataFrame:
    return pl.DataFrame([(a, k, (arxiv or {}).get(k)) for a, k in rows],
                        schema={"s2_author_id": pl.Utf8, "paper_key": pl.Utf8, "arxiv_id": pl.Utf8}, orient="row")


def test_a_paper_both_histories_list_is_a_conflict_naming_the_paper() -> None:
    # q and c both list the rejected paper R (c under their second S2 id); d shares none with q
    got = history_coauthors(PAIRS, QUERY_AUTHORS, AUTHORS,
                            histories([("1", "R"), ("1", "A"), ("2b", "R"), ("3", "B"), ("2", "C")]))
    assert got.rows() == [("Q", "c", "coauthor", "co-authored S2 paper R with query author q (Semantic Scholar histories)")]
    named = history_coauthors(PAIRS, QUERY_AUTHORS, AUTHORS, histories([("1", "R"), ("2", "R")], {"R": "2401.00001"}))
    assert named["detail"].to_list() == ["co-authored arXiv:2401.00001 with query author q (Semantic Scholar histories)"]


def test_no_shared_paper_or_no_history_is_no_conflict() -> None:
    assert history_coauthors(PAIRS, QUERY_AUTHORS, AUTHORS, histories([("1", "A"), ("3", "B")])).height == 0
    assert history_coauthors(PAIRS, QUERY_AUTHORS, AUTHORS, histories([])).height == 0
    # an empty key (S2 gave the paper no id) binds nobody
    assert history_coauthors(PAIRS, QUERY_AUTHORS, AUTHORS, histories([("1", ""), ("3", "")])).height == 0
