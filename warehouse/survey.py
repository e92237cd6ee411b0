"""The survey in the warehouse: invitations, the messages sent for them, and opt-outs.

Owns ``survey_invitations``, ``survey_messages``, ``survey_approvals`` and ``survey_opt_outs``
(the survey server's own answers live in the SQLite store, :mod:`revbench.warehouse.store`).
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from revbench.schemas.tables import SURVEY_INVITATIONS, SURVEY_MESSAGES
from revbench.warehouse.core import utcnow
from revbench.warehouse.slice import Slice


class SurveySlice(Slice):
    """A round's candidates and their papers, and every message's state (a round's current
    revision comes from the pools)."""

    stage = "survey"

    def survey_candidates(self, round_: int) -> pl.DataFrame:
        """The current version of a round's invitations with what the email needs: ``author_id,
        email, name, query_ids, example_paper`` (the candidate's own paper behind their strongest
        evidence), ``round, revision``."""
        state = self.wh.pools.round_state(round_)
        if state is None:
            return pl.DataFrame()
        return self._frame(
            """WITH ex AS (
                   SELECT e.author_id, arg_max(p.title, e.similarity) AS example_paper
                   FROM pool_evidence e JOIN papers p ON p.arxiv_id = e.neighbor_id
                   WHERE e.round = ? AND e.revision = ? GROUP BY e.author_id)
               SELECT i.author_id, i.email, i.name, i.query_ids, ex.example_paper, i.round, i.revision
               FROM invitations i LEFT JOIN ex USING (author_id)
               WHERE i.round = ? AND i.revision = ? ORDER BY i.author_id""",
            [round_, state["revision"], round_, state["revision"]])

    def paper_texts(self, ids: list[str]) -> dict[str, dict[str, str]]:
        """``arxiv_id -> {title, abstract}``."""
        if not ids:
            return {}
        self.con.register("_ids", pl.DataFrame({"arxiv_id": ids}).to_arrow())
        rows = self._exec("SELECT arxiv_id, title, abstract FROM papers JOIN _ids USING (arxiv_id)")
        self.con.unregister("_ids")
        return {a: {"title": t, "abstract": ab} for a, t, ab in rows}

    def survey_invitations(self, round_: int | None = None) -> pl.DataFrame:
        df = self.read(SURVEY_INVITATIONS)
        return df if round_ is None else df.filter(pl.col("round") == round_)

    def survey_messages(self, round_: int | None = None) -> pl.DataFrame:
        df = self.read(SURVEY_MESSAGES)
        return df if round_ is None else df.filter(pl.col("round") == round_)

    def contacted_emails(self, before_round: int) -> set[str]:
        """Addresses a message was sent to in an earlier round."""
        return {r[0] for r in self._exec(
            """SELECT DISTINCT i.email FROM survey_invitations i JOIN survey_messages m USING (invitation_id)
               WHERE m.state IN ('sent', 'unconfirmed') AND i.round < ?""", [before_round])}

    def opted_out_emails(self) -> set[str]:
        return {r[0] for r in self._exec("SELECT email FROM survey_opt_outs")}

    def set_message_state(self, message_id: str, state: str, reply: str | None = None, attempts: int | None = None,
                          sent_at: datetime | None = None, unconfirmed_at: datetime | None = None,
                          smtp_server: str | None = None) -> None:
        """Move one message on (committed at once: a crash never forgets a sent message)."""
        with self.transaction():
            self._exec(
                """UPDATE survey_messages SET state = ?, smtp_reply = coalesce(?, smtp_reply),
                          attempts = coalesce(?, attempts), sent_at = coalesce(?, sent_at),
                          unconfirmed_at = coalesce(?, unconfirmed_at), smtp_server = coalesce(?, smtp_server)
                   WHERE message_id = ?""",
                [state, reply, attempts, sent_at, unconfirmed_at, smtp_server, message_id])

    def mark_unconfirmed(self) -> int:
        """Messages left 'sending' by a process that died mid-send: they may or may not have left."""
        with self.transaction():
            n = self._exec("SELECT count(*) FROM survey_messages WHERE state = 'sending'")[0][0]
            self._exec("UPDATE survey_messages SET state = 'unconfirmed', unconfirmed_at = ?, smtp_reply = "
                       "'the run sending it stopped before the reply was recorded' WHERE state = 'sending'", [utcnow()])
        return int(n)

    def message_state_counts(self) -> list[tuple[str, str, int]]:
        """``(kind, state, messages)`` of the survey messages (read-only safe on any schema version)."""
        return [(k, st, int(n)) for k, st, n in self._exec(
            "SELECT kind, state, count(*) FROM survey_messages GROUP BY kind, state ORDER BY kind, state")]

    def unconfirmed_messages(self, round_: int | None = None) -> pl.DataFrame:
        """Messages that may or may not have arrived, oldest first: ``message_id, to_email, kind, round,
        unconfirmed_at, smtp_server, smtp_reply`` (the last three null in a warehouse not yet migrated)."""
        migrated = self._exec("SELECT count(*) FROM information_schema.columns WHERE table_name = 'survey_messages' "
                              "AND column_name = 'unconfirmed_at'")[0][0]
        extra = "unconfirmed_at, smtp_server" if migrated else "NULL::TIMESTAMPTZ AS unconfirmed_at, NULL::VARCHAR AS smtp_server"
        return self._frame(
            f"""SELECT message_id, to_email, kind, round, {extra}, smtp_reply FROM survey_messages
                WHERE state = 'unconfirmed' AND (?::BIGINT IS NULL OR round = ?::BIGINT)
                ORDER BY unconfirmed_at NULLS LAST, message_id""", [round_, round_])

    def invitations_sent(self, round_: int) -> int:
        """Invitation emails of a round that left (sent or unconfirmed)."""
        return int(self._exec("SELECT count(*) FROM survey_messages WHERE round = ? AND kind = 'invitation' "
                              "AND state IN ('sent', 'unconfirmed')", [round_])[0][0])
