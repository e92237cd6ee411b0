"""Pieces started on entering ``pieces_started``'s block, before any result is read: the graph
stage saves the bulk files' answer while its API pieces wait on the service. Leaving the block
drops the pieces not started; a result read inside it comes from a piece already running."""

from __future__ import annotations

import threading

import pytest

from revbench.flows.pieces import pieces_started
from revbench.workers import Started

_started: list[int] = []
_go = threading.Event()


def _piece(i: int) -> int:
    _started.append(i)
    _go.wait(10)
    return i * 10


def _reset() -> None:
    _started.clear()
    _go.clear()


def test_in_process_pieces_start_before_the_first_result_is_read() -> None:
    _reset()
    with pieces_started(_piece, [(1,), (2,)], "probe", local_workers=2) as results:
        for _ in range(200):
            if len(_started) == 2:
                break
            threading.Event().wait(0.01)
        assert sorted(_started) == [1, 2]  # both running while the block's own work goes on
        _go.set()
        assert sorted(results) == [10, 20]


def test_leaving_the_block_unread_drops_the_pieces_not_started() -> None:
    _reset()
    with pieces_started(_piece, [(i,) for i in range(5)], "probe", local_workers=1):
        for _ in range(200):
            if _started:
                break
            threading.Event().wait(0.01)
    _go.set()
    threading.Event().wait(0.2)
    assert _started == [0]  # the one in flight finished; the other four never began


def test_a_started_pool_raises_a_failure_in_the_consumer_and_stops() -> None:
    def boom(i: int) -> int:
        if i == 1:
            raise ValueError("piece 1 failed")
        return i

    started = Started(boom, [0, 1, 2], 1)
    with pytest.raises(ValueError, match="piece 1"):
        list(started)
    assert started._stop.is_set()


def test_in_a_tracked_run_the_pieces_are_submitted_on_entering(prefect_server) -> None:
    from prefect import flow
    from prefect.task_runners import ThreadPoolTaskRunner

    seen: dict[str, object] = {}

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=4))
    def run() -> None:
        with pieces_started(_piece, [(1,), (2,), (3,)], "probe", in_flight=2) as results:
            for _ in range(500):
                if len(_started) == 2:
                    break
                threading.Event().wait(0.01)
            seen["before_reading"] = sorted(_started)
            _go.set()
            seen["results"] = sorted(results)

    _reset()
    run()
    assert seen["before_reading"] == [1, 2]  # in_flight still bounds what is submitted at once
    assert seen["results"] == [10, 20, 30]
