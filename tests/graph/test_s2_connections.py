"""Several Semantic Scholar requests in flight (``s2.connections``): a piece gives the same rows
as one request at a time, and the one pacer a client holds still spaces every request it sends,
whichever thread sends it."""

from __future__ import annotations

import threading
from pathlib import Path

from revbench.retry import AdaptivePacer
from revbench.settings import Settings
from revbench.tasks.graph_fetch import s2_piece
from revbench.workers import map_unordered
from tests.support.common import on_replay


def test_a_piece_with_four_connections_saves_what_one_at_a_time_saved(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world)
    ours = sorted({e[1] for entries in app.need_world().by_category.values() for e in entries})[:40] + ["2401.99999"]
    got = {n: s2_piece(on_replay(settings, app).with_overrides(s2={"connections": n}), ours[:10], ours)
           for n in (1, 4)}
    one, four = got[1], got[4]
    assert one.citations and one.citations == four.citations  # the list's order, not the answers'
    assert one.fetches == four.fetches and one.failures == four.failures == []
    assert {"arxiv_id": "2401.99999", "source": "s2", "kind": "references", "found": False, "n_rows": 0,
            "source_paper_id": None} in four.fetches
    # The same requests, each counted once: a send again after a slow answer is a retry, not a request.
    assert four.requests == one.requests and four.down is None


def test_a_paper_the_batch_does_not_know_is_not_asked_for_its_references(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world)
    ours = sorted({e[1] for entries in app.need_world().by_category.values() for e in entries})[:6]
    unknown = ["2401.99998", "2401.99999"]
    s = on_replay(settings, app)
    served = app.faults.stats()["served"].get("s2", 0)
    got = s2_piece(s, ours + unknown[:1], ours + unknown)
    asked = app.faults.stats()["served"].get("s2", 0) - served
    refs = {f["arxiv_id"]: f for f in got.fetches if f["kind"] == "references"}
    assert all(not refs[a]["found"] and refs[a]["n_rows"] == 0 for a in unknown) and all(refs[a]["found"] for a in ours)
    # one batch, each known paper's references, and the one unknown paper the batch was not asked about
    assert asked == got.requests == 1 + len(ours) + 1


def test_the_pacer_spaces_requests_from_every_thread() -> None:
    # A clock that moves only when told: each caller's wait is the slot the pacer reserved for it.
    lock, waits = threading.Lock(), []

    def sleep(seconds: float) -> None:
        with lock:
            waits.append(round(seconds, 6))

    pacer = AdaptivePacer(0.5, 8.0, 0.1, clock=lambda: 100.0, sleep=sleep)
    list(map_unordered(lambda _: pacer.wait(), range(12), 4))
    # The first goes at once; the other eleven were each given their own slot, half a second apart.
    assert sorted(waits) == [0.5 * k for k in range(1, 12)]
