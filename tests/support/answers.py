"""Answers as the survey store acknowledged them and as the warehouse pulled them: what the store
epoch and backup-restore tests compare (each acknowledged answer in the ratings exactly once)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from revbench.schemas.tables import RATINGS, SURVEY_EVENTS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.warehouse.store import SurveyStore

Answer = tuple[str, str, int | None, str]  # invitation, paper, rating (None: a skip), created_at


def one_answer(s: Settings, rating: int) -> None:
    """A new warehouse and a survey store holding one invitation answered with ``rating``: what a
    backup holds at its smallest."""
    with Warehouse.open(s.warehouse_path):
        pass
    store = SurveyStore(s.survey_store_path)
    store.publish_invitations([{"invitation_id": "inv_1", "round": 1, "papers": [{"paper_id": "2609.00001"}]}])
    store.record_answers("inv_1", {"2609.00001": rating})
    store.close()


def answer(store: SurveyStore, answers: list[tuple[str, str, int | None]]) -> list[Answer]:
    """Record answers as the survey server does once a person confirms them; returns what the
    store acknowledged (each answer with its time)."""
    before = store.max_event_id()
    for inv, paper, rating in answers:
        assert store.record_answers(inv, {paper: rating}) == 1
    return acknowledged(store, before)


def acknowledged(store: SurveyStore, after: int) -> list[Answer]:
    """The store's answers after event id ``after``, with their times."""
    return [(e["invitation_id"], e["paper_id"], e["rating"], e["created_at"]) for e in store.events_since(after)]


def pulled(s: Settings) -> list[Answer]:
    """Every event in the warehouse, as the store acknowledged it."""
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        ev = wh.read(SURVEY_EVENTS)
    return [(i, p, r, t.isoformat(timespec="microseconds"))
            for i, p, r, t in ev.select("invitation_id", "paper_id", "rating", "created_at").iter_rows()]


def same(a: list[Answer], b: list[Answer]) -> bool:
    """The same answers, each as often (order aside)."""
    return sorted(a, key=repr) == sorted(b, key=repr)


def latest(acked: list[Answer]) -> dict[tuple[str, str], int]:
    """The rating each (invitation, paper) holds once every answer is applied in time order."""
    out: dict[tuple[str, str], int | None] = {}
    for inv, paper, rating, _t in sorted(acked, key=lambda a: a[3]):
        out[(inv, paper)] = rating
    return {k: v for k, v in out.items() if v is not None}


def ratings_of(s: Settings) -> dict[tuple[str, str], int]:
    """The warehouse's ratings by (invitation, paper)."""
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return {(i, p): v for i, p, v in wh.read(RATINGS).select("invitation_id", "paper_id", "rating").iter_rows()}


def store_logs_open(path: Path) -> int:
    """How many connections of this process hold the store's write-ahead log open (read from
    ``/proc/self/fd``; a caller skips where that is missing)."""
    n = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            n += os.readlink(fd) == f"{path}-wal"
    return n
