"""Conflicts of interest by institution identity (issue 35): one institution under any spelling by its
ROR id, by exact normalised name without one, within a window of years of the paper; every exclusion
names its evidence; without graph rows the pools are what they were; the SYNTHETIC world's planted
graph-only conflict is caught once its graph is in the warehouse."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from revbench.keys import person_links
from revbench.replay.openalex import author_id as openalex_author
from revbench.schemas.tables import POOL_EXCLUSIONS
from revbench.settings import PoolsSettings
from revbench.synth.graph_files import read_graph
from revbench.synth.truth import graph_conflicts_caught, load_truth
from revbench.tasks.coi import author_stints, institution_conflicts
from revbench.tasks.pools import conflicts, parameters_hash, round_parameters
from revbench.warehouse import Warehouse

ROR = "ror:05a28rw58"
MENTIONS = pl.DataFrame(
    {"author_id": ["q_author", "cand", "other"], "arxiv_id": ["q", "p1", "p2"], "position": [0, 0, 0],
     "orcid": ["0000-0002-1825-0097", None, None], "s2_author_id": [None, "777", None]},
    schema={"author_id": pl.Utf8, "arxiv_id": pl.Utf8, "position": pl.Int64, "orcid": pl.Utf8, "s2_author_id": pl.Utf8})
QUERY_AUTHORS = pl.DataFrame({"arxiv_id": ["q"], "author_id": ["q_author"]})
PAIRS = pl.DataFrame({"query_id": ["q", "q"], "author_id": ["cand", "other"], "neighbor_id": ["p1", "p2"],
                      "similarity": [0.9, 0.8]})


def _aff(person_key: str, key: str, name: str | None, first: int | None, last: int | None, source: str = "openalex",
         orcid: str | None = None, arxiv_id: str | None = None, position: int | None = None) -> dict[str, object]:
    return dict(person_key=person_key, orcid=orcid, institution_key=key, name=name, first_year=first, last_year=last,
                source=source, arxiv_id=arxiv_id, position=position)


def _excluded(rows: list[dict[str, object]], year: int = 2026, window: int = 3) -> pl.DataFrame:
    aff = pl.DataFrame(rows, schema={"person_key": pl.Utf8, "orcid": pl.Utf8, "institution_key": pl.Utf8, "name": pl.Utf8,
                                     "first_year": pl.Int64, "last_year": pl.Int64, "source": pl.Utf8,
                                     "arxiv_id": pl.Utf8, "position": pl.Int64})
    stints = author_stints(person_links(MENTIONS, aff), aff)
    return institution_conflicts(PAIRS, QUERY_AUTHORS, {"q": year}, stints, window)


# The query author by ORCID; the candidate by S2 id, by paper and place, or by an orcid: key.
AUTHOR_AT_ROR = _aff("openalex:A1", ROR, "Indian Institute of Science", 2025, 2026, orcid="0000-0002-1825-0097")


def test_one_ror_under_two_spellings_is_one_institution() -> None:
    spelled = _aff("s2:777", ROR, "Dept. of CSA, IISc Bangalore", 2022, 2025, source="s2")
    out = _excluded([AUTHOR_AT_ROR, spelled])
    assert out.select("query_id", "author_id", "reason").rows() == [("q", "cand", "same_institution")]
    # The same person found by their place in the paper that showed them, not by an id.
    by_paper = _aff("openalex:A2", ROR, "IISc", 2024, 2024, arxiv_id="p2", position=0)
    assert _excluded([AUTHOR_AT_ROR, by_paper])["author_id"].to_list() == ["other"]


def test_a_stint_counts_within_the_window_and_not_before() -> None:
    three_ago = _aff("s2:777", ROR, "IISc", 2019, 2023, source="s2")
    four_ago = _aff("s2:777", ROR, "IISc", 2019, 2022, source="s2")
    assert _excluded([AUTHOR_AT_ROR, three_ago])["author_id"].to_list() == ["cand"]
    assert _excluded([AUTHOR_AT_ROR, four_ago]).height == 0
    assert _excluded([AUTHOR_AT_ROR, four_ago], window=4)["author_id"].to_list() == ["cand"]


def test_without_a_ror_only_the_exact_normalised_name_meets() -> None:
    author = _aff("orcid:0000-0002-1825-0097", "name:universityofnowhere", "University of Nowhere", 2024, 2026)
    same = _aff("s2:777", "name:universityofnowhere", "Univ. of Nowhere", 2024, 2025, source="grobid")
    other = _aff("s2:777", "name:univofnowhere", "Univ. of Nowhere", 2024, 2025, source="grobid")
    assert _excluded([author, same])["author_id"].to_list() == ["cand"]
    assert _excluded([author, other]).height == 0


def test_the_evidence_names_institution_years_and_sources() -> None:
    [row] = _excluded([AUTHOR_AT_ROR, _aff("s2:777", ROR, None, 2022, 2025, source="s2")]).to_dicts()
    assert row["detail"] == ("was at Indian Institute of Science (ror:05a28rw58) 2022-2025 [s2]; query author "
                             "q_author was there 2025-2026 [openalex]; within 3 years of 2026")
    assert json.loads(row["evidence"]) == {
        "institution_key": ROR, "institution": "Indian Institute of Science", "query_author": "q_author",
        "candidate_years": [2022, 2025], "candidate_source": "s2", "author_years": [2025, 2026],
        "author_source": "openalex", "paper_year": 2026, "window_years": 3, "rule": "same ror",
        "query_institution_key": ROR, "query_institution": "Indian Institute of Science", "via": None}
    # A stint with no years counts, and says so; an institution without a stored name is named by its key.
    [row] = _excluded([_aff("orcid:0000-0002-1825-0097", ROR, None, 2026, 2026),
                       _aff("s2:777", ROR, None, None, None, source="s2")]).to_dicts()
    assert row["detail"].startswith("was at ror:05a28rw58 (ror:05a28rw58) years unknown [s2]; query author q_author "
                                    "was there 2026-2026 [openalex]")


def test_no_graph_rows_leave_the_pools_as_they_were() -> None:
    edges = pl.DataFrame({"author_a": ["q_author"], "author_b": ["other"]})
    before = conflicts(PAIRS, QUERY_AUTHORS, edges)
    nothing = _excluded([])
    assert nothing.height == 0
    after = conflicts(PAIRS, QUERY_AUTHORS, edges, institutions=nothing)
    assert after.equals(before) and after.columns == before.columns
    # With one, the pair is excluded and the other reasons keep their rows, evidence null.
    found = conflicts(PAIRS, QUERY_AUTHORS, edges, institutions=_excluded([AUTHOR_AT_ROR, _aff("s2:777", ROR, "x", 2025, 2025)]))
    assert found.select("author_id", "reason").rows() == [("cand", "same_institution"), ("other", "coauthor")]
    assert found.filter(pl.col("reason") == "coauthor")["evidence"].to_list() == [None]
    saved = POOL_EXCLUSIONS.conform(found.with_columns(round=pl.lit(1), revision=pl.lit(1)))
    assert saved["evidence"].null_count() == 1  # the column the round is saved with
    # Rounds built before the settings existed keep their parameters' hash.
    old = {k: v for k, v in PoolsSettings().model_dump().items()
           if k not in ("query_categories", "coi_by_institution", "coi_institution_years")}
    assert parameters_hash(round_parameters(PoolsSettings(), ["cs.AI"])) == parameters_hash({**old, "categories": ["cs.AI"]})
    assert round_parameters(PoolsSettings(coi_institution_years=5), ["cs.AI"])["coi_institution_years"] == 5


def _world_graph_rows(world: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The world's institutions and affiliations as OpenAlex gives them: people by their OpenAlex id,
    each profile's stints with the first paper that showed the person and their place in it."""
    graph = read_graph(world)
    insts = graph["institutions"]
    institutions = pl.DataFrame([dict(institution_key=f"ror:{i['ror']}", ror=i["ror"], name=i["name"], country=i["country"],
                                      type=i["type"], openalex_id=i["openalex_id"]) for i in insts])
    first_paper: dict[str, tuple[str, int]] = {}
    for aid in sorted(graph["authors"]):
        for pos, pid in enumerate(graph["authors"][aid]):
            first_paper.setdefault(pid, (aid, pos))
    rows = [dict(person_key=f"openalex:{openalex_author(pid)}", orcid=graph["people"][pid]["orcid"],
                 institution_key=f"ror:{insts[a['inst']]['ror']}", first_year=a["first_year"], last_year=a["last_year"],
                 source="openalex", arxiv_id=first_paper[pid][0], position=first_paper[pid][1])
            for pid, affs in graph["affiliations"].items() if pid in first_paper for a in affs]
    return institutions, pl.DataFrame(rows)


def test_the_world_s_graph_only_conflict_is_caught(small_world: Path, tmp_path: Path) -> None:
    truth = load_truth(small_world)
    [planted] = truth.graph_conflicts.to_dicts()
    # The world's people as the warehouse's authors (one id per person), with what their mentions show.
    shown = pl.read_parquet(small_world / "mentions.parquet")
    mentions = shown.join(truth.mentions, on=["arxiv_id", "position"]).select(
        pl.col("person_id").alias("author_id"), "arxiv_id", "position", "orcid", "s2_author_id")
    links = truth.mentions.with_columns(pl.col("person_id").alias("author_id"))
    q = planted["query_id"]
    query_authors = links.filter(pl.col("arxiv_id") == q).select("arxiv_id", "author_id")
    evidence = pl.DataFrame({"query_id": [q], "author_id": [planted["person_id"]], "neighbor_id": ["n"], "similarity": [0.9]})
    year = shown.filter(pl.col("arxiv_id") == q)["year"][0]
    no_graph = conflicts(evidence, query_authors, pl.DataFrame(schema={"author_a": pl.Utf8, "author_b": pl.Utf8}))
    none = pl.DataFrame(schema={"query_id": pl.Utf8, "author_id": pl.Utf8})
    [before] = graph_conflicts_caught(truth, evidence, no_graph, none, links)
    assert before["recalled"] and not before["caught"]  # the PDFs alone do not reveal it

    institutions, affiliations = _world_graph_rows(small_world)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.graph.save_graph(institutions=institutions, affiliations=affiliations)
        stored = wh.pools.coi_inputs()["affiliations"]
    stints = author_stints(person_links(mentions, stored), stored)
    found = institution_conflicts(evidence, query_authors, {q: year}, stints, 3)
    exclusions = conflicts(evidence, query_authors, pl.DataFrame(schema={"author_a": pl.Utf8, "author_b": pl.Utf8}),
                           institutions=found)
    [after] = graph_conflicts_caught(truth, evidence, exclusions, none, links)
    assert after["caught"] and after["reasons"] == ["same_institution"]
    why = json.loads(exclusions["evidence"][0])
    assert why["institution_key"] == f"ror:{planted['ror']}" and why["query_author"] in query_authors["author_id"].to_list()
    assert why["candidate_years"][1] == planted["last_year"]
