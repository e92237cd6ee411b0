"""Semantic Scholar adaptive pacing: a 429 without Retry-After slows the client down instead of
failing the run; only an unreachable service or a persistent 5xx trips the breaker."""

from __future__ import annotations

import time

import polars as pl
import pytest

from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.errors import ServiceUnavailable
from revbench.replay.server import free_port
from revbench.retry import AdaptivePacer, RateLimited, TransientError
from revbench.schemas.tables import ARXIV_RECORDS, REJECTS, S2_PAPERS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.support.common import FIXTURES, WORLD_SINCE, WORLD_UNTIL, on_replay


class _Clock:
    """Time that moves only when the pacer sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _pacer(clock: _Clock, floor: float = 1.0, ceiling: float = 16.0, recovery: float = 0.5) -> AdaptivePacer:
    return AdaptivePacer(floor, ceiling, recovery, clock=clock, sleep=clock.sleep)


def test_pacer_halves_the_rate_on_each_bare_429_up_to_the_ceiling() -> None:
    clock = _Clock()
    pacer = _pacer(clock)
    pacer.wait()
    assert clock.slept == []
    seen = []
    for _ in range(6):
        pacer.throttled()
        seen.append(pacer.interval)
    assert seen == [2.0, 4.0, 8.0, 16.0, 16.0, 16.0]
    pacer.wait()  # the next request waits the whole slowed pause
    assert clock.slept == [16.0]


def test_pacer_recovers_slowly_and_never_beyond_the_documented_rate() -> None:
    clock = _Clock()
    pacer = _pacer(clock, floor=1.0, ceiling=8.0, recovery=0.5)
    for _ in range(3):
        pacer.throttled()
    assert pacer.interval == 8.0
    steps = []
    for _ in range(20):
        pacer.success()
        steps.append(pacer.interval)
    assert steps[:3] == [7.5, 7.0, 6.5]  # additive: one success does not undo a back-off
    assert min(steps) == 1.0 and steps[-1] == 1.0  # the documented rate is the ceiling of the pace
    assert pacer.slowest == 8.0


def test_pacer_unpaced_client_backs_off_from_zero() -> None:
    clock = _Clock()
    pacer = _pacer(clock, floor=0.0, ceiling=4.0)
    for _ in range(5):
        pacer.wait()
    assert clock.slept == []
    pacer.throttled()
    assert pacer.interval == 1.0  # doubling zero would never slow down


def test_pacer_retry_after_holds_the_next_request_without_slowing_the_pace() -> None:
    clock = _Clock()
    pacer = _pacer(clock)
    pacer.wait()
    pacer.throttled(retry_after=5.0)
    assert pacer.interval == 1.0
    pacer.wait()
    assert clock.slept == [5.0]


def _fast(s: Settings, **s2: object) -> Settings:
    return s.with_overrides(s2={"throttle_max_delay_seconds": 0.4, **s2}, http={"max_attempts": 2})


def test_throttled_batch_slows_down_and_gets_through(replay, settings) -> None:
    app = replay(fixtures=FIXTURES, s2_throttle_seconds=2.0)
    s = _fast(on_replay(settings, app))
    client = SemanticScholarClient(s.s2, s.http)
    answers = client.paper_batch(["2508.01234", "0000.00000"])
    assert answers[0]["paperId"] and answers[1] is None
    bare = app.faults.stats()["injected"]["s2:429_bare"]
    # Far more than max_attempts 429s were waited out, and paced: an unpaced client retrying on
    # its 0.01-0.05 s backoff would have sent hundreds in 2 s.
    assert 3 <= bare <= 12 and client.throttled == bare
    assert client.pacer.slowest == pytest.approx(0.4)
    assert client.breaker.failures == 0
    # The pace recovers after the throttle lifts, back to the unpaced replay rate.
    for _ in range(3):
        client.paper_batch(["2508.01234", "0000.00000"])
    assert client.pacer.interval < client.pacer.slowest


def test_throttle_outlasting_patience_is_left_for_later_without_tripping_the_breaker(replay, settings) -> None:
    app = replay(fixtures=FIXTURES, s2_throttle_seconds=60.0)
    s = _fast(on_replay(settings, app), throttle_patience_seconds=0.5, throttle_max_delay_seconds=0.1)
    client = SemanticScholarClient(s.s2, s.http.model_copy(update={"breaker_failures": 2}))
    for _ in range(3):  # more than breaker_failures in a row, and still no ServiceUnavailable
        with pytest.raises(RateLimited, match="HTTP 429"):
            client.paper_batch(["2508.01234", "0000.00000"])
    assert client.breaker.failures == 0
    # Waited out once per call (patience), not once per retry attempt on top.
    assert app.faults.stats()["served"]["s2"] <= 3 * (0.5 / 0.1 + 3)


def test_429_with_retry_after_is_honoured_without_slowing_the_pace(replay, settings) -> None:
    app = replay(fixtures=FIXTURES, fault_rate=1.0, max_consecutive_faults=1, fault_kinds={"s2": ("429",)},
                 retry_after_seconds=1)
    s = on_replay(settings, app)
    client = SemanticScholarClient(s.s2, s.http)
    t0 = time.monotonic()
    client.paper_batch(["2508.01234", "0000.00000"])
    assert time.monotonic() - t0 >= 1.0
    assert client.throttled == 1 and client.pacer.slowest == 0.0


def test_persistent_5xx_trips_the_breaker(replay, settings) -> None:
    app = replay(fixtures=FIXTURES, fault_rate=1.0, max_consecutive_faults=1000, fault_kinds={"s2": ("500",)})
    s = on_replay(settings, app).with_overrides(http={"max_attempts": 2, "breaker_failures": 3})
    client = SemanticScholarClient(s.s2, s.http)
    for _ in range(2):
        with pytest.raises(TransientError, match="HTTP 500"):
            client.paper_batch(["2508.01234", "0000.00000"])
    with pytest.raises(ServiceUnavailable, match="Semantic Scholar at .* is unreachable .*3 calls in a row failed"):
        client.paper_batch(["2508.01234", "0000.00000"])


@pytest.mark.slow
def test_ingest_throttled_for_20_seconds_slows_down_and_completes(small_world, replay, settings) -> None:
    """The issue's case: S2 answers 429 without Retry-After for 20 s; the run slows, completes,
    rejects nothing beyond the planted bad records and exits 0."""
    from tests.support.cli import cli

    app = replay(world=small_world, s2_throttle_seconds=20.0)
    s = on_replay(settings, app).with_overrides(s2={"batch_size": 40, "throttle_max_delay_seconds": 2.0,
                                                    "throttle_recovery_seconds": 0.5})
    t0 = time.monotonic()
    res = cli(s, "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL), "--no-track")
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    bare = app.faults.stats()["injected"]["s2:429_bare"]
    # Slowed: 20 s of throttle met with at most a 2 s pause is about a dozen 429s, not hundreds.
    assert 5 <= bare <= 20, bare
    assert took >= 20
    truth = pl.read_parquet(small_world / "truth" / "bad_records.parquet")
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert set(wh.read(REJECTS)["arxiv_id"]) == set(truth["arxiv_id"])
        # Every crawled paper was looked up: nothing is left failed for the next run.
        assert wh.count(S2_PAPERS) == wh.count(ARXIV_RECORDS) > 0
        assert wh.ingest.ids_missing_s2() == []
        assert wh.runs.latest_runs(1)["status"].to_list() == ["completed"]


@pytest.mark.slow
def test_unreachable_s2_still_fails_fast_naming_it(small_world, replay, settings) -> None:
    from tests.support.cli import cli, error_line

    url = f"http://127.0.0.1:{free_port()}/s2/graph/v1"
    s = on_replay(settings, replay(world=small_world)).with_overrides(s2={"base_url": url})
    t0 = time.monotonic()
    res = cli(s, "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL), "--no-track")
    assert time.monotonic() - t0 < 30 and res.returncode == 3, res.stderr
    line = error_line(res)
    assert "Semantic Scholar" in line and url.removesuffix("/s2/graph/v1") in line and "unreachable" in line
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.count(REJECTS) == 0
