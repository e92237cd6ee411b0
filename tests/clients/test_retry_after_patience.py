"""A Retry-After never waits past the patience: a 429 asking for 100,000 s, with 2 s of patience,
gives the request up at once with one rate-limited line instead of stalling the run (the issue:
300 s, ``http.retry_after_max_seconds``, for every such request); one that fits is still waited."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from revbench.clients.openalex import OpenAlexClient
from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.retry import RateLimited, TransientError, call_with_retries
from revbench.settings import HttpSettings, Settings
from tests.support.common import on_replay


def _within(seconds: float, fn: Any) -> tuple[BaseException | None, float]:
    """``fn``'s exception (None if it returned) and how long it took; a call still running after
    ``seconds`` fails the test instead of holding it for the wait it was told."""
    out: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            out.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out.append(exc)

    t0 = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"still waiting after {seconds} s: the Retry-After outlasted the patience"
    return out[0], time.monotonic() - t0


def test_a_retry_after_past_the_patience_gives_up_at_once(replay, settings: Settings) -> None:
    app = replay(fault_rate=1.0, max_consecutive_faults=100, fault_kinds={"s2": ("429",), "openalex": ("429",)},
                 retry_after_seconds=100_000)
    s = on_replay(settings, app).with_overrides(s2={"throttle_patience_seconds": 2},
                                                openalex={"throttle_patience_seconds": 2})
    client = SemanticScholarClient(s.s2, s.http)
    exc, took = _within(10, lambda: client.paper_batch(["2401.00001"]))
    assert isinstance(exc, RateLimited) and took < 5
    said = str(exc)
    assert "\n" not in said and said.startswith("S2 /paper/batch: HTTP 429 asks to wait 100000 s (Retry-After)"), said
    assert client.requests_made == 1 and client.breaker.failures == 0  # it answered: not an unreachable service

    oa = OpenAlexClient(s.openalex, s.http)
    exc, took = _within(10, lambda: oa.work_by_doi("10.48550/arxiv.2401.00001"))
    assert isinstance(exc, RateLimited) and took < 5 and oa.requests_made == 1


def test_a_retry_after_within_the_patience_is_waited(replay, settings: Settings) -> None:
    app = replay(fault_rate=1.0, max_consecutive_faults=1, fault_kinds={"s2": ("429",)}, retry_after_seconds=1)
    s = on_replay(settings, app).with_overrides(s2={"throttle_patience_seconds": 30})
    client = SemanticScholarClient(s.s2, s.http)
    exc, took = _within(10, lambda: client.paper_batch(["2401.00001"]))
    assert exc is None and took >= 1.0 and client.throttled == 1 and (client.requests_made, client.retries) == (1, 1)


def test_a_retry_after_past_the_http_budget_is_not_slept() -> None:
    http = HttpSettings(retry_after_max_seconds=300, max_attempts=6)
    calls, slept = [], []

    def busy() -> None:
        calls.append(1)
        raise TransientError("GROBID: HTTP 503", retry_after=100_000, kind="server_error")

    with pytest.raises(RateLimited) as caught:
        call_with_retries(busy, http, "GROBID", sleep=slept.append)
    assert calls == [1] and slept == []
    assert str(caught.value) == ("GROBID: HTTP 503; Retry-After 100000 s is longer than the 300 s a request waits "
                                 "(http.retry_after_max_seconds)")

    def once_busy() -> str:
        calls.append(1)
        if len(calls) == 2:
            raise TransientError("GROBID: HTTP 503", retry_after=7, kind="server_error")
        return "ok"

    assert call_with_retries(once_busy, http, "GROBID", sleep=slept.append) == "ok" and slept == [7]
