"""Author identity: disambiguation's blocks and links, and the authors and co-authorship built from them.

Owns ``author_links``, ``author_blocks``, ``llm_decisions``, ``authors`` and ``coauthor_edges``.
"""

from __future__ import annotations

import polars as pl

from revbench.schemas.tables import AUTHOR_BLOCKS, AUTHOR_LINKS, LLM_DECISIONS
from revbench.warehouse.core import WarehouseBase


class IdentityQueries(WarehouseBase):
    """Mentions to disambiguate, block hashes, links, and the authors rebuild."""

    def mentions_with_years(self) -> pl.DataFrame:
        """Mentions of loaded papers with the paper's year and title, for disambiguation."""
        return self._frame(
            """SELECT m.arxiv_id, m.position, m.name, m.email, m.institution, m.affiliation, m.affiliations, m.orcid,
                      m.s2_author_id, p.year, p.title
               FROM mentions m JOIN papers p USING (arxiv_id) ORDER BY m.arxiv_id, m.position"""
        )

    def block_hashes(self) -> dict[str, str]:
        return dict(self._exec("SELECT block_key, input_hash FROM author_blocks"))

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

    def rebuild_authors(self, recent_since_year: int) -> None:
        """Recompute authors and co-authorship edges from the links (set-based, in one go)."""
        with self.transaction():
            self._exec("DELETE FROM authors")
            self._exec("DELETE FROM coauthor_edges")
            self._exec(
                """INSERT INTO authors
                   SELECT l.author_id, mode(m.name), count(*), count(DISTINCT l.arxiv_id),
                          count(DISTINCT CASE WHEN p.year >= ? THEN l.arxiv_id END), min(p.year), max(p.year),
                          list_sort(list_distinct(list(m.email) FILTER (WHERE m.email IS NOT NULL))),
                          list_sort(list_distinct(flatten(list(list_concat([coalesce(m.institution, m.affiliation)],
                              list_transform(m.affiliations, lambda x: coalesce(x.institution, x.text))))))),
                          list_sort(list_distinct(list(m.s2_author_id) FILTER (WHERE m.s2_author_id IS NOT NULL))),
                          list_sort(list_distinct(list(l.method)))
                   FROM author_links l JOIN mentions m USING (arxiv_id, position) JOIN papers p USING (arxiv_id)
                   GROUP BY l.author_id""",
                [recent_since_year],
            )
            self._exec(
                """INSERT INTO coauthor_edges
                   SELECT a.author_id, b.author_id, count(DISTINCT a.arxiv_id), min(p.year), max(p.year)
                   FROM author_links a JOIN author_links b ON a.arxiv_id = b.arxiv_id AND a.author_id < b.author_id
                   JOIN papers p ON p.arxiv_id = a.arxiv_id
                   GROUP BY a.author_id, b.author_id"""
            )

    def links_by_method(self) -> dict[str, int]:
        """Mentions linked by each disambiguation method."""
        return dict(self._exec("SELECT method, count(*) AS n FROM author_links GROUP BY method ORDER BY n DESC"))
