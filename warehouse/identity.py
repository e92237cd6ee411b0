"""Author identity: disambiguation's blocks and links, and the authors and co-authorship built from them.

Owns ``author_links``, ``author_blocks``, ``llm_decisions``, ``authors`` and ``coauthor_edges``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import polars as pl

from revbench.schemas.tables import AUTHOR_BLOCKS, AUTHOR_LINKS, LLM_DECISIONS
from revbench.warehouse.slice import Slice

_MENTION_COLUMNS = """m.arxiv_id, m.position, m.name, m.email, m.emails, m.institution, m.affiliation, m.affiliations,
                      m.orcid, m.s2_author_id, p.year, p.title,
                      g.person_key AS graph_person, g.orcid AS graph_orcid, g.name AS graph_name"""
_MENTIONS_FROM = """mentions m JOIN papers p USING (arxiv_id) LEFT JOIN paper_authorships g
                    ON g.arxiv_id = m.arxiv_id AND g."position" = m."position" AND g.source = 'openalex'"""
"""Mentions of loaded papers with the OpenAlex authorship at their place (null without a graph)."""
_BASE_KEY = "split_part(l.block_key, '|', 1) || '|' || split_part(l.block_key, '|', 2)"
"""A link's name block before any split of an oversized block (``family|initial``)."""
_CHANGED = """SELECT m.arxiv_id, m.position, m.name FROM mentions m JOIN papers p USING (arxiv_id)
              WHERE p.loaded_at >= ? OR NOT EXISTS (
                  SELECT 1 FROM author_links l WHERE l.arxiv_id = m.arxiv_id AND l.position = m.position)
              OR m.arxiv_id IN (SELECT arxiv_id FROM graph_fetches
                                WHERE source = 'openalex' AND kind = 'affiliations' AND fetched_at >= ?)"""
"""Mentions of papers loaded since a time, mentions never linked, and mentions of papers whose
OpenAlex authorships (identity evidence) were fetched since."""
_GONE = """SELECT l.arxiv_id, l.position, l.block_key, l.author_id FROM author_links l
           WHERE l.arxiv_id IN (SELECT arxiv_id FROM papers WHERE loaded_at >= ?) OR NOT EXISTS (
               SELECT 1 FROM mentions m JOIN papers p USING (arxiv_id)
               WHERE m.arxiv_id = l.arxiv_id AND m.position = l.position)"""
"""Links of papers loaded since a time (their mentions were replaced), and links whose mention is gone."""



AUTHORS_INSERT = """INSERT INTO authors
   SELECT l.author_id, mode(m.name), count(*), count(DISTINCT l.arxiv_id),
          count(DISTINCT CASE WHEN p.year >= ? THEN l.arxiv_id END), min(p.year), max(p.year),
          list_sort(list_distinct(flatten(list(coalesce(m.emails, [m.email])) FILTER (WHERE m.email IS NOT NULL)))),
          list_sort(list_distinct(flatten(list(list_concat([coalesce(m.institution, m.affiliation)],
              list_transform(m.affiliations, lambda x: coalesce(x.institution, x.text))))))),
          list_sort(list_distinct(list(m.s2_author_id) FILTER (WHERE m.s2_author_id IS NOT NULL))),
          list_sort(list_distinct(list(l.method)))
   FROM author_links l JOIN mentions m USING (arxiv_id, position) JOIN papers p USING (arxiv_id)
   {where}
   GROUP BY l.author_id"""
"""One row per author from their links; ``{where}`` narrows it to some authors (a partial pass
rebuilds only those it can have changed, with the same columns as a full one)."""

class DisambiguateSlice(Slice):
    """Mentions to disambiguate, block hashes, links, and the authors rebuild."""

    stage = "disambiguate"

    def mentions_with_years(self) -> pl.DataFrame:
        """Mentions of loaded papers with the paper's year and title, for disambiguation."""
        return self._frame(
            f"SELECT {_MENTION_COLUMNS} FROM {_MENTIONS_FROM} ORDER BY m.arxiv_id, m.position")

    def mention_count(self) -> int:
        """Mentions of loaded papers (what a disambiguation pass sees)."""
        return int(self._exec("SELECT count(*) FROM mentions m JOIN papers p USING (arxiv_id)")[0][0])

    def newest_mention_year(self) -> int | None:
        """The newest year of a paper with mentions (where recent-paper counts are measured from)."""
        return self._exec("SELECT max(p.year) FROM mentions m JOIN papers p USING (arxiv_id)")[0][0]

    def last_disambiguation(self, current_run_id: str | None = None) -> dict[str, Any] | None:
        """The newest disambiguate run but ``current_run_id``: ``run_id, status, started_at, parameters``."""
        rows = self._exec("SELECT run_id, status, started_at, parameters FROM runs WHERE flow = 'disambiguate' "
                          "AND run_id <> ? ORDER BY started_at DESC LIMIT 1", [current_run_id or ""])
        if not rows:
            return None
        run_id, status, started, params = rows[0]
        return {"run_id": run_id, "status": status, "started_at": started, "parameters": json.loads(params or "{}")}

    def changed_mentions(self, since: datetime) -> pl.DataFrame:
        """``arxiv_id, position, name`` of mentions a disambiguation that started at ``since``
        did not see as they are: of papers loaded since (new or replaced) or given OpenAlex
        authorships since, or never linked."""
        return self._frame(_CHANGED + " ORDER BY m.arxiv_id, m.position", [since, since])

    def gone_links(self, since: datetime) -> pl.DataFrame:
        """``arxiv_id, position, block_key, author_id`` of links whose mention was replaced or
        removed since ``since``."""
        return self._frame(_GONE, [since])

    def change_counts(self, since: datetime) -> tuple[int, int]:
        """(mentions new or changed, linked mentions removed) since a disambiguation started at ``since``."""
        changed = self._exec(f"SELECT count(*) FROM ({_CHANGED})", [since, since])[0][0]
        removed = self._exec(
            """SELECT count(*) FROM author_links l WHERE NOT EXISTS (
                   SELECT 1 FROM mentions m JOIN papers p USING (arxiv_id)
                   WHERE m.arxiv_id = l.arxiv_id AND m.position = l.position)""")[0][0]
        return int(changed), int(removed)

    def link_base_keys(self, since: datetime) -> set[str]:
        """The name blocks (before splits) that links replaced or removed since ``since`` were in."""
        return {r[0] for r in self._exec(f"SELECT DISTINCT {_BASE_KEY} FROM ({_GONE}) l", [since])}

    def mentions_of_blocks(self, base_keys: Sequence[str], extra: pl.DataFrame) -> pl.DataFrame:
        """Every mention (as :meth:`mentions_with_years`) of the papers that have a mention linked
        into one of the name blocks ``base_keys`` (before splits) or one of the mentions ``extra``
        (``arxiv_id, position``): a mention's co-authors are part of its block's inputs."""
        self.con.register("_bases", pl.DataFrame({"k": list(base_keys)}, schema={"k": pl.Utf8}).to_arrow())
        self.con.register("_extra", extra.select("arxiv_id", "position").to_arrow())
        try:
            return self._frame(
                f"""SELECT {_MENTION_COLUMNS} FROM {_MENTIONS_FROM}
                    WHERE m.arxiv_id IN (
                        SELECT l.arxiv_id FROM author_links l WHERE {_BASE_KEY} IN (SELECT k FROM _bases)
                        UNION SELECT arxiv_id FROM _extra)
                    ORDER BY m.arxiv_id, m.position""")
        finally:
            self.con.unregister("_bases")
            self.con.unregister("_extra")

    def block_hashes(self, base_keys: Sequence[str] | None = None) -> dict[str, str]:
        """Each decided block's input hash (only the blocks of the name blocks ``base_keys``, when given)."""
        if base_keys is None:
            return dict(self._exec("SELECT block_key, input_hash FROM author_blocks"))
        self.con.register("_bases", pl.DataFrame({"k": list(base_keys)}, schema={"k": pl.Utf8}).to_arrow())
        try:
            return dict(self._exec(f"SELECT l.block_key, l.input_hash FROM author_blocks l WHERE {_BASE_KEY} IN "
                                   "(SELECT k FROM _bases)"))
        finally:
            self.con.unregister("_bases")

    def block_sizes(self) -> list[tuple[str, int]]:
        """``(block_key, mentions)`` of every decided block."""
        return [(k, int(n)) for k, n in self._exec("SELECT block_key, n_mentions FROM author_blocks ORDER BY block_key")]

    def authors_of_links(self, blocks: Sequence[str], mentions: pl.DataFrame) -> set[str]:
        """Author ids linked now to a mention of ``blocks`` or to one of ``mentions`` (``arxiv_id, position``)."""
        self.con.register("_blocks", pl.DataFrame({"k": list(blocks)}, schema={"k": pl.Utf8}).to_arrow())
        self.con.register("_m", mentions.select("arxiv_id", "position").to_arrow())
        try:
            return {r[0] for r in self._exec(
                """SELECT DISTINCT author_id FROM author_links WHERE block_key IN (SELECT k FROM _blocks)
                   OR (arxiv_id, position) IN (SELECT arxiv_id, position FROM _m)""")}
        finally:
            self.con.unregister("_blocks")
            self.con.unregister("_m")

    def save_blocks(self, links: pl.DataFrame, blocks: pl.DataFrame, decisions: pl.DataFrame, drop_blocks: list[str]) -> None:
        """Replace the links of re-decided and vanished blocks, atomically."""
        changed = blocks["block_key"].to_list() if blocks.height else []
        with self.transaction():
            self.delete_where_in(AUTHOR_LINKS, "block_key", changed + drop_blocks)
            self.delete_where_in(AUTHOR_BLOCKS, "block_key", drop_blocks)
            # Keyed by (arxiv_id, position): a mention that moved to another block is replaced here.
            self.upsert(AUTHOR_LINKS, links)
            self.upsert(AUTHOR_BLOCKS, blocks)
            self.upsert(LLM_DECISIONS, decisions)

    def rebuild_authors(self, recent_since_year: int, only: Sequence[str] | None = None) -> None:
        """Recompute authors and co-authorship edges from the links (set-based, in one go); with
        ``only``, just those authors and every edge that touches one of them (an edge between two
        others has the same papers as before)."""
        if only is not None:
            self._rebuild_some_authors(recent_since_year, only)
            return
        with self.transaction():
            self._exec("DELETE FROM authors")
            self._exec("DELETE FROM coauthor_edges")
            self._exec(AUTHORS_INSERT.format(where=""), [recent_since_year])
            self._exec(
                """INSERT INTO coauthor_edges
                   SELECT a.author_id, b.author_id, count(DISTINCT a.arxiv_id), min(p.year), max(p.year)
                   FROM author_links a JOIN author_links b ON a.arxiv_id = b.arxiv_id AND a.author_id < b.author_id
                   JOIN papers p ON p.arxiv_id = a.arxiv_id
                   GROUP BY a.author_id, b.author_id"""
            )

    def _rebuild_some_authors(self, recent_since_year: int, only: Sequence[str]) -> None:
        self.con.register("_only", pl.DataFrame({"a": sorted(set(only))}, schema={"a": pl.Utf8}).to_arrow())
        try:
            with self.transaction():
                self._exec("DELETE FROM authors WHERE author_id IN (SELECT a FROM _only)")
                self._exec("DELETE FROM coauthor_edges WHERE author_a IN (SELECT a FROM _only) "
                           "OR author_b IN (SELECT a FROM _only)")
                self._exec(AUTHORS_INSERT.format(where="WHERE l.author_id IN (SELECT a FROM _only)"), [recent_since_year])
                self._exec(
                    """INSERT INTO coauthor_edges
                       WITH touched AS (SELECT DISTINCT arxiv_id FROM author_links WHERE author_id IN (SELECT a FROM _only)),
                            l AS (SELECT arxiv_id, author_id FROM author_links WHERE arxiv_id IN (SELECT arxiv_id FROM touched))
                       SELECT a.author_id, b.author_id, count(DISTINCT a.arxiv_id), min(p.year), max(p.year)
                       FROM l a JOIN l b ON a.arxiv_id = b.arxiv_id AND a.author_id < b.author_id
                       JOIN papers p ON p.arxiv_id = a.arxiv_id
                       WHERE a.author_id IN (SELECT a FROM _only) OR b.author_id IN (SELECT a FROM _only)
                       GROUP BY a.author_id, b.author_id"""
                )
        finally:
            self.con.unregister("_only")

    def links_by_method(self) -> dict[str, int]:
        """Mentions linked by each disambiguation method."""
        return dict(self._exec("SELECT method, count(*) AS n FROM author_links GROUP BY method ORDER BY n DESC"))
