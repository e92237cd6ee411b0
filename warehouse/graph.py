"""The scholarly graph: citation edges, paper topics, institutions and author affiliations, and the
record of which paper was asked of which source (so a refresh asks only about new papers).

Owns ``citations``, ``paper_topics``, ``institutions``, ``author_affiliations``, ``paper_authorships`` and
``graph_fetches``; reads ``papers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from revbench.schemas.graph import (AUTHOR_AFFILIATIONS, CITATIONS, GRAPH_FETCHES, GRAPH_TABLES, INSTITUTIONS,
                                    PAPER_AUTHORSHIPS, PAPER_TOPICS, SCHEMES_OF_SOURCE)
from revbench.schemas.model import Table
from revbench.warehouse.core import _q, utcnow
from revbench.warehouse.graph_resolve import ResolveQueries

_AFFILIATION_MERGE = {
    # Each sighting widens the years; an id one source lacked is kept from another sighting.
    "first_year": "least(author_affiliations.first_year, excluded.first_year)",
    "last_year": "greatest(author_affiliations.last_year, excluded.last_year)",
    "orcid": "coalesce(excluded.orcid, author_affiliations.orcid)",
    "arxiv_id": "coalesce(author_affiliations.arxiv_id, excluded.arxiv_id)",
    # The position belongs to the paper kept in arxiv_id.
    "position": 'CASE WHEN author_affiliations.arxiv_id IS NULL THEN excluded."position" ELSE author_affiliations."position" END',
}
_INSTITUTION_MERGE = {c: f"coalesce(excluded.{_q(c)}, institutions.{_q(c)})"
                      for c in ("ror", "name", "country", "type", "openalex_id", "lineage", "related")}
# Every answer names an institution its own way: the names a conflict check meets it by add up.
_INSTITUTION_MERGE["aliases"] = ("CASE WHEN institutions.aliases IS NULL THEN excluded.aliases WHEN excluded.aliases IS NULL "
                                 "THEN institutions.aliases ELSE list_sort(list_distinct(list_concat(institutions.aliases, "
                                 "excluded.aliases))) END")
_TOPIC_SOURCE = ("CASE scheme WHEN 's2-fos' THEN 's2' WHEN 'openalex-topic' THEN 'openalex' ELSE scheme END")


class GraphSlice(ResolveQueries):
    """Loads of the graph by natural key, what a refresh still has to fetch, reads for the stages,
    coverage; and (from :class:`ResolveQueries`, the same stage's) the references to resolve."""

    stage = "graph"

    def save_graph(self, citations: pl.DataFrame | None = None, topics: pl.DataFrame | None = None,
                   institutions: pl.DataFrame | None = None, affiliations: pl.DataFrame | None = None,
                   fetches: pl.DataFrame | None = None, authorships: pl.DataFrame | None = None,
                   fresh: bool = False) -> dict[str, int]:
        """Store what a source answered, atomically; returns rows written per table.

        ``fetches`` (``arxiv_id, source, kind, found, n_rows``, ``fetched_at`` now unless given) names the papers whose
        answer this is: their earlier references from that source (topics of that source's schemes,
        authorships with its affiliations) are replaced, so a list that shrank leaves no stale rows. Everything else is an
        upsert by key: loading the same answer again changes nothing. ``fresh``: every citation, topic and authorship
        is of a paper ``fetches`` names for its kind, once by key, so it is new once those are replaced: inserted, not
        merged (a bulk file's millions of references, where an upsert costs nearly twice an insert)."""
        written: dict[str, int] = {}
        write = self.insert if fresh else self.upsert
        with self.transaction():
            if fetches is not None and fetches.height:
                if "fetched_at" not in fetches.columns:
                    fetches = fetches.with_columns(fetched_at=pl.lit(utcnow(), dtype=GRAPH_FETCHES.polars_schema["fetched_at"]))
                self._clear_refetched(GRAPH_FETCHES.conform(fetches))
                written["graph_fetches"] = self.upsert(GRAPH_FETCHES, fetches)
            if citations is not None:
                # Lists cleared above are inserted (repeats kept last, as an upsert keeps them): with no index of
                # the key (CITATIONS.key_unindexed_since) an upsert is one more pass over millions of references.
                refs = fetches.filter(pl.col("kind") == "references") if fetches is not None else None
                cleared = fresh or (refs is not None and citations.join(
                    refs, how="anti", left_on=["citing_arxiv_id", "source"], right_on=["arxiv_id", "source"]).is_empty())
                once = citations if fresh else citations.unique(subset=list(CITATIONS.primary_key), keep="last",
                                                                maintain_order=True)
                written["citations"] = self.insert(CITATIONS, once) if cleared else self.upsert(CITATIONS, citations)
            if topics is not None:
                written["paper_topics"] = write(PAPER_TOPICS, topics)
            if institutions is not None:
                written["institutions"] = self.upsert(INSTITUTIONS, self._one_per_institution(institutions),
                                                      sets=_INSTITUTION_MERGE)
            if affiliations is not None:
                written["author_affiliations"] = self.upsert(AUTHOR_AFFILIATIONS, self._widen(affiliations),
                                                             sets=_AFFILIATION_MERGE)
            if authorships is not None:
                written["paper_authorships"] = write(PAPER_AUTHORSHIPS, authorships)
        return written

    def _clear_refetched(self, fetches: pl.DataFrame) -> None:
        refs = fetches.filter(pl.col("kind") == "references").select("arxiv_id", "source")
        topics = pl.DataFrame(
            [(a, scheme) for a, s in fetches.filter(pl.col("kind") == "topics").select("arxiv_id", "source").iter_rows()
             for scheme in SCHEMES_OF_SOURCE.get(s, ())], schema={"arxiv_id": pl.Utf8, "scheme": pl.Utf8}, orient="row")
        people = fetches.filter(pl.col("kind") == "affiliations").select("arxiv_id", "source")
        cleared = {"_refetched": refs, "_retopiced": topics, "_repeopled": people}
        for name, frame in cleared.items():
            self.con.register(name, frame.to_arrow())
        try:
            self._exec("DELETE FROM citations WHERE (citing_arxiv_id, source) IN (SELECT arxiv_id, source FROM _refetched)")
            self._exec("DELETE FROM paper_topics WHERE (arxiv_id, scheme) IN (SELECT arxiv_id, scheme FROM _retopiced)")
            self._exec("DELETE FROM paper_authorships WHERE (arxiv_id, source) IN (SELECT arxiv_id, source FROM _repeopled)")
        finally:
            for name in cleared:
                self.con.unregister(name)

    def forget_answers(self, arxiv_ids: Sequence[str], source: str) -> None:
        """Drop what ``source`` answered for ``arxiv_ids`` (their references, the topics of its
        schemes, their authorships, the record that they were asked), atomically: a paper its bulk
        files no longer hold is then one never asked, so it is asked again."""
        if not arxiv_ids:
            return
        schemes = list(SCHEMES_OF_SOURCE.get(source, ()))
        self.con.register("_forgotten", pl.DataFrame({"k": list(arxiv_ids)}, schema={"k": pl.Utf8}).to_arrow())
        try:
            with self.transaction():
                self._exec("DELETE FROM citations WHERE source = ? AND citing_arxiv_id IN (SELECT k FROM _forgotten)", [source])
                if schemes:
                    self._exec("DELETE FROM paper_topics WHERE list_contains(?, scheme) AND arxiv_id IN (SELECT k FROM _forgotten)",
                               [schemes])
                self._exec("DELETE FROM paper_authorships WHERE source = ? AND arxiv_id IN (SELECT k FROM _forgotten)", [source])
                self._exec("DELETE FROM graph_fetches WHERE source = ? AND arxiv_id IN (SELECT k FROM _forgotten)", [source])
        finally:
            self.con.unregister("_forgotten")

    @staticmethod
    def _one_per_institution(institutions: pl.DataFrame) -> pl.DataFrame:
        """One row per key, as the merge makes of successive answers: the last value given of each
        column, and every alias given (several papers of one piece name one institution)."""
        df = INSTITUTIONS.conform(institutions)
        if not df["institution_key"].is_duplicated().any():
            return df.with_columns(pl.col("aliases").list.unique().list.sort())
        given = [c for c in INSTITUTIONS.names if c not in ("institution_key", "aliases")]
        return (df.group_by("institution_key", maintain_order=True)
                .agg(*(pl.col(c).drop_nulls().last() for c in given),
                     pl.col("aliases").explode().drop_nulls().unique().sort(), pl.col("aliases").is_not_null().any().alias("_named"))
                .with_columns(pl.when("_named").then(pl.col("aliases")).alias("aliases"))
                .select(INSTITUTIONS.names))

    @staticmethod
    def _widen(affiliations: pl.DataFrame) -> pl.DataFrame:
        """One row per key, spanning every year the frame shows for it (several papers of one person)."""
        df = AUTHOR_AFFILIATIONS.conform(affiliations)
        key = list(AUTHOR_AFFILIATIONS.primary_key)
        return df.group_by(key, maintain_order=True).agg(
            pl.col("orcid").drop_nulls().first(), pl.col("first_year").min(), pl.col("last_year").max(),
            pl.col("arxiv_id").drop_nulls().first(),
            pl.col("position").filter(pl.col("arxiv_id").is_not_null()).first()).select(AUTHOR_AFFILIATIONS.names)

    def papers_to_fetch(self, source: str, kind: str) -> list[str]:
        """Corpus papers never asked of ``source`` for ``kind`` (references, topics, affiliations):
        a day-later refresh asks only about these."""
        rows = self._exec("""SELECT p.arxiv_id FROM papers p WHERE NOT EXISTS (
                                 SELECT 1 FROM graph_fetches f
                                 WHERE f.arxiv_id = p.arxiv_id AND f.source = ? AND f.kind = ?)
                             ORDER BY p.arxiv_id""", [source, kind])
        return [r[0] for r in rows]

    def _of(self, table: Table, column: str, keys: Sequence[str], order: str, source: str | None = None,
            columns: Sequence[str] = ()) -> pl.DataFrame:
        """``table``'s rows whose ``column`` is one of ``keys`` (of ``source``), all its columns or only ``columns``."""
        self.con.register("_keys_of", pl.DataFrame({"k": list(keys)}, schema={"k": pl.Utf8}).to_arrow())
        try:
            cols = ", ".join(_q(c) for c in columns or table.names)
            only = "AND source = ?" if source else ""
            df = self._frame(f"SELECT {cols} FROM {_q(table.name)} WHERE {_q(column)} IN (SELECT k FROM _keys_of) {only} "
                             f"ORDER BY {order}", [source] if source else None)
        finally:
            self.con.unregister("_keys_of")
        if columns:
            return df.cast({c: table.polars_schema[c] for c in columns}) if df.height else table.empty().select(columns)
        return table.conform(df) if df.height else table.empty()

    def references_of(self, arxiv_ids: Sequence[str], source: str | None = None, columns: Sequence[str] = ()
                      ) -> pl.DataFrame:
        """Every reference of these papers, from every source (or only ``source``), in list order;
        only ``columns`` where given (the match rates read a reference's keys, not its contexts)."""
        return self._of(CITATIONS, "citing_arxiv_id", arxiv_ids, "citing_arxiv_id, source, ordinal", source, columns)

    def cited_papers(self, arxiv_ids: Sequence[str]) -> pl.DataFrame:
        """``query_id, neighbor_id``: the corpus papers each of these papers cites (its references
        resolved to a warehouse paper, from any source), each pair once, never a paper itself."""
        self.con.register("_citing", pl.DataFrame({"k": list(arxiv_ids)}, schema={"k": pl.Utf8}).to_arrow())
        try:
            df = self._frame(
                """SELECT DISTINCT c.citing_arxiv_id AS query_id, c.cited_arxiv_id AS neighbor_id FROM citations c
                   JOIN _citing ON _citing.k = c.citing_arxiv_id JOIN papers p ON p.arxiv_id = c.cited_arxiv_id
                   WHERE c.cited_arxiv_id <> c.citing_arxiv_id ORDER BY 1, 2""")
        finally:
            self.con.unregister("_citing")
        return df if df.height else pl.DataFrame(schema={"query_id": pl.Utf8, "neighbor_id": pl.Utf8})

    def topics_of(self, arxiv_ids: Sequence[str]) -> pl.DataFrame:
        """Every topic of these papers under every scheme."""
        return self._of(PAPER_TOPICS, "arxiv_id", arxiv_ids, "arxiv_id, scheme, topic, origin")

    def affiliations_of(self, person_keys: Sequence[str]) -> pl.DataFrame:
        """Where these people were and when: their ``author_affiliations`` with the institution's
        ``ror``, ``name``, ``country`` and ``type`` (null where the institution is not stored)."""
        self.con.register("_people", pl.DataFrame({"k": list(person_keys)}, schema={"k": pl.Utf8}).to_arrow())
        try:
            return self._frame(
                """SELECT a.*, i.ror, i.name, i.country, i.type FROM author_affiliations a
                   LEFT JOIN institutions i USING (institution_key)
                   WHERE a.person_key IN (SELECT k FROM _people)
                   ORDER BY a.person_key, a.first_year NULLS LAST, a.institution_key, a.source""")
        finally:
            self.con.unregister("_people")

    def known_work_ids(self) -> dict[str, str]:
        """OpenAlex work id -> arXiv id of every paper whose own work an earlier run fetched: what a
        later paper's ``referenced_works`` name our papers by."""
        rows = self._exec("""SELECT DISTINCT source_paper_id, arxiv_id FROM graph_fetches
                             WHERE source = 'openalex' AND source_paper_id IS NOT NULL""")
        return dict(rows)

    def paper_identifiers(self) -> pl.DataFrame:
        """``arxiv_id, doi, title, year`` of every corpus paper: what cited works are resolved against."""
        return self._frame("SELECT arxiv_id, doi, title, year FROM papers ORDER BY arxiv_id")

    def has_graph(self) -> bool:
        """Whether any graph table exists and holds a row (a warehouse before 15 has none)."""
        present = {r[0] for r in self._exec("SELECT table_name FROM information_schema.tables")}
        return any(t.name in present and self._exec(f"SELECT EXISTS (SELECT 1 FROM {_q(t.name)})")[0][0]
                   for t in GRAPH_TABLES)

    def graph_coverage(self) -> dict[str, Any]:
        """Per source, corpus papers with references and with topics, references and those resolved to
        a warehouse paper; and rows of institutions and affiliations (people, institutions)."""
        rows = self._exec(
            f"""WITH corpus AS (SELECT arxiv_id FROM papers),
                     refs AS (SELECT source, count(DISTINCT citing_arxiv_id) FILTER (
                                     WHERE citing_arxiv_id IN (SELECT arxiv_id FROM corpus)) AS papers_with_references,
                                     count(*) AS "references", count(cited_arxiv_id) AS resolved
                              FROM citations GROUP BY source),
                     tops AS (SELECT {_TOPIC_SOURCE} AS source, count(DISTINCT arxiv_id) FILTER (
                                     WHERE arxiv_id IN (SELECT arxiv_id FROM corpus)) AS papers_with_topics
                              FROM paper_topics GROUP BY 1)
                SELECT source, coalesce(papers_with_references, 0), coalesce("references", 0), coalesce(resolved, 0),
                       coalesce(papers_with_topics, 0)
                FROM refs FULL JOIN tops USING (source) ORDER BY source""")
        names = ("source", "papers_with_references", "references", "resolved", "papers_with_topics")
        people, places = self._exec("SELECT count(DISTINCT person_key), count(DISTINCT institution_key) "
                                    "FROM author_affiliations")[0]
        return {"papers": int(self._exec("SELECT count(*) FROM papers")[0][0]),
                "sources": [dict(zip(names, r, strict=True)) for r in rows],
                "institutions": self.count(INSTITUTIONS), "with_ror": int(self._exec(
                    "SELECT count(*) FROM institutions WHERE ror IS NOT NULL")[0][0]),
                "affiliations": self.count(AUTHOR_AFFILIATIONS), "people": int(people),
                "affiliated_institutions": int(places)}
