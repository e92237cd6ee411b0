"""Resolving cited works to warehouse papers (``tasks.graph.resolve_citations``), the one rule the S2,
OpenAlex and GROBID reference lists share: DOI, then arXiv id, then normalised title within a year;
each method with the case it must not take."""

from __future__ import annotations

import polars as pl

from revbench.schemas.graph import CITATIONS
from revbench.tasks.graph import normalise_title, resolve_citations

PAPERS = pl.DataFrame({
    "arxiv_id": ["2401.00001", "2401.00002", "2401.00003", "cs/0112017", "2401.00005", "2401.00006"],
    "doi": ["10.1145/3589334.3645355", "10.1109/CVPR.2016.90", None, None, None, None],
    "title": ["Why Should I Review This Paper?", "Deep Résidual Learning: for Image Recognition", "Introduction",
              "An old paper on bibliographies", "Twin Titles Are Ambiguous", "Twin titles are ambiguous!"],
    "year": [2024, 2023, 2024, 2001, 2024, 2024],
})


def _resolve(*refs: dict[str, object]):  # type: ignore[no-untyped-def]
    rows = [dict(citing_arxiv_id="2402.09999", source="grobid", ordinal=i) | r for i, r in enumerate(refs)]
    return resolve_citations(CITATIONS.conform(pl.DataFrame(rows, infer_schema_length=None)), PAPERS)


def _resolved(*refs: dict[str, object]) -> list[str | None]:
    return _resolve(*refs).citations["cited_arxiv_id"].to_list()


def test_a_doi_matches_in_any_case_and_with_its_resolver_prefix_but_not_another_doi() -> None:
    assert _resolved({"cited_doi": "10.1145/3589334.3645355"}, {"cited_doi": "https://doi.org/10.1145/3589334.3645355"},
                     {"cited_doi": "10.1145/3589334.3645356"}) == ["2401.00001", "2401.00001", None]
    # arXiv's DOI is as the authors typed it, a reference's as its source printed it: case never decides.
    assert _resolved({"cited_doi": "10.1109/cvpr.2016.90"}, {"cited_doi": "10.1109/CVPR.2016.90"}) == [
        "2401.00002", "2401.00002"]


def test_arxivs_own_doi_names_the_paper_it_mints_it_for() -> None:
    assert _resolved({"cited_doi": "10.48550/arXiv.2401.00002"}, {"cited_doi": "10.48550/arxiv.2401.00009"}) == [
        "2401.00002", None]


def test_an_arxiv_id_matches_without_prefix_or_version_but_not_a_neighbouring_id() -> None:
    assert _resolved({"cited_arxiv": "2401.00002v3"}, {"cited_arxiv": "arXiv:2401.00002"}, {"cited_arxiv": "cs/0112017v1"},
                     {"cited_arxiv": "2401.00020"}) == ["2401.00002", "2401.00002", "cs/0112017", None]


def test_a_title_matches_under_another_spelling_within_a_year_but_not_two() -> None:
    title = "deep residual learning for image recognition"
    assert _resolved({"cited_title": title, "cited_year": 2024}, {"cited_title": title.upper() + ".", "cited_year": 2022},
                     {"cited_title": title, "cited_year": 2025}, {"cited_title": title, "cited_year": 2021},
                     {"cited_title": title}) == ["2401.00002", "2401.00002", None, None, None]


def test_titles_that_say_too_little_or_name_two_papers_resolve_nothing() -> None:
    assert _resolved({"cited_title": "Introduction", "cited_year": 2024},
                     {"cited_title": "Twin titles are ambiguous", "cited_year": 2024}) == [None, None]


def test_the_first_method_that_resolves_wins_and_each_is_counted() -> None:
    res = _resolve({"cited_doi": "10.1145/3589334.3645355", "cited_arxiv": "2401.00002"},  # DOI before arXiv id
                   {"cited_arxiv": "cs/0112017", "cited_title": "Deep residual learning for image recognition",
                    "cited_year": 2023},
                   {"cited_title": "An old paper on bibliographies", "cited_year": 2002},
                   {"cited_title": "Something we do not have", "cited_year": 2020, "cited_doi": "10.1/x"},
                   {"cited_title": None})
    assert res.citations["cited_arxiv_id"].to_list() == ["2401.00001", "cs/0112017", "cs/0112017", None, None]
    assert res.counts == {"doi": 1, "arxiv": 1, "title_year": 1, "unresolved": 2} and res.resolved == 3
    assert res.citations.columns == CITATIONS.names and res.citations.height == 5


def test_a_paper_citing_its_own_title_is_not_an_edge() -> None:
    rows = [dict(citing_arxiv_id="2401.00001", source="grobid", ordinal=0, cited_title="Why should I review this paper",
                 cited_year=2024)]
    res = resolve_citations(CITATIONS.conform(pl.DataFrame(rows)), PAPERS)
    assert res.citations["cited_arxiv_id"].to_list() == [None] and res.counts["unresolved"] == 1


def test_a_stale_resolution_is_recomputed_and_no_reference_is_lost() -> None:
    rows = [dict(citing_arxiv_id="2402.09999", source="s2", ordinal=i, cited_arxiv_id="2401.00003", cited_title=t,
                 cited_year=2023) for i, t in enumerate(["Deep residual learning for image recognition", "Gone"])]
    res = resolve_citations(CITATIONS.conform(pl.DataFrame(rows)), PAPERS)
    assert res.citations["cited_arxiv_id"].to_list() == ["2401.00002", None]
    assert resolve_citations(CITATIONS.empty(), PAPERS).counts == {"doi": 0, "arxiv": 0, "title_year": 0, "unresolved": 0}


def test_normalised_titles_drop_case_punctuation_spaces_and_accents() -> None:
    out = pl.select(normalise_title(pl.lit("Straße, Ünïcode — (2nd) ed.")).alias("t")).item()
    assert out == "strasseunicode2nded"


def test_the_closest_year_decides_between_namesakes_within_the_slack() -> None:
    papers = pl.concat([PAPERS, pl.DataFrame({"arxiv_id": ["2401.00009"], "doi": [None],
                                              "title": ["Twin Titles Are Ambiguous"], "year": [2023]})])
    rows = [dict(citing_arxiv_id="2402.09999", source="grobid", ordinal=0, cited_title="twin titles are ambiguous",
                 cited_year=2023)]
    got = resolve_citations(CITATIONS.conform(pl.DataFrame(rows, infer_schema_length=None)), papers)
    assert got.citations["cited_arxiv_id"].to_list() == ["2401.00009"]


def test_a_work_cited_by_many_is_looked_up_once_yet_each_reference_keeps_its_own_answer() -> None:
    # The same work (same DOI, arXiv id, title and year) cited by three papers, one of them the
    # work itself: the lookup is shared, the self-reference rule is each row's own.
    work = {"cited_arxiv": "arXiv:2401.00003v2", "cited_title": "Introduction", "cited_year": 2024}
    rows = [dict(citing_arxiv_id=c, source="s2", ordinal=i) | work
            for i, c in enumerate(["2402.09999", "2401.00003", "2402.09998"])]
    rows.append(dict(citing_arxiv_id="2402.09999", source="s2", ordinal=9, cited_title="Introduction", cited_year=2024))
    res = resolve_citations(CITATIONS.conform(pl.DataFrame(rows, infer_schema_length=None)), PAPERS)
    assert res.citations["cited_arxiv_id"].to_list() == ["2401.00003", None, "2401.00003", None]
    assert res.citations["match_keys"].to_list()[0] == ["arxiv:2401.00003", "title:introduction"]
    assert res.citations["match_keys"].to_list()[3] == ["title:introduction"]
    assert res.counts == {"doi": 0, "arxiv": 2, "title_year": 0, "unresolved": 2}
