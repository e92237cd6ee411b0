"""Crawl windows that end: a window over the result ceiling is halved, a single minute is paged
through as far as arXiv's API pages, and a window the API cannot serve stops the slice in one
line naming it, after a few requests, never halving down to the minute and failing there."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from revbench.clients.arxiv_api import ArxivClient, query_for
from revbench.retry import PermanentError
from revbench.settings import Settings
from revbench.synth.render import atom_entry, atom_feed
from revbench.tasks.crawl import fetch_slice
from tests.support.common import FIXTURES, WORLD_SINCE, WORLD_UNTIL, on_replay

DAY = (datetime(2025, 9, 1, tzinfo=UTC), datetime(2025, 9, 1, 23, 59, tzinfo=UTC))
MINUTE = datetime(2025, 9, 1, 10, 12, tzinfo=UTC)
ATOM = {"content-type": "application/atom+xml; charset=utf-8"}


def _client(s: Settings, **arxiv: object) -> ArxivClient:
    s = s.with_overrides(arxiv=arxiv) if arxiv else s
    return ArxivClient(s.arxiv, s.http)


def _routes(d: Path, routes: list[dict[str, object]], bodies: dict[str, bytes]) -> Path:
    d.mkdir()
    for name, body in bodies.items():
        (d / name).write_bytes(body)
    (d / "routes.json").write_text(json.dumps(routes))
    return d


def test_a_total_that_ignores_the_window_stops_in_one_line_after_three_requests(tmp_path: Path, replay, settings) -> None:
    # The recorded page of a broad query, answered to every window: arXiv's real 214881.
    page = re.sub(rb"(<opensearch:totalResults>)2<", rb"\g<1>214881<", (FIXTURES / "arxiv_page.xml").read_bytes())
    d = _routes(tmp_path / "r", [{"method": "GET", "path": "/arxiv/api/query", "headers": ATOM, "body_file": "page.xml"}],
                {"page.xml": page})
    client = _client(on_replay(settings, replay(fixtures=d)))
    with pytest.raises(PermanentError) as exc:
        fetch_slice(client, "cs.IR", *DAY)
    said = str(exc.value)
    assert "\n" not in said and exc.value.kind == "window_ignored"
    assert said.startswith("arXiv reports 214881 results for cs.IR 2025-09-01 00:00 to 2025-09-01 23:59 UTC"), said
    assert client.requests_made == 3  # the window and its two halves, not a halving down to the minute


def _minute_routes(d: Path, total: int, per_page: int, n: int) -> Path:
    query = query_for("cs.IR", MINUTE, MINUTE)
    entries = [atom_entry(f"2509.{i:05d}", 1, MINUTE, MINUTE, f"Paper {i}", "An abstract.", ["A. Author"], "cs.IR", ["cs.IR"])
               for i in range(n)]
    routes, bodies = [], {}
    for start in range(0, n, per_page):
        bodies[f"p{start}.xml"] = atom_feed(entries[start:start + per_page], query, total, start, per_page)
        routes.append({"method": "GET", "path": "/arxiv/api/query", "query": {"search_query": query, "start": str(start)},
                       "headers": ATOM, "body_file": f"p{start}.xml"})
    return _routes(d, routes, bodies)


def test_a_minute_over_the_ceiling_is_paged_through(tmp_path: Path, replay, settings) -> None:
    d = _minute_routes(tmp_path / "r", total=5, per_page=2, n=5)
    client = _client(on_replay(settings, replay(fixtures=d)), max_results_per_query=2, page_size=2)
    records = fetch_slice(client, "cs.IR", MINUTE, MINUTE)
    assert [r.arxiv_id for r in records] == [f"2509.{i:05d}" for i in range(5)]
    assert client.requests_made == 4  # the total, then three pages


def test_a_minute_over_the_api_ceiling_stops_naming_it(tmp_path: Path, replay, settings) -> None:
    d = _minute_routes(tmp_path / "r", total=40000, per_page=2, n=2)
    client = _client(on_replay(settings, replay(fixtures=d)), page_size=2)
    with pytest.raises(PermanentError) as exc:
        fetch_slice(client, "cs.IR", MINUTE, MINUTE)
    said = str(exc.value)
    assert "\n" not in said and exc.value.kind == "window_too_large" and client.requests_made == 1
    assert "40000 results for cs.IR 2025-09-01 10:12 to 2025-09-01 10:12 UTC" in said and "(30000)" in said, said


def test_halving_a_crowded_window_finds_every_record_once(replay, settings, small_world) -> None:
    s = on_replay(settings, replay(world=small_world))
    start, end = datetime.combine(WORLD_SINCE, datetime.min.time(), UTC), datetime.combine(WORLD_UNTIL, datetime.max.time(), UTC)
    end = end.replace(second=0, microsecond=0)
    whole, total = _client(s).search_window("cs.LG", start, end)
    assert total == len(whole) > 8
    halved = _client(s, max_results_per_query=3, page_size=2)
    records = fetch_slice(halved, "cs.LG", start, end)
    assert sorted(r.arxiv_id for r in records) == sorted(r.arxiv_id for r in whole)
    assert halved.requests_made > total // 3  # it did split
