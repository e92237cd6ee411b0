"""arXiv's 429s slow the crawl down (the adaptive pacing Semantic Scholar's client has, the same
``AdaptivePacer``) instead of tripping the breaker; only 429s that outlast the client's patience
on request after request stop the run, in one line naming arXiv."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from revbench.clients.arxiv_api import ArxivClient
from revbench.errors import ServiceUnavailable
from revbench.retry import RateLimited
from revbench.settings import Settings
from tests.support.common import FIXTURES, on_replay, run_cli, settings_env

START = datetime(2025, 9, 1, tzinfo=UTC)
END = datetime(2025, 9, 1, 23, 59, tzinfo=UTC)


def _throttled(replay, settings: Settings, n_429: int, **arxiv: object) -> Settings:
    """A stand-in answering each request ``n_429`` bare 429s (no Retry-After) before the recorded page."""
    app = replay(fixtures=FIXTURES, fault_rate=1.0, max_consecutive_faults=n_429, fault_kinds={"arxiv": ("429_bare",)})
    return on_replay(settings, app).with_overrides(arxiv={"throttle_max_delay_seconds": 0.2, **arxiv},
                                                   http={"max_attempts": 2, "breaker_failures": 2})


def test_several_429s_then_200s_complete_with_the_pace_slowed(replay, settings) -> None:
    s = _throttled(replay, settings, 4)
    client = ArxivClient(s.arxiv, s.http)
    t0 = time.monotonic()
    records, total = client.search_window("cs.IR", START, END)
    assert [r.arxiv_id for r in records] == ["2508.01234", "2509.00007"] and total == 2
    # Twice max_attempts 429s were waited out, none counted as a failed attempt or by the breaker.
    assert client.throttled == 4 and client.requests_made == 5 and client.breaker.failures == 0
    assert client.pacer.slowest == pytest.approx(0.2) and s.arxiv.delay_seconds == 0  # the pace was raised...
    assert time.monotonic() - t0 >= 4 * 0.2 - 0.05  # ...and kept: an unpaced retry would not wait
    assert client.pacer.interval < client.pacer.slowest  # and came back down once arXiv answered


def test_persistent_429s_end_in_one_line_naming_arxiv(replay, settings) -> None:
    s = _throttled(replay, settings, 10**6, throttle_patience_seconds=1.0, throttle_max_delay_seconds=0.1)
    client = ArxivClient(s.arxiv, s.http)
    with pytest.raises(RateLimited, match=r"^arXiv: HTTP 429 for 1 s$"):
        client.search_window("cs.IR", START, END)
    assert client.breaker.failures == 1 and 5 <= client.throttled <= 15  # paced at 0.1 s, not hammered
    with pytest.raises(ServiceUnavailable) as exc:
        client.search_window("cs.IR", START, END)
    said = str(exc.value)
    assert "\n" not in said and said.startswith(f"arXiv API at {s.arxiv.base_url} is unreachable (2 calls in a row failed; "
                                                "last: arXiv: HTTP 429 for 1 s)"), said


def test_a_crawl_under_persistent_429s_stops_in_one_line(replay, settings, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _throttled(replay, settings, 10**6, throttle_patience_seconds=0.5, throttle_max_delay_seconds=0.1)
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    code, out, err = run_cli("ingest", "--since", "2025-09-01", "--until", "2025-09-01", "-c", "cs.IR", "-c", "cs.CL",
                             "--no-track")
    assert code == 3, out + err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "arXiv API" in ln]
    assert len(lines) == 1 and "HTTP 429" in lines[0] and "is unreachable" in lines[0], err
