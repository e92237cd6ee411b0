"""Candidate pools: rounds of query papers, evidence, exclusions, assignments and invitations,
each round kept in revisions.

Owns ``pool_rounds``, ``query_samples``, ``pool_evidence``, ``pool_exclusions``, ``assignments``,
``invitations`` and ``s2_author_papers``.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from revbench.schemas.graph import AUTHOR_AFFILIATIONS, INSTITUTIONS
from revbench.schemas.model import Table
from revbench.schemas.tables import POOL_ROUNDS, TABLES
from revbench.warehouse.core import _q, utcnow
from revbench.warehouse.slice import Slice


_COI_INSTITUTION = ("institution_key", "name", "aliases", "lineage", "related", "openalex_id")
"""What the institution COI reads of each institution (tasks.coi.institution_identities)."""


class PoolsSlice(Slice):
    """What pools are built from, and rounds read and written by revision."""

    stage = "pools"

    def pool_inputs(self) -> dict[str, pl.DataFrame]:
        """What candidate pools are built from: papers, authorship links, co-authorship, authors."""
        return {
            "papers": self._frame("SELECT arxiv_id, title, abstract, primary_category, year FROM papers ORDER BY arxiv_id"),
            "links": self._frame("SELECT arxiv_id, author_id FROM author_links ORDER BY arxiv_id, position"),
            "edges": self._frame("SELECT author_a, author_b FROM coauthor_edges"),
            "authors": self._frame("SELECT author_id, name, emails, affiliations, s2_author_ids FROM authors ORDER BY author_id"),
            "author_years": self._frame(
                "SELECT l.author_id, l.arxiv_id, p.year FROM author_links l JOIN papers p USING (arxiv_id)"
            ),
        }

    def coi_inputs(self) -> dict[str, pl.DataFrame]:
        """What the institution COI reads, once per round: the graph's ``affiliations`` with each
        institution's stored ``name`` (from ``author_affiliations`` and ``institutions``), the
        ``mentions`` that tie its people to author ids (``author_id, arxiv_id, position, orcid,
        s2_author_id``), and the ``institutions`` (key, name, aliases, lineage, related, OpenAlex id)
        that tell which keys are one institution; all empty while the graph holds no affiliation."""
        affiliations = self._frame(
            """SELECT a.person_key, a.orcid, a.institution_key, a.first_year, a.last_year, a.source, a.arxiv_id,
                      a.position, i.name FROM author_affiliations a LEFT JOIN institutions i USING (institution_key)
               ORDER BY a.person_key, a.institution_key, a.source""")
        if not affiliations.height:
            schema = {"author_id": pl.Utf8, "arxiv_id": pl.Utf8, "position": pl.Int64, "orcid": pl.Utf8, "s2_author_id": pl.Utf8}
            return {"affiliations": AUTHOR_AFFILIATIONS.empty().with_columns(pl.lit(None, pl.Utf8).alias("name")),
                    "mentions": pl.DataFrame(schema=schema), "institutions": INSTITUTIONS.empty().select(_COI_INSTITUTION)}
        mentions = self._frame(
            """SELECT l.author_id, m.arxiv_id, m.position, m.orcid, m.s2_author_id FROM author_links l
               JOIN mentions m USING (arxiv_id, position) ORDER BY m.arxiv_id, m.position""")
        institutions = self._frame(f"SELECT {', '.join(_q(c) for c in _COI_INSTITUTION)} FROM institutions "
                                   "ORDER BY institution_key")
        return {"affiliations": affiliations, "mentions": mentions,
                "institutions": INSTITUTIONS.conform(institutions).select(_COI_INSTITUTION) if institutions.height
                else INSTITUTIONS.empty().select(_COI_INSTITUTION)}

    def earlier_queries(self, round_: int) -> set[str]:
        """Query papers of the current versions of rounds before ``round_``."""
        return {r[0] for r in self._exec(
            """SELECT DISTINCT q.arxiv_id FROM query_samples q
               JOIN pool_rounds r ON r.round = q.round AND r.revision = q.revision AND r.status = 'current'
               WHERE q.round < ?""", [round_])}

    def fetched_s2_authors(self) -> set[str]:
        return {r[0] for r in self._exec("SELECT DISTINCT s2_author_id FROM s2_author_papers")}

    def s2_papers_of(self, s2_ids: list[str]) -> pl.DataFrame:
        """Fetched S2 papers of these S2 author ids: ``s2_author_id, paper_key, year, arxiv_id``."""
        if not s2_ids:
            return pl.DataFrame(schema={"s2_author_id": pl.Utf8, "paper_key": pl.Utf8, "year": pl.Int64, "arxiv_id": pl.Utf8})
        self.con.register("_ids", pl.DataFrame({"s2_author_id": s2_ids}, schema={"s2_author_id": pl.Utf8}).to_arrow())
        df = self._frame(
            "SELECT s2_author_id, paper_key, year, arxiv_id FROM s2_author_papers JOIN _ids USING (s2_author_id) WHERE paper_key <> ''"
        )
        self.con.unregister("_ids")
        return df

    def round_state(self, round_: int) -> dict[str, Any] | None:
        """The current version of a round: ``revision, params_hash, parameters, invitations``
        (a round written before versions existed counts as revision 1 with unknown parameters)."""
        rows = self._exec(
            "SELECT revision, params_hash, parameters, invitations FROM pool_rounds WHERE round = ? AND status = 'current'",
            [round_])
        if rows:
            rev, h, params, n = rows[0]
            return {"revision": rev, "params_hash": h, "parameters": json.loads(params), "invitations": n}
        n = self._exec("SELECT count(*) FROM invitations WHERE round = ?", [round_])[0][0]
        if n:
            return {"revision": 1, "params_hash": None, "parameters": {}, "invitations": int(n)}
        return None

    def read_round(self, table: Table, round_: int) -> pl.DataFrame:
        """A pool table's rows of the current version of a round."""
        state = self.round_state(round_)
        if state is None:
            return table.empty()
        return self.read(table).filter((pl.col("round") == round_) & (pl.col("revision") == state["revision"]))

    def save_round(self, round_: int, frames: dict[str, pl.DataFrame], params_hash: str, parameters: dict[str, Any],
                   run_id: str, replace: bool) -> int:
        """Write one round, atomically, and return its revision. Without ``replace`` the current
        version is rewritten in place (an identical re-run); with it, the current version is
        marked superseded and kept, and the new one gets the next revision."""
        with self.transaction():
            state = self.round_state(round_)
            last = self._exec("SELECT coalesce(max(revision), 0) FROM pool_rounds WHERE round = ?", [round_])[0][0]
            if state is not None and replace:
                self._exec("UPDATE pool_rounds SET status = 'superseded', superseded_at = ? WHERE round = ? AND status = 'current'",
                           [utcnow(), round_])
                if not last:  # a round from before versions: record what it was
                    self.upsert(POOL_ROUNDS, pl.DataFrame([dict(round=round_, revision=1, status="superseded", params_hash="unknown",
                                                                parameters="{}", invitations=state["invitations"],
                                                                created_at=utcnow(), superseded_at=utcnow())]))
                revision = max(last, state["revision"]) + 1
            else:
                revision = state["revision"] if state is not None else last + 1
                for name in frames:
                    self._exec(f"DELETE FROM {_q(name)} WHERE round = ? AND revision = ?", [round_, revision])
            # The revision's rows were just deleted (or it is new): plain inserts, and a key the
            # frames repeat fails the save instead of being merged away.
            for name, df in frames.items():
                self.insert(TABLES[name], df.with_columns(pl.lit(round_, dtype=pl.Int64).alias("round"),
                                                          pl.lit(revision, dtype=pl.Int64).alias("revision")))
            self.upsert(POOL_ROUNDS, pl.DataFrame([dict(
                round=round_, revision=revision, status="current", params_hash=params_hash,
                parameters=json.dumps(parameters, sort_keys=True, default=str), invitations=frames["invitations"].height,
                run_id=run_id, created_at=utcnow(), superseded_at=None)]))
        return revision

    def round_yield(self) -> tuple[int, int]:
        """(query papers of every round's current version, paper-centric anchors with tuples)."""
        queries = self._exec(
            "SELECT count(DISTINCT q.arxiv_id) FROM query_samples q JOIN pool_rounds r "
            "ON q.round = r.round AND q.revision = r.revision AND r.status = 'current'")[0][0]
        anchors = self._exec("SELECT count(DISTINCT anchor_id) FROM rating_tuples WHERE kind = 'paper_centric'")[0][0]
        return int(queries), int(anchors)

    def latest_round(self) -> dict[str, Any] | None:
        """The newest round's current version: ``round, revision, invitations, created_at``."""
        rows = self._exec("SELECT round, revision, invitations, created_at FROM pool_rounds WHERE status = 'current' "
                          "ORDER BY round DESC LIMIT 1")
        return dict(zip(("round", "revision", "invitations", "created_at"), rows[0], strict=True)) if rows else None
