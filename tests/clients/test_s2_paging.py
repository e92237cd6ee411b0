"""Semantic Scholar paging that ends: an author's publication list follows ``next`` only while it
moves forward; a ``next`` equal to or below the offset just asked (or not an offset at all) stops
in one line naming the endpoint and the offset, instead of asking the same pages for ever."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.retry import TransientError
from tests.support.common import on_replay


def _serve(tmp: Path, replay, second_next: object):
    """Two pages of author 42's list: offset 0 says ``next`` 2, offset 2 says ``second_next``."""
    pages = {0: {"offset": 0, "next": 2, "data": [{"paperId": "p1"}, {"paperId": "p2"}]},
             2: {"offset": 2, "next": second_next, "data": [{"paperId": "p3"}]}}
    routes = []
    for offset, page in pages.items():
        (tmp / f"p{offset}.json").write_text(json.dumps(page))
        routes.append({"method": "GET", "path": "/s2/graph/v1/author/42/papers", "query": {"offset": str(offset)},
                       "headers": {"content-type": "application/json"}, "body_file": f"p{offset}.json"})
    (tmp / "routes.json").write_text(json.dumps(routes))
    return replay(fixtures=tmp)


@pytest.mark.parametrize("second_next", [2, 0, 1, "4", True])
def test_a_next_that_does_not_advance_stops_in_one_line(tmp_path: Path, replay, settings, second_next: object) -> None:
    app = _serve(tmp_path, replay, second_next)
    s = on_replay(settings, app)
    client = SemanticScholarClient(s.s2, s.http)
    with pytest.raises(TransientError) as exc:
        client.author_papers("42")
    said = str(exc.value)
    assert "\n" not in said and exc.value.kind == "paging_stuck"
    assert said.startswith(f"S2 /author/42/papers: 'next' {second_next!r} after offset 2 does not advance"), said
    assert client.requests_made == 2 and app.faults.stats()["served"]["s2"] == 2
    assert client.breaker.failures == 0  # S2 answered: a stuck list is not an unreachable service


def test_a_next_that_advances_is_followed_to_the_end(tmp_path: Path, replay, settings) -> None:
    s = on_replay(settings, _serve(tmp_path, replay, None))
    assert [p["paperId"] for p in SemanticScholarClient(s.s2, s.http).author_papers("42")] == ["p1", "p2", "p3"]
