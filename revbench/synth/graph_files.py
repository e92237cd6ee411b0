"""The world's scholarly graph on disk (the ``graph/`` folder) and read back one paper at a time.

One parquet table per kind of record, each sorted by the key the replay server looks up (the
citing paper, the paper, the person): at 160k papers one JSON document was about 1.6 GB and took
minutes and several GB of Python objects to parse; the tables are a tenth of that on disk and are
held as columns, each loaded the first time it is asked for, with an index of each key's rows.
Worlds written before (``graph.json``) are read into the same tables.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

GRAPH_DIR = "graph"
"""The world's folder of graph tables."""
LEGACY_FILE = "graph.json"
"""The whole graph in one JSON document, as worlds of format 5 hold it."""

_NAMED = pl.Struct({"id": pl.Utf8, "display_name": pl.Utf8})
SCHEMAS: dict[str, dict[str, Any]] = {
    # One row per reference, in each citing paper's order ("citing" is the paper's arXiv id).
    "references": {"citing": pl.Utf8, "s2_id": pl.Utf8, "arxiv_id": pl.Utf8, "arxiv": pl.Utf8, "doi": pl.Utf8,
                   "title": pl.Utf8, "year": pl.Int64, "authors": pl.List(pl.Utf8), "in_world": pl.Boolean,
                   "own": pl.Boolean, "coauthor": pl.Boolean, "is_influential": pl.Boolean,
                   "intents": pl.List(pl.Utf8), "n_contexts": pl.Int64,
                   "grobid": pl.Struct({"typed_doi": pl.Boolean, "arxiv_in": pl.Utf8, "title": pl.Boolean,
                                        "date": pl.Boolean})},
    "topics": {"arxiv_id": pl.Utf8, "s2": pl.List(pl.Struct({"category": pl.Utf8, "source": pl.Utf8})),
               "openalex": pl.List(pl.Struct({"id": pl.Utf8, "display_name": pl.Utf8, "score": pl.Float64,
                                              "subfield": _NAMED, "field": _NAMED, "domain": _NAMED}))},
    "authors": {"arxiv_id": pl.Utf8, "people": pl.List(pl.Utf8)},
    "people": {"person_id": pl.Utf8, "name": pl.Utf8, "orcid": pl.Utf8},
    # One row per affiliation, in each person's order.
    "affiliations": {"person_id": pl.Utf8, "inst": pl.Int64, "first_year": pl.Int64, "last_year": pl.Int64,
                     "name": pl.Utf8},
    # OpenAlex's impolite identity (revbench.synth.graph.draw_openalex_profiles): the papers it files
    # under a person's second author id, and the authorships ("arxiv_id:position") it shows no ORCID on.
    "second_profiles": {"person_id": pl.Utf8, "arxiv_id": pl.Utf8},
    "hidden_orcids": {"authorship": pl.Utf8},
    "institutions": {"index": pl.Int64, "ror": pl.Utf8, "name": pl.Utf8, "country": pl.Utf8, "type": pl.Utf8,
                     "openalex_id": pl.Utf8, "variants": pl.List(pl.Utf8)},
}
"""Each graph table's columns; a record read back is its row without the key column (but
``people``'s and ``institutions``' rows, which are whole records)."""


def _series(name: str, values: list[Any], dtype: Any) -> pl.Series:
    # Through Arrow: polars' own conversion of nested Python values (the topics' structs) held
    # some 30 times their size, 0.65 GB for 20k papers' topics.
    arrow_type = pl.Series(name, [], dtype=dtype).to_arrow().type
    return pl.Series(name, pl.from_arrow(pa.array(values, type=arrow_type)))


def _frame(table: str, columns: dict[str, list[Any]]) -> pl.DataFrame:
    return pl.DataFrame([_series(c, columns.get(c, []), dtype) for c, dtype in SCHEMAS[table].items()])


def _flat(nested: dict[str, list[dict[str, Any]]], key: str) -> dict[str, list[Any]]:
    """A mapping's lists of records as columns, in key order, with each record's key as ``key``."""
    keys = sorted(nested)
    rows = [r for k in keys for r in nested[k]]
    return {key: [k for k in keys for _ in nested[k]], **{c: [r[c] for r in rows] for c in (rows[0] if rows else {})}}


def graph_frames(graph: dict[str, Any]) -> dict[str, pl.DataFrame]:
    """The graph's tables (``SCHEMAS``) from the graph as ``revbench.synth.graph.draw_graph`` draws it."""
    papers, people = sorted(graph["authors"]), sorted(graph["people"])
    topics, insts = graph["topics"], graph["institutions"]
    profiles = graph.get("openalex_profiles", {})  # worlds of format 5 have none
    second = profiles.get("second_profile", {})
    return {
        "references": _frame("references", _flat(graph["references"], "citing")),
        "topics": _frame("topics", {"arxiv_id": sorted(topics), "s2": [topics[p]["s2"] for p in sorted(topics)],
                                    "openalex": [topics[p]["openalex"] for p in sorted(topics)]}),
        "authors": _frame("authors", {"arxiv_id": papers, "people": [graph["authors"][p] for p in papers]}),
        "people": _frame("people", {"person_id": people, **{c: [graph["people"][m][c] for m in people]
                                                            for c in ("name", "orcid")}}),
        "affiliations": _frame("affiliations", _flat(graph["affiliations"], "person_id")),
        "institutions": _frame("institutions", {c: [i[c] for i in insts] for c in SCHEMAS["institutions"]}),
        "second_profiles": _frame("second_profiles", {
            "person_id": [m for m in sorted(second) for _ in second[m]],
            "arxiv_id": [a for m in sorted(second) for a in second[m]]}),
        "hidden_orcids": _frame("hidden_orcids", {"authorship": sorted(profiles.get("no_orcid", []))}),
    }


def write_graph(out_dir: Path, graph: dict[str, Any]) -> None:
    """The graph's tables as ``out_dir/graph/<table>.parquet``, each saying it is SYNTHETIC."""
    folder = out_dir / GRAPH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in graph_frames(graph).items():
        frame.write_parquet(folder / f"{name}.parquet", metadata={"notice": graph["notice"]})


def _ranges(keys: pl.Series) -> dict[str, tuple[int, int]]:
    """Each key of a sorted column and its rows (offset, length)."""
    runs = keys.rle().struct.unnest()
    starts = runs["len"].cum_sum() - runs["len"]
    return dict(zip(runs["value"].to_list(), zip(starts.to_list(), runs["len"].to_list(), strict=True), strict=True))


class GraphStore:
    """A world's graph, looked up by paper or person; each table is read the first time it is used."""

    def __init__(self, tables: dict[str, Path | pl.DataFrame], notice: str | None = None):
        self._tables = tables
        self._notice = notice

    @classmethod
    def open(cls, world_dir: Path) -> GraphStore | None:
        """The graph of the world in ``world_dir``, or None when it has none (worlds before the graph,
        or generated without it)."""
        folder = world_dir / GRAPH_DIR
        if folder.is_dir():
            return cls({name: folder / f"{name}.parquet" for name in SCHEMAS})
        legacy = world_dir / LEGACY_FILE
        if legacy.exists():
            graph = json.loads(legacy.read_text())
            return cls(dict(graph_frames(graph)), graph["notice"])
        return None

    def _table(self, name: str) -> pl.DataFrame:
        t = self._tables[name]
        return t if isinstance(t, pl.DataFrame) else pl.read_parquet(t)

    @cached_property
    def _references(self) -> tuple[pl.DataFrame, dict[str, tuple[int, int]]]:
        t = self._table("references")
        return t.drop("citing"), _ranges(t["citing"])

    @cached_property
    def _affiliations(self) -> tuple[pl.DataFrame, dict[str, tuple[int, int]]]:
        t = self._table("affiliations")
        return t.drop("person_id"), _ranges(t["person_id"])

    @cached_property
    def _topics(self) -> tuple[pl.DataFrame, dict[str, int]]:
        t = self._table("topics")
        return t.drop("arxiv_id"), {k: i for i, k in enumerate(t["arxiv_id"].to_list())}

    @cached_property
    def _authors(self) -> dict[str, list[str]]:
        t = self._table("authors")
        return dict(zip(t["arxiv_id"].to_list(), t["people"].to_list(), strict=True))

    @cached_property
    def _people(self) -> tuple[pl.DataFrame, dict[str, int]]:
        t = self._table("people")
        return t, {k: i for i, k in enumerate(t["person_id"].to_list())}

    @property
    def notice(self) -> str:
        """What the graph's files say of themselves (that they are SYNTHETIC)."""
        t = self._tables["references"]
        return self._notice or (pl.read_parquet_metadata(t)["notice"] if isinstance(t, Path) else "")

    @cached_property
    def institutions(self) -> list[dict[str, Any]]:
        """Every institution, by its ``index`` (what an affiliation's ``inst`` names)."""
        return self._table("institutions").to_dicts()

    def references(self, arxiv_id: str) -> list[dict[str, Any]]:
        """The paper's references in its order (none for a paper the graph does not know)."""
        frame, index = self._references
        start, n = index.get(arxiv_id, (0, 0))
        return frame.slice(start, n).to_dicts() if n else []

    def topics(self, arxiv_id: str) -> dict[str, list[dict[str, Any]]] | None:
        """The paper's S2 fields of study and OpenAlex topics (``{"s2": [...], "openalex": [...]}``)."""
        frame, index = self._topics
        i = index.get(arxiv_id)
        return None if i is None else frame.row(i, named=True)

    def authors(self, arxiv_id: str) -> list[str]:
        """The person ids of the paper's authors, in its order."""
        return self._authors.get(arxiv_id, [])

    def paper_ids(self) -> list[str]:
        """Every paper of the graph, sorted."""
        return sorted(self._authors)

    def person_ids(self) -> list[str]:
        """Every person of the graph."""
        return self._people[0]["person_id"].to_list()

    def person(self, person_id: str) -> dict[str, Any] | None:
        """A person's name and ORCID."""
        frame, index = self._people
        i = index.get(person_id)
        return None if i is None else {k: v for k, v in frame.row(i, named=True).items() if k != "person_id"}

    @cached_property
    def _profiles(self) -> tuple[dict[str, set[str]], set[str]]:
        second: dict[str, set[str]] = {}
        for pid, arxiv_id in self._table("second_profiles").iter_rows():
            second.setdefault(pid, set()).add(arxiv_id)
        return second, set(self._table("hidden_orcids")["authorship"].to_list())

    def openalex_profiles(self) -> tuple[dict[str, set[str]], set[str]]:
        """(person id -> the papers OpenAlex files under that person's second author id, the
        authorships ``arxiv_id:position`` on which OpenAlex shows no ORCID)."""
        return self._profiles

    def affiliations(self, person_id: str) -> list[dict[str, Any]]:
        """A person's institutions (``inst``, first and last year, the name as spelled)."""
        frame, index = self._affiliations
        start, n = index.get(person_id, (0, 0))
        return frame.slice(start, n).to_dicts() if n else []


def read_graph(world_dir: Path) -> dict[str, Any] | None:
    """The whole graph as ``draw_graph`` drew it (for tests and small worlds: at 160k papers it is
    several GB of Python objects), or None for a world without one."""
    store = GraphStore.open(world_dir)
    if store is None:
        return None
    papers, people = store.paper_ids(), store.person_ids()
    return {"synthetic": True, "notice": store.notice,
            "institutions": store.institutions,
            "references": {p: store.references(p) for p in papers},
            "topics": {p: t for p in papers if (t := store.topics(p)) is not None},
            "affiliations": {m: store.affiliations(m) for m in people},
            "authors": {p: store.authors(p) for p in papers},
            "people": {m: store.person(m) for m in people},
            "openalex_profiles": {"second_profile": {m: sorted(a) for m, a in sorted(store.openalex_profiles()[0].items())},
                                  "no_orcid": sorted(store.openalex_profiles()[1])}}
