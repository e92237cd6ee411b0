"""Which references a graph run looks at again and keys (``tasks.graph.new_paper_key_windows``,
``tasks.graph_fetch.needs_keys``): a reference is looked at again only when a key of a paper loaded
since names it, and a reference never keyed is keyed on its own only when its resolution did not
change (a changed one is written back whole, keys included)."""

from __future__ import annotations

import polars as pl

from revbench.schemas.graph import CITATIONS
from revbench.tasks.graph import new_paper_key_windows, resolve_citations
from revbench.tasks.graph_fetch import needs_keys, resolve_changed

PAPERS = pl.DataFrame({"arxiv_id": ["2401.00001", "2401.00002"], "doi": ["10.1145/1.2", None],
                       "title": ["An Old Paper On Reviewers", "A New Paper On Experts"], "year": [2024, 2024]})


def _refs(*refs: dict[str, object]) -> pl.DataFrame:
    rows = [dict(citing_arxiv_id="2402.09999", source="grobid", ordinal=i) | r for i, r in enumerate(refs)]
    return CITATIONS.conform(pl.DataFrame(rows, infer_schema_length=None))


def new_paper_keys(papers: pl.DataFrame, new_ids: list[str]) -> list[str]:
    return new_paper_key_windows(papers, new_ids)["k"].to_list()


def _keys_of(refs: pl.DataFrame) -> list[set[str]]:
    return [set(k) for k in resolve_citations(refs, PAPERS.head(0)).citations["match_keys"].to_list()]


def test_the_new_papers_keys_name_them_and_no_older_paper() -> None:
    keys = set(new_paper_keys(PAPERS, ["2401.00002"]))
    assert keys and all(k.startswith(("doi:", "arxiv:", "title:")) for k in keys)
    to_new, to_old = _keys_of(_refs({"cited_title": "A new paper on experts.", "cited_year": 2024},
                                    {"cited_title": "An old paper on reviewers", "cited_doi": "10.1145/1.2"}))
    assert to_new & keys and not to_old & keys
    assert new_paper_keys(PAPERS, []) == []
    assert new_paper_keys(PAPERS, ["2401.99999"]) == []


def test_only_references_never_keyed_and_unchanged_are_keyed_on_their_own() -> None:
    pending = _refs({"cited_title": "An old paper on reviewers", "cited_year": 2024},   # never keyed, resolves now
                    {"cited_title": "Nowhere to be found", "cited_year": 2024},         # never keyed, still unresolved
                    {"cited_title": "Not here either", "cited_year": 2024, "match_keys": ["title:nothereeither"]})
    changed, res = resolve_changed(pending, PAPERS)
    assert changed["ordinal"].to_list() == [0]
    keyed = needs_keys(pending, res.citations, changed)
    assert keyed["ordinal"].to_list() == [1]
    assert keyed["match_keys"].to_list()[0], "the row carries the keys it was looked up by"
    assert keyed.columns == res.citations.columns


def test_nothing_to_key_when_every_reference_was_keyed_or_changed() -> None:
    pending = _refs({"cited_title": "An old paper on reviewers", "cited_year": 2024},
                    {"cited_title": "Nowhere", "cited_year": 2024, "match_keys": ["title:nowhere"]})
    changed, res = resolve_changed(pending, PAPERS)
    assert needs_keys(pending, res.citations, changed).height == 0
