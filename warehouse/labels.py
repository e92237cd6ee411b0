"""Reads for weak labels from the graph (exHarmony): the query papers, who wrote which corpus paper,
resolved citations between corpus papers, and the kept survey ratings to compare with.

Reads ``papers``, ``author_links``, ``query_samples``, ``citations`` and ``ratings``; owns no table.
"""

from __future__ import annotations

import polars as pl

from revbench.warehouse.slice import Slice

_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "papers": {"paper_id": pl.Utf8, "title": pl.Utf8, "abstract": pl.Utf8, "year": pl.Int64},
    "queries": {"paper_id": pl.Utf8},
    "authorship": {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8},
    "cites": {"citing_id": pl.Utf8, "cited_id": pl.Utf8},
    "ratings": {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "rating": pl.Float64},
}


class LabelsSlice(Slice):
    """What ``revbench labels`` builds a weak benchmark from (reads only)."""

    stage = "labels"

    def weak_label_frames(self) -> dict[str, pl.DataFrame]:
        """``papers`` (the corpus' texts), ``queries`` (papers of every round's latest revision),
        ``authorship`` (author, paper), ``cites`` (citing, cited: both corpus papers, each pair once,
        from any source) and kept ``ratings``; a table an older warehouse lacks reads as empty."""
        sql = {
            "papers": "SELECT arxiv_id AS paper_id, title, abstract, year FROM papers ORDER BY 1",
            "queries": """SELECT DISTINCT q.arxiv_id AS paper_id FROM query_samples q JOIN papers p USING (arxiv_id)
                          WHERE (q.round, q.revision) IN (SELECT round, max(revision) FROM query_samples GROUP BY round)
                          ORDER BY 1""",
            "authorship": """SELECT DISTINCT l.author_id AS reviewer_id, l.arxiv_id AS paper_id FROM author_links l
                              JOIN papers p USING (arxiv_id) ORDER BY 1, 2""",
            "cites": """SELECT DISTINCT c.citing_arxiv_id AS citing_id, c.cited_arxiv_id AS cited_id FROM citations c
                         JOIN papers a ON a.arxiv_id = c.citing_arxiv_id JOIN papers b ON b.arxiv_id = c.cited_arxiv_id
                         WHERE c.cited_arxiv_id <> c.citing_arxiv_id ORDER BY 1, 2""",
            "ratings": """SELECT reviewer_id, paper_id, rating::DOUBLE AS rating FROM ratings WHERE status = 'kept'
                          ORDER BY 1, 2""",
        }
        needs = {"papers": ("papers",), "queries": ("query_samples", "papers"), "authorship": ("author_links", "papers"),
                 "cites": ("citations", "papers"), "ratings": ("ratings",)}
        out = {}
        for name, query in sql.items():
            present = all(self.has_table(t) for t in needs[name])
            df = self._frame(query) if present else None
            out[name] = df.cast(_SCHEMAS[name]) if df is not None and df.height else pl.DataFrame(schema=_SCHEMAS[name])
        return out

    def topic_frame(self) -> pl.DataFrame:
        """``paper_id, topic``: each corpus paper's finest topic (OpenAlex's topic, else S2's field,
        else its arXiv category), the highest scored where a scheme gives several."""
        if not self.has_table("paper_topics"):
            return pl.DataFrame(schema={"paper_id": pl.Utf8, "topic": pl.Utf8})
        return self._frame(
            """SELECT arxiv_id AS paper_id, arg_max(scheme || ':' || topic,
                      (CASE scheme WHEN 'openalex-topic' THEN 3 WHEN 's2-fos' THEN 2 ELSE 1 END) * 10
                      + coalesce(score, 0)) AS topic
               FROM paper_topics JOIN papers USING (arxiv_id) GROUP BY 1 ORDER BY 1""")

