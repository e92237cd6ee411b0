"""The order of the pools' exclusion rules (``tasks.pool_coi``): the first pass on what the corpus
and the graph show (own authors, co-authors, namesakes, affiliation strings when asked, institutions
when the graph's inputs are given), then, on the candidates it leaves, co-authors by the Semantic
Scholar histories, then the screening; each pair excluded once, by the first rule that takes it."""

from __future__ import annotations

import polars as pl

from revbench.tasks import pools
from revbench.tasks.pool_coi import CorpusConflicts, corpus_conflicts, history_ids, query_authors, screen_candidates

ROR = "ror:05a28rw58"
LINKS = pl.DataFrame({"arxiv_id": ["q", "q", "r", "p1"], "author_id": ["qa", "qb", "ra", "cand"]})
AUTHORS = pl.DataFrame(
    {"author_id": ["qa", "qb", "ra", "co", "cand", "aff", "late", "quiet", "mute"],
     "name": ["Q Alpha", "Q Beta", "R Alpha", "Co Author", "Cand Idate", "Aff Mate", "Late Find", "Quiet One", "Mute One"],
     "emails": [["qa@x"], [], [], ["co@x"], ["cand@x"], ["aff@x"], ["late@x"], ["quiet@x"], []],
     "affiliations": [["University of Nowhere"], None, None, None, None, ["Univ of Nowhere", "University of Nowhere"],
                      None, None, None],
     "s2_author_ids": [["s-qa"], None, None, None, ["s-cand"], None, ["s-late"], ["s-quiet"], None]},
    schema={"author_id": pl.Utf8, "name": pl.Utf8, "emails": pl.List(pl.Utf8), "affiliations": pl.List(pl.Utf8),
            "s2_author_ids": pl.List(pl.Utf8)})
EDGES = pl.DataFrame({"author_a": ["qa"], "author_b": ["co"]})
PAPERS = pl.DataFrame({"arxiv_id": ["q", "r", "p1"], "year": [2026, 2026, 2025]})
CANDIDATES = ["qa", "co", "cand", "aff", "late", "quiet", "mute"]
EVIDENCE = pl.DataFrame({"query_id": ["q"] * len(CANDIDATES), "author_id": CANDIDATES,
                         "neighbor_id": ["p1"] * len(CANDIDATES), "similarity": [0.9] * len(CANDIDATES)})
YEARS = pl.DataFrame({"author_id": ["cand"] * 3 + ["late"] * 3 + ["mute"] * 3 + ["aff"] * 3,
                      "arxiv_id": [f"x{i}" for i in range(12)], "year": [2026] * 12})


def _graph() -> dict[str, pl.DataFrame]:
    """The warehouse's ``coi_inputs``: the query author qb and the candidate cand at one ROR institution."""
    mentions = pl.DataFrame({"author_id": ["qb", "cand"], "arxiv_id": ["q", "p1"], "position": [1, 0],
                             "orcid": ["0000-0002-1825-0097", None], "s2_author_id": [None, "s-cand"]},
                            schema={"author_id": pl.Utf8, "arxiv_id": pl.Utf8, "position": pl.Int64, "orcid": pl.Utf8,
                                    "s2_author_id": pl.Utf8})
    aff = pl.DataFrame([dict(person_key="orcid:0000-0002-1825-0097", orcid="0000-0002-1825-0097", institution_key=ROR,
                             name="IISc", first_year=2025, last_year=2026, source="openalex", arxiv_id=None, position=None),
                        dict(person_key="s2:s-cand", orcid=None, institution_key=ROR, name="IISc", first_year=2024,
                             last_year=2025, source="s2", arxiv_id=None, position=None)],
                       schema={"person_key": pl.Utf8, "orcid": pl.Utf8, "institution_key": pl.Utf8, "name": pl.Utf8,
                               "first_year": pl.Int64, "last_year": pl.Int64, "source": pl.Utf8, "arxiv_id": pl.Utf8,
                               "position": pl.Int64})
    return {"mentions": mentions, "affiliations": aff}


def _reasons(frame: pl.DataFrame) -> dict[str, str]:
    return dict(frame.select("author_id", "reason").iter_rows())


def test_the_query_authors_are_the_links_of_the_query_papers() -> None:
    assert query_authors(LINKS, ["q"]).rows() == [("q", "qa"), ("q", "qb")]
    assert query_authors(LINKS, []).height == 0


def test_the_first_pass_takes_own_authors_and_co_authors_and_leaves_the_rest() -> None:
    qa = query_authors(LINKS, ["q"])
    got = corpus_conflicts(EVIDENCE, qa, EDGES, AUTHORS, PAPERS, None, same_affiliation=False, institution_years=3)
    assert _reasons(got.conflicts) == {"qa": "query_author", "co": "coauthor"}
    assert got.conflicts.equals(pools.conflicts(EVIDENCE, qa, EDGES, None, pools.author_names(AUTHORS)))
    assert sorted(got.after["author_id"]) == ["aff", "cand", "late", "mute", "quiet"]
    assert got.after.columns == EVIDENCE.columns


def test_affiliation_strings_count_only_when_asked() -> None:
    qa = query_authors(LINKS, ["q"])
    asked = corpus_conflicts(EVIDENCE, qa, EDGES, AUTHORS, PAPERS, None, same_affiliation=True, institution_years=3)
    assert _reasons(asked.conflicts)["aff"] == "same_affiliation"
    assert "aff" not in asked.after["author_id"].to_list()


def test_institutions_count_only_with_the_graph_s_inputs_and_within_the_window() -> None:
    qa = query_authors(LINKS, ["q"])
    found = corpus_conflicts(EVIDENCE, qa, EDGES, AUTHORS, PAPERS, _graph(), same_affiliation=False, institution_years=3)
    assert _reasons(found.conflicts)["cand"] == "same_institution"
    assert found.conflicts.filter(pl.col("author_id") == "cand")["evidence"].is_not_null().all()
    # The candidate's stint ended 2025: a window of 0 years of the 2026 paper does not reach it.
    narrow = corpus_conflicts(EVIDENCE, qa, EDGES, AUTHORS, PAPERS, _graph(), same_affiliation=False, institution_years=0)
    assert "cand" not in _reasons(narrow.conflicts)


def test_the_histories_read_are_the_candidates_and_the_query_authors() -> None:
    assert history_ids(["s-late", "s-cand", "s-late"], query_authors(LINKS, ["q"]), AUTHORS) == ["s-cand", "s-late", "s-qa"]
    assert history_ids([], query_authors(LINKS, ["r"]), AUTHORS) == []


def test_the_second_pass_takes_history_co_authors_before_the_screening() -> None:
    qa = query_authors(LINKS, ["q"])
    first = corpus_conflicts(EVIDENCE, qa, EDGES, AUTHORS, PAPERS, None, same_affiliation=False, institution_years=3)
    # late shares paper K with the query author qa (and has three recent papers: the screening would
    # keep them); quiet has one recent paper, mute no email.
    histories = pl.DataFrame({"s2_author_id": ["s-qa", "s-late", "s-quiet"], "paper_key": ["K", "K", "Z"],
                              "year": [2026, 2026, 2026], "arxiv_id": [None, None, None]},
                             schema={"s2_author_id": pl.Utf8, "paper_key": pl.Utf8, "year": pl.Int64, "arxiv_id": pl.Utf8})
    fetched = ["s-cand", "s-late", "s-quiet"]
    got = screen_candidates(first, qa, AUTHORS, histories, fetched, PAPERS, YEARS, recent_years=2, min_recent_papers=3)
    assert got.exclusions["reason"].to_list() == ["coauthor", "query_author", "coauthor", "unreachable", "screening"]
    assert _reasons(got.exclusions) == {"qa": "query_author", "co": "coauthor", "late": "coauthor", "quiet": "screening",
                                        "mute": "unreachable"}
    assert "Semantic Scholar histories" in got.exclusions.filter(pl.col("author_id") == "late")["detail"].item()
    assert sorted(got.kept["author_id"]) == ["aff", "cand"]
    assert got.emails == pools.first_emails(AUTHORS)


def test_histories_not_fetched_for_a_candidate_do_not_count_as_recent_papers() -> None:
    qa = query_authors(LINKS, ["q"])
    first = CorpusConflicts(pl.DataFrame(schema=pools.EXCLUSION_SCHEMA), EVIDENCE.filter(pl.col("author_id") == "quiet"))
    histories = pl.DataFrame({"s2_author_id": ["s-quiet"] * 3, "paper_key": ["A", "B", "C"], "year": [2026] * 3,
                              "arxiv_id": [None] * 3},
                             schema={"s2_author_id": pl.Utf8, "paper_key": pl.Utf8, "year": pl.Int64, "arxiv_id": pl.Utf8})
    counted = screen_candidates(first, qa, AUTHORS, histories, ["s-quiet"], PAPERS, YEARS, 2, 3)
    assert counted.kept["author_id"].to_list() == ["quiet"] and counted.exclusions.height == 0
    # The same history read as a query author's only (not fetched for the candidate) is no recent paper.
    ignored = screen_candidates(first, qa, AUTHORS, histories, [], PAPERS, YEARS, 2, 3)
    assert _reasons(ignored.exclusions) == {"quiet": "screening"} and ignored.kept.height == 0
