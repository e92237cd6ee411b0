"""Pieces submitted a few at a time (``map_pieces(in_flight=n)``): in a tracked run no more than n
are ever running, every piece is yielded once, and a piece that fails is raised after the others
were yielded, as when all are submitted at once."""

from __future__ import annotations

import threading
import time

import pytest

from revbench.flows.pieces import map_pieces

_lock = threading.Lock()
_running = {"now": 0, "most": 0}


def _piece(i: int, fail: bool = False) -> int:
    with _lock:
        _running["now"] += 1
        _running["most"] = max(_running["most"], _running["now"])
    try:
        time.sleep(0.05)
        if fail:
            raise ValueError(f"piece {i} failed")
        return i
    finally:
        with _lock:
            _running["now"] -= 1


def _tracked(pieces: list[tuple[int, bool]], in_flight: int) -> tuple[list[int], BaseException | None]:
    from prefect import flow
    from prefect.task_runners import ThreadPoolTaskRunner

    got: list[int] = []
    error: list[BaseException] = []

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=8))
    def run() -> None:
        try:
            for r in map_pieces(_piece, pieces, "probe", None, in_flight=in_flight):
                got.append(r)
        except ValueError as exc:
            error.append(exc)

    _running.update(now=0, most=0)
    run()
    return got, error[0] if error else None


@pytest.mark.parametrize("in_flight", [1, 2])
def test_no_more_than_in_flight_pieces_run_and_each_is_yielded_once(prefect_server, in_flight: int) -> None:
    got, error = _tracked([(i, False) for i in range(7)], in_flight)
    assert sorted(got) == list(range(7)) and error is None
    assert _running["most"] == in_flight


def test_all_at_once_by_default_and_a_failure_comes_after_the_others(prefect_server) -> None:
    got, error = _tracked([(i, False) for i in range(6)], 0)
    assert sorted(got) == list(range(6)) and _running["most"] > 2
    got, error = _tracked([(0, False), (1, True), (2, False), (3, False)], 1)
    assert sorted(got) == [0, 2, 3] and isinstance(error, ValueError) and "piece 1" in str(error)
