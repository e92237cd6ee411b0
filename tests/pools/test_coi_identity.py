"""Conflicts of interest across an institution's identities: a ROR id and its successor are one
institution, through a chain of them; an unmatched affiliation (``name:...``) meets the ROR
institution whose display name or alias it is (the real OpenAlex records' alternatives and the raw
strings OpenAlex matched to it); a part meets its whole but two parts of one parent stay apart; the
3-year window holds for each; the evidence names the rule; the warehouse keeps what the rules read
and the pools read it back."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest

from revbench.clients.openalex_graph import authorship_rows, institution_row
from revbench.keys import person_links
from revbench.schemas.graph import INSTITUTIONS
from revbench.tasks.coi import author_stints, graph_conflicts, institution_conflicts, institution_identities
from revbench.warehouse import Warehouse

OA = Path(__file__).resolve().parents[3] / "shared" / "external" / "real-responses" / "openalex"
OLD, NEW, NEWER = "ror:0aaaaaa01", "ror:0bbbbbb02", "ror:0cccccc03"  # made-up ids, well-formed
MENTIONS = pl.DataFrame({"author_id": ["q_author", "cand"], "arxiv_id": ["q", "p1"], "position": [0, 0],
                         "orcid": [None, None], "s2_author_id": ["111", "777"]},
                        schema={"author_id": pl.Utf8, "arxiv_id": pl.Utf8, "position": pl.Int64, "orcid": pl.Utf8,
                                "s2_author_id": pl.Utf8})
QUERY_AUTHORS = pl.DataFrame({"arxiv_id": ["q"], "author_id": ["q_author"]})
PAIRS = pl.DataFrame({"query_id": ["q"], "author_id": ["cand"]})
AFF_SCHEMA = {"person_key": pl.Utf8, "orcid": pl.Utf8, "institution_key": pl.Utf8, "first_year": pl.Int64,
              "last_year": pl.Int64, "source": pl.Utf8, "arxiv_id": pl.Utf8, "position": pl.Int64}


def _real(name: str) -> dict:
    path = OA / name
    if not path.is_file():
        pytest.skip(f"the real OpenAlex samples are not here ({path.parent}; see tests/README.md)")
    return json.loads(path.read_text())


def _inst(key: str, name: str, **more: object) -> dict[str, object]:
    return {"institution_key": key, "ror": key.removeprefix("ror:") if key.startswith("ror:") else None, "name": name,
            "country": None, "type": None, "openalex_id": None, "aliases": None, "lineage": None, "related": None, **more}


def _successor(ror_key: str) -> dict[str, object]:
    return {"relationship": "successor", "ror": ror_key.removeprefix("ror:"), "openalex_id": None, "name": None}


def _affs(author_key: str, cand_key: str, author_years: tuple[int, int] = (2025, 2026),
          cand_years: tuple[int, int] = (2023, 2024)) -> pl.DataFrame:
    return pl.DataFrame([
        dict(person_key="s2:111", orcid=None, institution_key=author_key, first_year=author_years[0],
             last_year=author_years[1], source="openalex", arxiv_id=None, position=None),
        dict(person_key="s2:777", orcid=None, institution_key=cand_key, first_year=cand_years[0], last_year=cand_years[1],
             source="openalex", arxiv_id=None, position=None)], schema=AFF_SCHEMA)


def _conflicts(affs: pl.DataFrame, institutions: list[dict[str, object]] | None, year: int = 2026) -> pl.DataFrame:
    names = {i["institution_key"]: i["name"] for i in institutions or []}
    aff = affs.with_columns(pl.col("institution_key").replace_strict(names, default=None).alias("name"))
    frame = INSTITUTIONS.conform(pl.DataFrame(institutions, infer_schema_length=None)) if institutions else None
    stints = author_stints(person_links(MENTIONS, aff), aff)
    return institution_conflicts(PAIRS, QUERY_AUTHORS, {"q": year}, stints, 3, frame)


def _why(out: pl.DataFrame) -> dict[str, object]:
    [row] = out.to_dicts()
    assert row["reason"] == "same_institution"
    return {**json.loads(row["evidence"]), "detail": row["detail"]}


def test_a_ror_id_and_its_successor_are_one_institution() -> None:
    # The query author's institution under its new id, the candidate's stint recorded under the old one.
    old = _inst(OLD, "Uni A (old id)", related=[_successor(NEW)])
    new = _inst(NEW, "Uni A")
    why = _why(_conflicts(_affs(NEW, OLD), [old, new]))
    assert why["rule"] == "ror successor" and why["via"] == f"{OLD} succeeded by {NEW}"
    assert (why["institution_key"], why["query_institution_key"]) == (OLD, NEW)
    assert why["detail"] == (f"was at Uni A (old id) ({OLD}) 2023-2024 [openalex]; query author q_author was at Uni A "
                             f"({NEW}) 2025-2026 [openalex]; ror successor: {OLD} succeeded by {NEW}; within 3 years "
                             "of 2026")
    # The same relation said by the successor (its predecessor), and through a chain of two.
    by_new = [_inst(OLD, "Uni A (old id)"), _inst(NEW, "Uni A", related=[
        {"relationship": "predecessor", "ror": OLD.removeprefix("ror:"), "openalex_id": None, "name": None}])]
    assert _why(_conflicts(_affs(NEW, OLD), by_new))["rule"] == "ror successor"
    chain = [old, _inst(NEW, "Uni A", related=[_successor(NEWER)]), _inst(NEWER, "Uni A (newest)")]
    assert _why(_conflicts(_affs(NEWER, OLD), chain))["via"] == f"{OLD} succeeded by {NEW}; {NEW} succeeded by {NEWER}"
    # Without the relation they are two institutions; with it, the window still holds (2022 is 4 years before).
    assert _conflicts(_affs(NEW, OLD), [_inst(OLD, "Uni A (old id)"), new]).height == 0
    assert _conflicts(_affs(NEW, OLD, cand_years=(2019, 2022)), [old, new]).height == 0
    assert _conflicts(_affs(NEW, OLD, cand_years=(2019, 2023)), [old, new]).height == 1


def test_an_unmatched_name_meets_the_ror_institution_it_names() -> None:
    """`name:university a` (a string OpenAlex matched to nothing) is the ROR institution displayed
    as "Uni A": both normalise alike; a name the institution does not bear stays apart."""
    uni = _inst(NEW, "Uni A")
    why = _why(_conflicts(_affs(NEW, "name:university a"), [uni, _inst("name:university a", "University A")]))
    assert why["rule"] == "name matched alias" and why["via"] == f"display name 'Uni A' of {NEW}"
    # Either side may hold the name.
    assert _why(_conflicts(_affs("name:university a", NEW), [uni]))["query_institution_key"] == "name:university a"
    assert _conflicts(_affs(NEW, "name:university b"), [uni]).height == 0
    # Two names of one ROR institution meet through it, though neither stint is at its id.
    both = _inst(NEW, "Uni A", aliases=["UA"])
    assert _why(_conflicts(_affs("name:ua", "name:university a"), [both]))["rule"] == "name matched alias"
    # A ROR id never meets another ROR id by name: the ids say they are two.
    assert _conflicts(_affs(NEW, OLD), [uni, _inst(OLD, "Uni A")]).height == 0


def test_the_real_michigan_record_s_alternatives_and_acronyms_are_its_aliases() -> None:
    record = institution_row(_real("openalex-python__I27837315.json"))
    assert record is not None and {"UMich", "UM", "University of Michigan–Ann Arbor"} <= set(record["aliases"])
    key = record["institution_key"]
    for spelled in ("name:umich", "name:um", "name:university of michigan", "name:university of michigan ann arbor"):
        why = _why(_conflicts(_affs(key, spelled), [record]))
        assert why["rule"] == "name matched alias" and key in why["via"], spelled
    assert _conflicts(_affs(key, "name:michigan state university"), [record]).height == 0
    # Its children (associated_institutions) are parts of it; two of them are not one institution.
    children = [r for r in record["related"] if r["relationship"] == "child"]
    press, station = (next(c for c in children if c["name"] == n) for n in ("University of Michigan Press",
                                                                          "University of Michigan Biological Station"))
    rows = [record, *(_inst(f"ror:{c['ror']}", c["name"], openalex_id=c["openalex_id"]) for c in (press, station))]
    why = _why(_conflicts(_affs(key, f"ror:{press['ror']}"), rows))
    assert why["rule"] == "parent/child" and why["via"] == f"ror:{press['ror']} is part of {key}"
    assert _conflicts(_affs(f"ror:{station['ror']}", f"ror:{press['ror']}"), rows).height == 0


def test_a_raw_string_openalex_matched_once_meets_it_unmatched_elsewhere() -> None:
    """The real work's authorship: OpenAlex matched "Impactstory, Sanford, NC, USA" to Impact
    Technology Development (ror 05ppvf150). On a paper where it matched the same string to nothing,
    the author is `name:impactstory`, and meets the ROR institution by that spelling."""
    work = _real("openalex-python__W2741809807.json")
    matched, _ = authorship_rows("2401.00001", work)
    [impact] = [i for i in matched if i["ror"] == "05ppvf150"]
    assert impact["aliases"] == ["Impactstory"]
    unmatched = copy.deepcopy(work)
    for a in unmatched["authorships"]:
        a["institutions"] = []
        for aff in a["affiliations"]:
            aff["institution_ids"] = []
    elsewhere, _ = authorship_rows("2401.00002", unmatched)
    assert "name:impactstory" in {i["institution_key"] for i in elsewhere}
    why = _why(_conflicts(_affs(impact["institution_key"], "name:impactstory"), [*matched, *elsewhere]))
    assert why["rule"] == "name matched alias" and why["via"] == "alias 'Impactstory' of ror:05ppvf150"
    # UQAM's lineage names its parent (Université du Québec): a part of it, by OpenAlex's lineage.
    [uqam] = [i for i in matched if i["ror"] == "002rjbv21"]
    assert uqam["lineage"] == ["I49663120"]
    parent = _inst("ror:0ddddddd4", "Université du Québec", openalex_id="I49663120")
    assert _why(_conflicts(_affs(parent["institution_key"], uqam["institution_key"]), [uqam, parent]))["rule"] == "parent/child"


def test_identities_say_what_each_key_meets_by() -> None:
    frame = INSTITUTIONS.conform(pl.DataFrame([_inst(OLD, "Uni A", related=[_successor(NEW)]), _inst(NEW, "Uni A")],
                                              infer_schema_length=None))
    got = institution_identities(frame, ["name:university a", "name:nowhere"]).sort("institution_key", "kind")
    # A chain's ids share its first id; the name reaches both through it; another name only itself.
    assert got.select("institution_key", "identity", "kind").rows() == [
        ("name:nowhere", "name:nowhere", "self"), ("name:university a", OLD, "name"),
        ("name:university a", "name:university a", "self"), (OLD, OLD, "self"), (NEW, OLD, "self")]


def test_the_warehouse_keeps_what_the_rules_read_and_the_pools_read_it(tmp_path: Path) -> None:
    """Stored through save_graph (aliases add up over answers), read by coi_inputs, checked by the
    function the pools flow calls."""
    record = institution_row(_real("openalex-python__I27837315.json"))
    assert record is not None
    old = _inst(OLD, "University of Michigan (old id)", related=[_successor(record["ror"])])
    affiliations = pl.DataFrame([
        dict(person_key="s2:111", orcid=None, institution_key=record["institution_key"], first_year=2025, last_year=2026,
             source="openalex", arxiv_id=None, position=None),
        dict(person_key="s2:777", orcid=None, institution_key="name:umich", first_year=2024, last_year=2024,
             source="grobid", arxiv_id=None, position=None),
        dict(person_key="s2:888", orcid=None, institution_key=OLD, first_year=2023, last_year=2023, source="openalex",
             arxiv_id=None, position=None)], schema=AFF_SCHEMA)
    mentions = pl.concat([MENTIONS, pl.DataFrame({"author_id": ["other"], "arxiv_id": ["p2"], "position": [0], "orcid": [None],
                                                  "s2_author_id": ["888"]}, schema=MENTIONS.schema)])
    pairs = pl.DataFrame({"query_id": ["q", "q"], "author_id": ["cand", "other"]})
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.graph.save_graph(institutions=pl.DataFrame([{**record, "aliases": ["UMich"]}, old, _inst("name:umich", "UMich")],
                                                infer_schema_length=None), affiliations=affiliations)
        wh.graph.save_graph(institutions=pl.DataFrame([{**record, "aliases": None, "related": None}], infer_schema_length=None))
        stored = wh.read(INSTITUTIONS).filter(pl.col("institution_key") == record["institution_key"]).to_dicts()[0]
        graph = {**wh.pools.coi_inputs(), "mentions": mentions}
    assert stored["aliases"] == ["UMich"] and stored["lineage"] == [] and len(stored["related"]) == 7
    out = graph_conflicts(graph, pairs, QUERY_AUTHORS, {"q": 2026}, 3)
    rules = {r["author_id"]: json.loads(r["evidence"])["rule"] for r in out.to_dicts()}
    assert rules == {"cand": "name matched alias", "other": "ror successor"}
