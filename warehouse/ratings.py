"""Ratings: survey events pulled by store epoch, the ratings and tuples made from them, and the
benchmark they form.

Owns ``survey_events``, ``survey_epochs``, ``ratings``, ``rating_flags``, ``flag_decisions`` and
``rating_tuples``; reads the graph's tables, ``author_links``, ``mentions``, ``coauthor_edges``, ``authors``
and ``s2_author_papers`` for the benchmark's graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import polars as pl

from revbench.keys import person_links
from revbench.schemas.tables import TABLES
from revbench.warehouse.slice import Slice

class RatingsSlice(Slice):
    """Epoch marks, what turning events into ratings needs, and the rated benchmark."""

    stage = "ratings"

    def survey_epoch_marks(self) -> dict[str, tuple[int, str | None]]:
        """Each survey store epoch pulled from -> ``(high_water, digest of that event)``: the
        marks recorded by pulls, else (events pulled before epochs had marks) the highest id in
        ``survey_events``, whichever is higher."""
        rows = self._exec(
            """SELECT epoch, max(high_water), arg_max(digest, high_water) FROM (
                   SELECT epoch, high_water, high_water_digest AS digest FROM survey_epochs
                   UNION ALL SELECT epoch, event_id, digest FROM survey_events) GROUP BY epoch""")
        return {e: (int(h), d) for e, h, d in rows}

    def ratings_context(self) -> dict[str, pl.DataFrame]:
        """What turning survey events into ratings needs: ``invitations`` (``invitation_id,
        reviewer_id, round, paper_ids``), ``categories`` (``paper_id, category``) and
        ``similarity`` (``reviewer_id, paper_id, similarity``: the candidate's strongest pool
        evidence for the paper, over every revision of its round)."""
        return {
            "invitations": self._frame(
                """SELECT invitation_id, author_id AS reviewer_id, round, paper_ids FROM survey_invitations
                   ORDER BY invitation_id"""),
            "categories": self._frame("SELECT arxiv_id AS paper_id, primary_category AS category FROM papers"),
            "similarity": self._frame(
                """SELECT author_id AS reviewer_id, query_id AS paper_id, max(similarity) AS similarity
                   FROM pool_evidence GROUP BY ALL ORDER BY ALL"""),
        }

    def ratings_since(self, when: datetime | None) -> int:
        """Ratings answered after ``when`` (all of them when ``None``)."""
        if when is None:
            return int(self._exec("SELECT count(*) FROM ratings")[0][0])
        return int(self._exec("SELECT count(*) FROM ratings WHERE rated_at > ?", [when])[0][0])

    def paper_titles(self, arxiv_ids: Sequence[str]) -> dict[str, str]:
        """arXiv id -> title of these papers (those the warehouse holds)."""
        if not arxiv_ids:
            return {}
        self.con.register("_titled", pl.DataFrame({"k": list(arxiv_ids)}, schema={"k": pl.Utf8}).to_arrow())
        try:
            rows = self._exec("SELECT arxiv_id, title FROM papers WHERE arxiv_id IN (SELECT k FROM _titled)")
        finally:
            self.con.unregister("_titled")
        return {a: " ".join(str(t).split()) for a, t in rows}

    def rated_papers(self) -> list[str]:
        """Every paper with a rating (kept or dropped), sorted."""
        return [r[0] for r in self._exec("SELECT DISTINCT paper_id FROM ratings ORDER BY paper_id")]

    def benchmark_frames(self, profile_max_papers: int | None) -> dict[str, pl.DataFrame]:
        """The warehouse benchmark: kept ``ratings`` (``reviewer_id, paper_id, rating``), their
        ``papers`` (``paper_id, title, abstract, year``), each rater's ``profiles`` (their most
        recent corpus papers, at most ``profile_max_papers`` or all with None, rated papers left
        out) and the ``tuples``."""
        ratings = self._frame(
            """SELECT reviewer_id, paper_id, rating::DOUBLE AS rating FROM ratings WHERE status = 'kept'
               ORDER BY reviewer_id, paper_id""")
        papers = self._frame(
            """SELECT arxiv_id AS paper_id, title, abstract, year FROM papers
               WHERE arxiv_id IN (SELECT paper_id FROM ratings WHERE status = 'kept') ORDER BY arxiv_id""")
        profiles = self._frame(
            """WITH raters AS (SELECT DISTINCT reviewer_id FROM ratings WHERE status = 'kept'),
                    authored AS (
                        SELECT DISTINCT l.author_id AS reviewer_id, p.arxiv_id AS paper_id, p.title, p.abstract, p.year,
                               p.updated
                        FROM author_links l JOIN raters r ON r.reviewer_id = l.author_id
                        JOIN papers p ON p.arxiv_id = l.arxiv_id
                        WHERE p.arxiv_id NOT IN (SELECT paper_id FROM ratings)),
                    ranked AS (SELECT *, row_number() OVER (PARTITION BY reviewer_id ORDER BY updated DESC, paper_id) AS k
                               FROM authored)
               SELECT reviewer_id, paper_id, title, abstract, year FROM ranked WHERE k <= coalesce(?, k)
               ORDER BY reviewer_id, paper_id""", [profile_max_papers])
        tuples = self.read(TABLES["rating_tuples"])
        return {"ratings": ratings, "papers": papers, "profiles": profiles, "tuples": tuples}

    def benchmark_pool(self) -> pl.DataFrame:
        """The warehouse benchmark's reviewer pool as an assignment sees it (``reviewer_id,
        paper_id``): for every rated paper, each kept rater the pools stage found as a candidate
        for it (the latest revision of every round), less the pairs a conflict ruled out (an
        author of the paper, a co-author, an institution or an affiliation). Bounded by the pools'
        sizes, not raters times papers."""
        return self._frame(
            """WITH raters AS (SELECT DISTINCT reviewer_id FROM ratings WHERE status = 'kept'),
                    rated AS (SELECT DISTINCT paper_id FROM ratings WHERE status = 'kept'),
                    latest AS (SELECT round, max(revision) AS revision FROM pool_evidence GROUP BY round),
                    found AS (SELECT DISTINCT e.author_id AS reviewer_id, e.query_id AS paper_id
                              FROM pool_evidence e JOIN latest USING (round, revision))
               SELECT f.reviewer_id, f.paper_id FROM found f
               JOIN raters USING (reviewer_id) JOIN rated USING (paper_id)
               WHERE NOT EXISTS (SELECT 1 FROM pool_exclusions x
                                 WHERE x.author_id = f.reviewer_id AND x.query_id = f.paper_id
                                   AND x.reason IN ('query_author', 'coauthor', 'same_institution', 'same_affiliation'))
               ORDER BY f.reviewer_id, f.paper_id""")

    def _reviewer_stints(self) -> pl.DataFrame:
        """Each benchmark reviewer's institutions, widened over sources, tied by the pools' own rule."""
        affiliations = self._frame(
            """SELECT person_key, orcid, arxiv_id, "position", institution_key, first_year, last_year
               FROM author_affiliations""")
        mentions = self._frame(
            """SELECT l.author_id, m.arxiv_id, m."position", m.orcid, m.s2_author_id
               FROM author_links l JOIN mentions m USING (arxiv_id, "position")
               WHERE l.author_id IN (SELECT k FROM _bench_people)""")
        links = person_links(mentions, affiliations)
        return (links.join(affiliations, on="person_key")
                .group_by(pl.col("author_id").alias("reviewer_id"), "institution_key")
                .agg(pl.col("first_year").min(), pl.col("last_year").max())
                .sort("reviewer_id", "institution_key"))

    def benchmark_graph(self, paper_ids: Sequence[str], reviewer_ids: Sequence[str],
                        history: bool = False) -> dict[str, pl.DataFrame]:
        """The graph around a benchmark, as ``revbench.evaluation.model.BenchmarkGraph`` holds it:
        ``citations`` (``citing_id, cited_id, is_influential, source``: resolved references among
        ``paper_ids``, one row per pair from any source, influential when any source says so, the
        sources comma-joined), ``topics`` (``paper_id, scheme, topic, score``, the highest score
        any origin gave), ``reviewer_institutions`` (``reviewer_id, institution_key, first_year,
        last_year``, each reviewer's stints widened over sources) and ``coauthors`` (``reviewer_id,
        other_id`` among ``reviewer_ids``, both directions).

        With ``history``, also each reviewer's ``history`` (:meth:`_reviewer_history`) and the
        ``references`` (:meth:`_bench_references`); ``citations`` and ``topics`` then cover the
        history papers too (``paper_ids`` and every history paper)."""
        self.con.register("_bench_people", pl.DataFrame({"k": list(reviewer_ids)}, schema={"k": pl.Utf8}).to_arrow())
        try:
            papers = set(paper_ids)
            out: dict[str, pl.DataFrame] = {}
            if history:
                out["history"] = self._reviewer_history()
                papers |= set(out["history"]["paper_id"])
            self.con.register("_bench_papers", pl.DataFrame({"k": sorted(papers)}, schema={"k": pl.Utf8}).to_arrow())
            try:
                if history:
                    out["references"] = self._bench_references()
                return {
                    "citations": self._frame(
                        """SELECT citing_arxiv_id AS citing_id, cited_arxiv_id AS cited_id,
                                  bool_or(is_influential) AS is_influential,
                                  string_agg(DISTINCT source, ',' ORDER BY source) AS source
                           FROM citations WHERE citing_arxiv_id IN (SELECT k FROM _bench_papers)
                                            AND cited_arxiv_id IN (SELECT k FROM _bench_papers)
                                            AND cited_arxiv_id <> citing_arxiv_id
                           GROUP BY 1, 2 ORDER BY 1, 2"""),
                    "topics": self._frame(
                        """SELECT arxiv_id AS paper_id, scheme, topic, max(score) AS score FROM paper_topics
                           WHERE arxiv_id IN (SELECT k FROM _bench_papers) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"""),
                    "reviewer_institutions": self._reviewer_stints(),
                    "coauthors": self._frame(
                        """WITH e AS (SELECT author_a, author_b FROM coauthor_edges
                                      WHERE author_a IN (SELECT k FROM _bench_people)
                                        AND author_b IN (SELECT k FROM _bench_people))
                           SELECT author_a AS reviewer_id, author_b AS other_id FROM e
                           UNION SELECT author_b, author_a FROM e ORDER BY 1, 2"""),
                    **out,
                }
            finally:
                self.con.unregister("_bench_papers")
        finally:
            self.con.unregister("_bench_people")

    def _reviewer_history(self) -> pl.DataFrame:
        """``reviewer_id, paper_id, year`` of each reviewer in ``_bench_people``: every corpus paper
        linked to them (``author_links``) and every paper of their Semantic Scholar histories
        (``s2_author_papers`` of the S2 author ids their mentions or their author record carry) that
        is a corpus paper by its arXiv id. Rated papers are left out, as the profiles leave them out:
        a paper is a submission or a reviewer's work, never both."""
        return self._frame(
            r"""WITH s2_ids AS (
                    SELECT DISTINCT l.author_id AS reviewer_id, m.s2_author_id FROM author_links l
                    JOIN mentions m USING (arxiv_id, "position")
                    WHERE l.author_id IN (SELECT k FROM _bench_people) AND m.s2_author_id IS NOT NULL
                    UNION SELECT author_id, unnest(s2_author_ids) FROM authors
                    WHERE author_id IN (SELECT k FROM _bench_people)),
                mine AS (
                    SELECT author_id AS reviewer_id, arxiv_id AS paper_id FROM author_links
                    WHERE author_id IN (SELECT k FROM _bench_people)
                    UNION SELECT i.reviewer_id, regexp_replace(h.arxiv_id, 'v[0-9]+$', '') FROM s2_ids i
                    JOIN s2_author_papers h USING (s2_author_id) WHERE h.paper_key <> '' AND h.arxiv_id IS NOT NULL)
               SELECT DISTINCT m.reviewer_id, p.arxiv_id AS paper_id, p.year FROM mine m JOIN papers p ON p.arxiv_id = m.paper_id
               WHERE p.arxiv_id NOT IN (SELECT paper_id FROM ratings) ORDER BY 1, 2""")

    def _bench_references(self) -> pl.DataFrame:
        """``citing_id, cited_key``: the reference lists of ``_bench_papers`` and every reference to
        one of them, one row per citing paper and cited work over all sources. The key is the
        warehouse paper a reference resolved to, else its first match key (``doi:``, ``arxiv:``,
        ``title:``, as the resolution normalised them), else the source's raw ids (``doi:``,
        ``arxiv:``, ``s2:``, ``openalex:``) for rows the resolution has not keyed yet."""
        return self._frame(
            r"""SELECT DISTINCT citing_id, cited_key FROM (
                    SELECT citing_arxiv_id AS citing_id,
                           coalesce(cited_arxiv_id, match_keys[1], 'doi:' || lower(cited_doi),
                                    'arxiv:' || regexp_replace(cited_arxiv, 'v[0-9]+$', ''),
                                    's2:' || cited_s2_id, 'openalex:' || cited_openalex_id) AS cited_key
                    FROM citations
                    WHERE (citing_arxiv_id IN (SELECT k FROM _bench_papers) OR cited_arxiv_id IN (SELECT k FROM _bench_papers))
                      AND cited_arxiv_id IS DISTINCT FROM citing_arxiv_id)
                WHERE cited_key IS NOT NULL ORDER BY 1, 2""")
