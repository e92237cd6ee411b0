"""Releases: what one is built from, the curator's decision, and the results on published ones.

Owns ``releases``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import polars as pl

from revbench.warehouse.core import utcnow
from revbench.warehouse.slice import Slice


class ReleaseSlice(Slice):
    """Release inputs (the rated benchmark, read from the ratings, with people and affiliations to
    audit) and states; the results on published releases are the evaluation's (``wh.evaluate``)."""

    stage = "release"

    def release_inputs(self) -> dict[str, Any]:
        """What a release is built from: the benchmark frames (papers with their category, every
        rater's corpus papers as profile), the people who rated (``person_id, name, email, orcid``:
        every spelling) and their affiliations, which the privacy audit looks for, and the latest completed run of each flow (the runs the
        release came from)."""
        f = self.wh.ratings.benchmark_frames(profile_max_papers=None)
        f["papers"] = f["papers"].join(self._frame("SELECT arxiv_id AS paper_id, primary_category AS category FROM papers"),
                                       on="paper_id", how="left")
        # Every spelling of every person who rated (the people a release could re-identify), with
        # their addresses and ORCIDs; the names of other authors are public (the papers carry them).
        people = self._frame(
            """WITH raters AS (SELECT DISTINCT reviewer_id AS person_id FROM ratings),
                    m AS (SELECT l.author_id AS person_id, m.name, m.pdf_name, m.email, m.orcid
                          FROM mentions m JOIN author_links l USING (arxiv_id, position)
                          WHERE l.author_id IN (SELECT person_id FROM raters))
               SELECT DISTINCT person_id, name, email, orcid FROM (
                   SELECT author_id AS person_id, name, NULL AS email, NULL AS orcid FROM authors
                   UNION ALL SELECT author_id, name, unnest(emails), NULL FROM authors
                   UNION ALL SELECT person_id, name, email, orcid FROM m
                   UNION ALL SELECT person_id, pdf_name, email, orcid FROM m
                   UNION ALL SELECT author_id, name, email, NULL FROM survey_invitations
                   UNION ALL SELECT author_id, name, email, NULL FROM invitations)
               WHERE person_id IN (SELECT person_id FROM raters) AND (name IS NOT NULL OR email IS NOT NULL OR orcid IS NOT NULL)
               ORDER BY ALL""")
        # Their affiliations: reported beside the audit, never a reason to stop a release (an
        # institution named in a public abstract identifies no respondent).
        affiliations = {r[0] for r in self._exec(
            """WITH raters AS (SELECT DISTINCT reviewer_id AS person_id FROM ratings),
                    m AS (SELECT m.* FROM mentions m JOIN author_links l USING (arxiv_id, position)
                          WHERE l.author_id IN (SELECT person_id FROM raters))
               SELECT institution FROM m UNION SELECT department FROM m UNION SELECT affiliation FROM m
               UNION SELECT unnest(affiliations) FROM authors WHERE author_id IN (SELECT person_id FROM raters)""") if r[0]}
        runs = dict(self._exec(
            "SELECT flow, arg_max(run_id, started_at) FROM runs WHERE status = 'completed' GROUP BY flow ORDER BY flow"))
        return {**f, "people": people, "affiliations": affiliations, "runs": runs, "synthetic": self.synthetic_corpus(),
                "derived_from": self.derived_from(), "collection": self.collection_facts()}

    def derived_from(self) -> list[str]:
        """The published benchmarks (``lrbench``, ``goldstandard``) an ingest run's world was
        rebuilt from (its ``derived_from`` parameter): a release of that corpus cites them."""
        rows = self._exec("SELECT parameters FROM runs WHERE flow = 'ingest' AND parameters IS NOT NULL")
        return sorted({k for (p,) in rows if isinstance(k := json.loads(p).get("derived_from"), str)})

    def synthetic_corpus(self) -> bool:
        """Whether any ingest run recorded ``synthetic`` among its parameters (the demo's and the
        tests' worlds): one such run makes every paper, person and answer suspect."""
        rows = self._exec("SELECT parameters FROM runs WHERE flow = 'ingest' AND parameters IS NOT NULL")
        return any(json.loads(p).get("synthetic") is True for (p,) in rows)

    def collection_facts(self) -> dict[str, Any]:
        """How the ratings were collected, as the card tells it: survey rounds, invitation emails
        that left (and the first and last day), reminders, invitations answered (a rating or a
        skip), the first and last answer day, and the curators' decisions on active flags (the
        latest per flag). Days only, from the data: the same warehouse gives the same facts."""
        sent = self._exec(
            """SELECT count(DISTINCT invitation_id) FILTER (WHERE kind = 'invitation'),
                      count(*) FILTER (WHERE kind LIKE 'reminder%'),
                      min(sent_at) FILTER (WHERE kind = 'invitation'), max(sent_at) FILTER (WHERE kind = 'invitation')
               FROM survey_messages WHERE state IN ('sent', 'unconfirmed')""")[0]
        answered = self._exec(
            """SELECT count(DISTINCT invitation_id), min(created_at), max(created_at) FROM survey_events
               WHERE disposition IN ('latest', 'superseded', 'skip')""")[0]
        rounds = [r for (r,) in self._exec("SELECT DISTINCT round FROM survey_invitations ORDER BY round")]
        decisions = dict(self._exec(
            """SELECT d.decision, count(*) FROM rating_flags f
               JOIN (SELECT flag_id, arg_max(decision, decided_at) AS decision FROM flag_decisions GROUP BY flag_id) d
                 USING (flag_id)
               WHERE f.active GROUP BY d.decision ORDER BY d.decision"""))
        def day(t: datetime | None) -> str | None:  # in UTC, whatever the session's time zone
            return None if t is None else (t.astimezone(UTC) if t.tzinfo else t).date().isoformat()

        return {"rounds": rounds, "invitations_sent": int(sent[0]), "reminders_sent": int(sent[1]),
                "first_sent": day(sent[2]), "last_sent": day(sent[3]), "invitations_answered": int(answered[0]),
                "first_answer": day(answered[1]), "last_answer": day(answered[2]),
                "flags_kept": int(decisions.get("keep", 0)), "flags_dropped": int(decisions.get("drop", 0))}

    def release_state(self, version: str) -> dict[str, Any] | None:
        """A release's row in ``releases`` (status, who decided, manifest hash), or None."""
        df = self._frame("SELECT * FROM releases WHERE version = ?", [version])
        return df.row(0, named=True) if df.height else None

    def releases(self) -> pl.DataFrame:
        """Every release recorded, oldest build first: ``version, parent, status, manifest_sha256,
        built_at, superseded_by``."""
        return self._frame("SELECT version, parent, status, manifest_sha256, built_at, superseded_by FROM releases "
                           "ORDER BY built_at, version")

    def set_release_status(self, version: str, status: str, decided_by: str, reason: str, run_id: str) -> None:
        """Record the curator's decision on a release. A release published supersedes every
        published one built before it that nothing superseded yet, and is itself superseded by
        the first published one built after it, if any (all stay published)."""
        with self.transaction():
            self._exec("UPDATE releases SET status = ?, decided_by = ?, reason = ?, decided_at = ?, run_id = ? "
                       "WHERE version = ?", [status, decided_by, reason, utcnow(), run_id, version])
            if status != "published":
                return
            self._exec(
                """UPDATE releases SET superseded_by = ? WHERE status = 'published' AND superseded_by IS NULL
                   AND version <> ? AND built_at < (SELECT built_at FROM releases WHERE version = ?)""",
                [version, version, version])
            self._exec(
                """UPDATE releases SET superseded_by = (
                       SELECT n.version FROM releases n, releases me WHERE me.version = ? AND n.status = 'published'
                       AND n.version <> me.version AND n.built_at > me.built_at ORDER BY n.built_at, n.version LIMIT 1)
                   WHERE version = ?""", [version, version])

    def latest_release(self) -> dict[str, Any] | None:
        """The newest release built that its curator did not reject (``version, status, built_at``):
        the refresh counts new ratings from it. A rejected release is no reference: what was never
        published is no reason to wait for more answers."""
        rows = self._exec("SELECT version, status, built_at FROM releases WHERE status <> 'rejected' "
                          "ORDER BY built_at DESC LIMIT 1")
        return dict(zip(("version", "status", "built_at"), rows[0], strict=True)) if rows else None
