"""Embeddings and training: the weak supervision a model is trained on, rated papers held out.

Owns no table; reads ``papers``, ``author_links`` and ``ratings``.
"""

from __future__ import annotations

import polars as pl

from revbench.warehouse.slice import Slice


class TrainingSlice(Slice):
    """Training inputs (the held-out rated papers come from the ratings)."""

    stage = "training"

    def training_inputs(self, profile_years: int, profile_max_papers: int) -> dict[str, pl.DataFrame]:
        """What weak supervision is built from, rated papers held out everywhere (they are the
        benchmark a trained model is judged on): ``papers`` (``paper_id, title, abstract, year``),
        each author's ``recent`` papers for their profile (``reviewer_id, paper_id``: those of
        the last ``profile_years`` years before the newest paper, at most
        ``profile_max_papers``, newest first) and every ``authored`` pair."""
        held_out = "SELECT paper_id FROM ratings"
        papers = self._frame(
            f"""SELECT arxiv_id AS paper_id, title, abstract, year FROM papers
                WHERE arxiv_id NOT IN ({held_out}) ORDER BY arxiv_id""")
        recent = self._frame(
            f"""WITH newest AS (SELECT max(year) AS y FROM papers),
                     authored AS (
                         SELECT DISTINCT l.author_id AS reviewer_id, p.arxiv_id AS paper_id, p.updated
                         FROM author_links l JOIN papers p USING (arxiv_id), newest
                         WHERE p.year > newest.y - ? AND p.arxiv_id NOT IN ({held_out})),
                     ranked AS (SELECT *, row_number() OVER (PARTITION BY reviewer_id ORDER BY updated DESC, paper_id) AS k
                                FROM authored)
                SELECT reviewer_id, paper_id FROM ranked WHERE k <= ? ORDER BY reviewer_id, paper_id""",
            [profile_years, profile_max_papers])
        authored = self._frame(
            "SELECT DISTINCT author_id AS reviewer_id, arxiv_id AS paper_id FROM author_links ORDER BY reviewer_id, paper_id")
        return {"papers": papers, "recent": recent, "authored": authored, "held_out": self.wh.ratings.rated_papers()}
