"""Which papers the augmented self-supervision trains on (``tasks.augment_data``): corpus papers
that are not query papers (so never a rated one) and have a title or an abstract, at most
``anchors`` of them drawn by a seeded order; fewer than two is an input error."""

from __future__ import annotations

import polars as pl
import pytest

from revbench.errors import InputError
from revbench.tasks.augment_data import MIN_PAPERS, augment_papers, usable_papers

PAPERS = pl.DataFrame({
    "paper_id": ["p1", "p2", "p3", "p4", "p5", "q1", "p6"],
    "title": ["Dense retrieval", None, "  ", "", "Graphs", "A query paper", None],
    "abstract": [None, "Only an abstract.", "\n", None, "And networks.", "Its abstract.", "   "],
    "year": [2026] * 7,
})
QUERIES = pl.DataFrame({"paper_id": ["q1"]})


def test_usable_papers_are_unrated_and_have_a_title_or_an_abstract() -> None:
    usable = usable_papers(PAPERS, QUERIES)
    assert usable["paper_id"].to_list() == ["p1", "p2", "p5"]
    assert usable.columns == PAPERS.columns
    assert usable_papers(PAPERS, QUERIES.head(0))["paper_id"].to_list() == ["p1", "p2", "p5", "q1"]


def test_the_chosen_papers_are_seeded_capped_and_counted() -> None:
    got = augment_papers(PAPERS, QUERIES, anchors=10, seed=3)
    assert got.chosen["paper_id"].to_list() == ["p1", "p2", "p5"]
    assert got.chosen.columns == ["paper_id", "title", "abstract"]
    assert (got.unrated, got.empty) == (6, 3)
    two = augment_papers(PAPERS, QUERIES, anchors=2, seed=3)
    assert two.chosen.height == 2 and set(two.chosen["paper_id"]) < {"p1", "p2", "p5"}
    assert two.chosen["paper_id"].to_list() == sorted(two.chosen["paper_id"])
    assert two.chosen.equals(augment_papers(PAPERS.reverse(), QUERIES, anchors=2, seed=3).chosen)
    drawn = {tuple(augment_papers(PAPERS, QUERIES, anchors=2, seed=s).chosen["paper_id"]) for s in range(12)}
    assert len(drawn) > 1, "the seed decides which papers are drawn"


def test_fewer_than_two_usable_papers_is_an_input_error() -> None:
    assert MIN_PAPERS == 2
    with pytest.raises(InputError, match=r"^1 unrated paper\(s\) with a title or abstract: the in-batch loss needs two"):
        augment_papers(PAPERS, QUERIES, anchors=1, seed=0)
    with pytest.raises(InputError, match=r"^0 unrated paper\(s\)"):
        augment_papers(PAPERS.filter(pl.col("paper_id").is_in(["q1", "p3"])), QUERIES, anchors=10, seed=0)
