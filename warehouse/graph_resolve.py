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


class ResolveQueries(Slice):
    """The references a graph run resolves again, their keys, and since when (part of
    :class:`~revbench.warehouse.graph.GraphSlice`)."""

    stage = "graph"

    def citations_to_resolve(self, unresolved_only: bool = True, since: datetime | None = None,
                             keys: Sequence[str] = (), settled: tuple[str, Sequence[str]] | None = None) -> pl.DataFrame:
        """References to (re)resolve: by default those that named no warehouse paper yet (a paper
        loaded since may be the one they cite). With ``since`` (when the last resolution started),
        only those of them a paper loaded since can answer: never keyed (``match_keys`` null), one of
        ``keys`` (the new papers' ``paper_match_keys``) among theirs, or naming by its OpenAlex work id
        a paper whose work was fetched since. ``settled`` (a run id and sources): that run's references
        from those sources are left out, resolved already against what this one would use."""
        conds = ["cited_arxiv_id IS NULL"] if unresolved_only else []
        params: list[object] = []
        if settled and settled[1]:
            conds.append("NOT EXISTS (SELECT 1 FROM graph_fetches f WHERE f.run_id = ? AND f.kind = 'references' "
                         f"AND f.source IN ({', '.join('?' for _ in settled[1])}) AND f.arxiv_id = citations.citing_arxiv_id "
                         "AND f.source = citations.source)")
            params += [settled[0], *settled[1]]
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        cols = ", ".join(_q(c) for c in CITATIONS.names)
        if since is None:
            df = self._frame(f"SELECT {cols} FROM citations {where} ORDER BY citing_arxiv_id, source, ordinal", params or None)
            return CITATIONS.conform(df) if df.height else CITATIONS.empty()
        self.con.register("_new_keys", pl.DataFrame({"k": list(keys)}, schema={"k": pl.Utf8}).to_arrow())
        try:
            df = self._frame(
                # Rows by rowid, not by their three-column key: the unnest runs over every unresolved
                # reference (millions at a year of arXiv), and a day's keys hit few of them.
                f"""WITH pending AS (SELECT rowid AS r, * FROM citations {where}),
                         hit AS (SELECT DISTINCT r FROM (SELECT r, unnest(match_keys) AS k FROM pending)
                                 WHERE k IN (SELECT k FROM _new_keys))
                    SELECT {cols} FROM pending c
                    WHERE c.match_keys IS NULL
                       OR c.cited_openalex_id IN (SELECT source_paper_id FROM graph_fetches WHERE source = 'openalex'
                                                  AND source_paper_id IS NOT NULL AND fetched_at >= ?)
                       OR c.r IN (SELECT r FROM hit)
                    ORDER BY citing_arxiv_id, source, ordinal""", [*params, since])
        finally:
            self.con.unregister("_new_keys")
        return CITATIONS.conform(df) if df.height else CITATIONS.empty()

    def unresolved_count(self) -> int:
        """References that name no warehouse paper."""
        return int(self._exec("SELECT count(*) FROM citations WHERE cited_arxiv_id IS NULL")[0][0])

    def set_match_keys(self, citations: pl.DataFrame) -> int:
        """Record ``match_keys`` of these references (``citing_arxiv_id, source, ordinal, match_keys``),
        leaving every other column as it is; returns rows given."""
        if citations.is_empty():
            return 0
        keyed = citations.select("citing_arxiv_id", "source", "ordinal",
                                 pl.col("match_keys").cast(pl.List(pl.Utf8)))
        self.con.register("_keyed", keyed.to_arrow())
        try:
            with self.transaction():
                self._exec("""UPDATE citations SET match_keys = k.match_keys FROM _keyed k
                              WHERE citations.citing_arxiv_id = k.citing_arxiv_id AND citations.source = k.source
                                AND citations.ordinal = k.ordinal""")
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
