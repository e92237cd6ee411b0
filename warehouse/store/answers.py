"""The survey server's side of the store: invitations it may show, answers and opt-outs it records.

Writes ``invitations``, ``events`` and ``opt_outs``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from revbench.warehouse.store.base import StoreBase, _now

LATEST = ("SELECT event_id FROM events WHERE invitation_id = e.invitation_id AND paper_id = e.paper_id "
          "ORDER BY created_at DESC, event_id DESC LIMIT 1")
"""The event holding a (invitation, paper)'s current answer: the latest by time, as the ratings in
the warehouse count it. Not the highest id: a restore merges a backup's older answers into the
store with new, higher ids (``warehouse/store/backup.py``), and the page must still show the
person's last answer, not one they replaced."""

def _at(at: datetime | None) -> str:
    """A time as the store writes it (UTC, microseconds), now when none is given: the times
    compare as text (``LATEST``), so a declared time is written exactly like the clock's."""
    return _now() if at is None else at.astimezone(UTC).isoformat(timespec="microseconds")


class StoreAnswers(StoreBase):
    """Publishing invitations, recording clicks, pages and opt-outs, and reading the latest answers."""

    def publish_invitations(self, rows: list[dict[str, Any]]) -> None:
        """Invitations the server may show: ``invitation_id, round, papers``; re-publishing
        replaces the papers (texts can be corrected), never the events."""
        with self._write() as con:
            con.executemany(
                """INSERT INTO invitations (invitation_id, round, papers, published_at) VALUES (?, ?, ?, ?)
                   ON CONFLICT (invitation_id) DO UPDATE SET papers = excluded.papers""",
                [(r["invitation_id"], r["round"], json.dumps(r["papers"], ensure_ascii=False), _now()) for r in rows],
            )

    def invitation(self, invitation_id: str) -> dict[str, Any] | None:
        with self._connect() as con:
            row = con.execute("SELECT round, papers FROM invitations WHERE invitation_id = ?", [invitation_id]).fetchone()
        return None if row is None else {"invitation_id": invitation_id, "round": row[0], "papers": json.loads(row[1])}

    def current(self, invitation_id: str) -> dict[str, int | None]:
        """The latest answer per paper: a rating, or None for a skip (papers never answered are absent)."""
        with self._connect() as con:
            rows = con.execute(
                f"""SELECT paper_id, rating, skipped FROM events e WHERE invitation_id = ? AND event_id = ({LATEST})""",
                [invitation_id]).fetchall()
        return {p: (None if s else r) for p, r, s in rows}

    def record_click(self, invitation_id: str, paper_id: str, rating: int, token_digest: str,
                     at: datetime | None = None) -> bool:
        """Record a one-click rating given ``at`` (default: now); False when this very link was
        used before (a replay)."""
        with self._write() as con:
            cur = con.execute(
                """INSERT INTO events (invitation_id, paper_id, rating, skipped, source, token_digest, created_at)
                   VALUES (?, ?, ?, 0, 'click', ?, ?) ON CONFLICT (token_digest) DO NOTHING""",
                [invitation_id, paper_id, rating, token_digest, _at(at)])
            return cur.rowcount == 1

    def record_answers(self, invitation_id: str, answers: dict[str, int | None], at: datetime | None = None) -> int:
        """Record a submitted page given ``at`` (default: now): one event per paper whose answer
        changed (a rating, or None for a skip); returns how many were recorded."""
        with self._write() as con:
            rows = con.execute(
                f"""SELECT paper_id, rating, skipped FROM events e WHERE invitation_id = ? AND event_id = ({LATEST})""",
                [invitation_id]).fetchall()
            now = {p: (None if s else r) for p, r, s in rows}
            changed = [(p, a) for p, a in answers.items() if p not in now or now[p] != a]
            con.executemany(
                """INSERT INTO events (invitation_id, paper_id, rating, skipped, source, created_at)
                   VALUES (?, ?, ?, ?, 'form', ?)""",
                [(invitation_id, p, a, int(a is None), _at(at)) for p, a in changed])
        return len(changed)

    def opt_out(self, invitation_id: str, source: str, at: datetime | None = None) -> None:
        with self._write() as con:
            con.execute("INSERT INTO opt_outs VALUES (?, ?, ?) ON CONFLICT DO NOTHING", [invitation_id, source, _at(at)])

    def opted_out(self) -> dict[str, str]:
        """invitation id -> when it opted out."""
        with self._connect() as con:
            return dict(con.execute("SELECT invitation_id, created_at FROM opt_outs").fetchall())

    def answered(self) -> dict[str, dict[str, int | None]]:
        """Every invitation's latest answers (for reminders and counts)."""
        with self._connect() as con:
            rows = con.execute(
                f"""SELECT invitation_id, paper_id, rating, skipped FROM events e WHERE event_id = ({LATEST})"""
            ).fetchall()
        out: dict[str, dict[str, int | None]] = {}
        for inv, p, r, s in rows:
            out.setdefault(inv, {})[p] = None if s else r
        return out
