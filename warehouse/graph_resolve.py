"""Resolving the graph's references again: which unresolved references a run looks at, the keys
they were looked up by, and the last completed graph run they were looked at since.

Owns ``citations.match_keys``; reads ``citations``, ``papers``, ``graph_fetches`` and ``runs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import polars as pl

from revbench.schemas.graph import CITATIONS
from revbench.warehouse.core import _q
from revbench.warehouse.slice import Slice


SURE_BY_ARXIV = ("coalesce(cited_arxiv IS NOT NULL AND (list_contains(match_keys, 'arxiv:' || cited_arxiv_id) "
                 "OR list_contains(match_keys, 'doi:10.48550/arxiv.' || lower(cited_arxiv_id))), false)")
"""A stored reference resolved by its arXiv id (or arXiv's DOI for it): DOI and arXiv id come before
the title, and a new paper changes neither's answer unless it shares that key, so a namesake
alone cannot change this reference (the benchmark's ``re_checked`` shows how many this leaves out)."""


class ResolveQueries(Slice):
    """The references a graph run resolves again, their keys, and since when (part of
    :class:`~revbench.warehouse.graph.GraphSlice`)."""

    stage = "graph"

    def citations_to_resolve(self, unresolved_only: bool = True, since: datetime | None = None,
                             keys: Sequence[str] | pl.DataFrame = (), settled: tuple[str, Sequence[str]] | None = None,
                             columns: Sequence[str] | None = None) -> pl.DataFrame:
        """References to (re)resolve: by default those that named no warehouse paper yet (a paper
        loaded since may be the one they cite). With ``since`` (when the last resolution started),
        only those a paper loaded since can change: unresolved ones never keyed (``match_keys``
        null) or naming by its OpenAlex work id a paper whose work was fetched since, and any one,
        resolved or not, with one of ``keys`` (the new papers' keys) among its own: a
        new paper may be the one it cites, or a namesake that makes the name it resolved by name no
        one, or one it names by a surer key. A reference its arXiv id resolved (:data:`SURE_BY_ARXIV`)
        is read again only for a key of a new paper's other than its title. ``keys`` as a frame (``k, lo, hi``:
        ``tasks.graph.new_paper_key_windows``) counts a key only for a reference whose cited year is
        within ``lo``..``hi`` (where given). ``settled`` (a run id and sources): that run's references
        from those sources are left out, resolved already against what this one would use.
        ``columns``: only these (by default every column), in the table's order."""
        unresolved = "cited_arxiv_id IS NULL" if unresolved_only else "TRUE"
        names = [c for c in CITATIONS.names if columns is None or c in columns]
        cols = ", ".join(_q(c) for c in names)
        if since is None:
            fresh, params = "TRUE", []
            if settled and settled[1]:
                fresh = ("NOT EXISTS (SELECT 1 FROM graph_fetches f WHERE f.run_id = ? AND f.kind = 'references' "
                         f"AND f.source IN ({', '.join('?' for _ in settled[1])}) AND f.arxiv_id = citations.citing_arxiv_id "
                         "AND f.source = citations.source)")
                params = [settled[0], *settled[1]]
            df = self._frame(f"SELECT {cols} FROM citations WHERE {unresolved} AND {fresh} "
                             "ORDER BY citing_arxiv_id, source, ordinal", params or None)
        else:
            # The settled papers are left out of the few references picked, not tested against each
            # of the millions stored (a correlated anti-join over the whole table costs more than the pick).
            df = self._since(unresolved, since, keys, ", ".join(_q(c) for c in dict.fromkeys(
                [*names, "citing_arxiv_id", "source"])))
            if settled and settled[1] and df.height:
                df = df.join(self._settled(*settled), on=["citing_arxiv_id", "source"], how="anti").select(names)
            else:
                df = df.select(names)
        return CITATIONS.conform(df).select(names) if df.height else CITATIONS.empty().select(names)

    def _settled(self, run_id: str, sources: Sequence[str]) -> pl.DataFrame:
        """``citing_arxiv_id, source``: the papers ``run_id`` asked ``sources`` for references."""
        return self._frame(f"""SELECT arxiv_id AS citing_arxiv_id, source FROM graph_fetches
                               WHERE run_id = ? AND kind = 'references' AND source IN ({', '.join('?' for _ in sources)})""",
                           [run_id, *sources]).cast({"citing_arxiv_id": pl.Utf8, "source": pl.Utf8})

    def _since(self, unresolved: str, since: datetime, keys: Sequence[str] | pl.DataFrame, cols: str) -> pl.DataFrame:
        windows = keys if isinstance(keys, pl.DataFrame) else pl.DataFrame({"k": list(keys)}, schema={"k": pl.Utf8})
        for bound in ("lo", "hi"):
            if bound not in windows.columns:
                windows = windows.with_columns(pl.lit(None, pl.Int64).alias(bound))
        self.con.register("_new_keys", windows.select("k", "lo", "hi").to_arrow())
        try:
            # The references are picked by rowid over the few columns the choice reads (the keys, the
            # year, and what SURE_BY_ARXIV reads), then read by rowid: the unnest runs over every keyed
            # reference (millions at a year of arXiv), and carrying their other columns through it
            # costs more than a second scan.
            return self._frame(
                # Whether a reference is sure by its arXiv id is asked of the few hit, not of every row.
                f"""WITH hit AS (SELECT r FROM (SELECT rowid AS r, cited_year, cited_arxiv_id, cited_arxiv, match_keys,
                                                       unnest(match_keys) AS k
                                                FROM citations WHERE match_keys IS NOT NULL) p
                                 JOIN _new_keys n USING (k)
                                 WHERE (n.lo IS NULL OR p.cited_year >= n.lo) AND (n.hi IS NULL OR p.cited_year <= n.hi)
                                 GROUP BY r HAVING bool_or(NOT starts_with(k, 'title:') OR NOT {SURE_BY_ARXIV})),
                         picked AS (SELECT rowid AS r FROM citations
                                    WHERE {unresolved}
                                      AND (match_keys IS NULL
                                           OR cited_openalex_id IN (SELECT source_paper_id FROM graph_fetches
                                                                    WHERE source = 'openalex' AND source_paper_id IS NOT NULL
                                                                      AND fetched_at >= ?))
                                    UNION SELECT r FROM hit)
                    SELECT {cols} FROM citations WHERE rowid IN (SELECT r FROM picked)
                    ORDER BY citing_arxiv_id, source, ordinal""", [since])
        finally:
            self.con.unregister("_new_keys")

    def references_naming(self, arxiv_ids: Sequence[str], source: str, cited_s2_ids: Sequence[str],
                          columns: Sequence[str] | None = None) -> pl.DataFrame:
        """The stored references of these papers from ``source`` that name one of ``cited_s2_ids``
        (what an update of those cited papers patches), in list order. ``columns``: only these (by
        default every column), in the table's order."""
        names = [c for c in CITATIONS.names if columns is None or c in columns]
        self.con.register("_citing", pl.DataFrame({"k": list(arxiv_ids)}, schema={"k": pl.Utf8}).to_arrow())
        self.con.register("_cited", pl.DataFrame({"k": list(cited_s2_ids)}, schema={"k": pl.Utf8}).to_arrow())
        where = ("source = ? AND cited_s2_id IN (SELECT k FROM _cited) AND citing_arxiv_id IN (SELECT k FROM _citing)")
        try:
            # Every column: found over the three the choice reads, then read whole by rowid (scanning
            # every column of every stored reference costs more than a second pass over the few found).
            # A few narrow columns: read in the one pass that finds them.
            found = (f"rowid IN (SELECT rowid FROM citations WHERE {where})" if columns is None else where)
            df = self._frame(f"""SELECT {', '.join(_q(c) for c in names)} FROM citations WHERE {found}
                                 ORDER BY citing_arxiv_id, source, ordinal""", [source])
        finally:
            self.con.unregister("_citing")
            self.con.unregister("_cited")
        return CITATIONS.conform(df).select(names) if df.height else CITATIONS.empty().select(names)

    def unresolved_count(self) -> int:
        """References that name no warehouse paper."""
        return int(self._exec("SELECT count(*) FROM citations WHERE cited_arxiv_id IS NULL")[0][0])

    def set_match_keys(self, citations: pl.DataFrame) -> int:
        """Record ``match_keys`` of these references (``citing_arxiv_id, source, ordinal, match_keys``),
        leaving every other column as it is; returns rows given."""
        return self.rewrite_references(citations.select("citing_arxiv_id", "source", "ordinal", "match_keys"))

    def rewrite_references(self, citations: pl.DataFrame) -> int:
        """Write the given columns of these stored references (``citing_arxiv_id, source, ordinal``
        and any others: what resolving them again found, or a cited paper's new values), leaving
        every other column as it is (a re-resolution reads no more than it writes back); returns rows given."""
        if citations.is_empty():
            return 0
        given = [c for c in CITATIONS.names if c in citations.columns and c not in ("citing_arxiv_id", "source", "ordinal")]
        keyed = CITATIONS.conform(citations).select("citing_arxiv_id", "source", "ordinal", *given)
        self.con.register("_keyed", keyed.to_arrow())
        # The rows are written again whole: DuckDB updates a list column (match_keys) of a large
        # table several times slower than it deletes and inserts the few rows it changes.
        replace = ", ".join(f"k.{c} AS {c}" for c in given)
        try:
            with self.transaction():
                # by rowid once found: a second join on the three key columns is a second scan of the table
                self._exec(f"""CREATE TEMP TABLE _resolved AS SELECT c.rowid AS _r, c.* REPLACE ({replace}) FROM citations c
                               JOIN _keyed k USING (citing_arxiv_id, source, ordinal)""")
                self._exec("DELETE FROM citations WHERE rowid IN (SELECT _r FROM _resolved)")
                self._exec("INSERT INTO citations SELECT * EXCLUDE (_r) FROM _resolved")
                self._exec("DROP TABLE _resolved")
        finally:
            self.con.unregister("_keyed")
        return keyed.height

    def ids_loaded_since(self, since: datetime) -> list[str]:
        """Corpus papers loaded (new or replaced) at or after ``since``."""
        return [r[0] for r in self._exec("SELECT arxiv_id FROM papers WHERE loaded_at >= ? ORDER BY arxiv_id", [since])]

    def last_completed_graph(self, current_run_id: str) -> datetime | None:
        """When the newest completed graph run but ``current_run_id`` started (null when none)."""
        rows = self._exec("SELECT started_at FROM runs WHERE flow = 'graph' AND status = 'completed' AND run_id <> ? "
                          "ORDER BY started_at DESC LIMIT 1", [current_run_id])
        return rows[0][0] if rows else None
