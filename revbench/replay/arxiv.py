"""The arXiv export API and arxiv.org PDFs, answered from the world."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router

from revbench.replay.context import ReplayContext, replay_of
from revbench.replay.faults import _unit
from revbench.synth import render

_CAT = re.compile(r"cat:(\S+)")
_WINDOW = re.compile(r"lastUpdatedDate:\[(\d{12}) TO (\d{12})\]")


QUIRKS = ("short_page", "empty_page", "error_feed")


def _ts(s: str) -> datetime:
    return datetime.strptime(s, "%Y%m%d%H%M").replace(tzinfo=UTC)


class ArxivQuirks:
    """Which pages arXiv answers oddly, as the real API does now and then: a page with fewer
    entries than asked though more exist, an empty page inside a result set, or an Atom error
    feed on HTTP 200. Seeded per (page, attempt) like the fault schedule, and never twice in a
    row for one page, so a client that asks again always gets through."""

    def __init__(self, rate: float, seed: int):
        self.rate = rate
        self.seed = seed
        self._attempts: Counter[str] = Counter()
        self._last_odd: set[str] = set()

    def decide(self, key: str, n_entries: int) -> str | None:
        """The quirk for this answer of a page holding ``n_entries``, or None."""
        n = self._attempts[key]
        self._attempts[key] += 1
        if self.rate <= 0 or n_entries == 0 or key in self._last_odd or _unit(self.seed, key, n, "quirk") >= self.rate:
            self._last_odd.discard(key)
            return None
        options = QUIRKS if n_entries > 1 else QUIRKS[1:]
        self._last_odd.add(key)
        return options[int(_unit(self.seed, key, n, "which") * len(options))]


def error_feed(message: str) -> bytes:
    """An Atom error feed as arXiv writes one (its entry's id under ``/api/errors``)."""
    anchor = re.sub(r"\W+", "_", message)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<feed xmlns="{render.ATOM_NS}" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">'
        "<id>https://arxiv.org/</id><title>arXiv Search Results</title><updated>2026-01-01T00:00:00Z</updated>"
        "<opensearch:itemsPerPage>1</opensearch:itemsPerPage><opensearch:totalResults>1</opensearch:totalResults>"
        "<opensearch:startIndex>0</opensearch:startIndex>"
        f"<entry><id>https://arxiv.org/api/errors#{anchor}</id><title>Error</title>"
        f"<updated>2026-01-01T00:00:00Z</updated><summary>{escape(message)}</summary>"
        "<author><name>arXiv api core</name></author></entry></feed>"
    ).encode("utf-8")


ATOM = "application/atom+xml; charset=utf-8"


def _quirks(replay: ReplayContext) -> ArxivQuirks:
    """This server's quirk schedule (one per server, as its fault schedule is)."""
    return replay.service_state("arxiv.quirks", lambda: ArxivQuirks(replay.settings.arxiv_quirk_rate,
                                                                      replay.settings.fault_seed))


async def query(request: Request) -> Response:
    """``GET /arxiv/api/query``: a page of Atom entries, now and then answered oddly (``ArxivQuirks``)."""
    replay = replay_of(request)
    q = request.query_params
    search = q.get("search_query", "")
    for name in ("start", "max_results"):
        if not q.get(name, "0").isdigit():
            # What arXiv answers a malformed query: HTTP 400 with the reason in an error feed.
            return Response(error_feed(f"{name} must be an integer"), status_code=400, media_type=ATOM)
    start = int(q.get("start", 0))
    per_page = int(q.get("max_results", 10))
    cat, window = _CAT.search(search), _WINDOW.search(search)
    entries: list[str] = []
    if replay.world and cat and window:
        entries = replay.world.query(cat.group(1), _ts(window.group(1)), _ts(window.group(2)))
    elif replay.world and cat and search.strip() == cat.group(0):  # a category alone (the doctor's query)
        entries = [e[2] for e in replay.world.by_category.get(cat.group(1), [])]
    key = f"{search}|{start}|{per_page}"
    page = entries[start : start + per_page]
    quirk = _quirks(replay).decide(key, len(page))
    if quirk == "short_page":
        page = page[: len(page) // 2]
    elif quirk == "empty_page":
        page = []
    if quirk:
        replay.faults.injected[f"arxiv:{quirk}"] += 1
    body = (error_feed("internal error, please retry") if quirk == "error_feed"
            else render.atom_feed(page, search, len(entries), start, per_page))
    return await replay.respond("arxiv", key, 200, body, ATOM)


async def pdf(request: Request) -> Response:
    """``GET /arxiv/pdf/<id>v<n>``: the world's PDF of that version."""
    replay = replay_of(request)
    name = request.path_params["name"].removesuffix(".pdf")
    data = replay.world.pdfs.get(name) if replay.world else None
    if data is None:
        return await replay.respond("pdf", name, 404, b"not found", "text/plain")
    return await replay.respond("pdf", name, 200, data, "application/pdf")


router = Router([Route("/arxiv/api/query", query, methods=["GET"]), Route("/arxiv/pdf/{name}", pdf, methods=["GET"])])
"""``GET /arxiv/api/query`` (Atom pages) and ``GET /arxiv/pdf/<id>v<n>``."""
