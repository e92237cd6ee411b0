"""The arXiv export API and arxiv.org PDFs, answered from the world."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from revbench.synth import render

if TYPE_CHECKING:
    from revbench.replay.server import ReplayApp

_CAT = re.compile(r"cat:(\S+)")
_WINDOW = re.compile(r"lastUpdatedDate:\[(\d{12}) TO (\d{12})\]")


def _ts(s: str) -> datetime:
    return datetime.strptime(s, "%Y%m%d%H%M").replace(tzinfo=UTC)


def routes(replay: ReplayApp) -> list[Route]:
    """``GET /arxiv/api/query`` (Atom pages) and ``GET /arxiv/pdf/<id>v<n>``."""

    async def query(request: Request) -> Response:
        q = request.query_params
        search = q.get("search_query", "")
        start = int(q.get("start", 0))
        per_page = int(q.get("max_results", 10))
        cat, window = _CAT.search(search), _WINDOW.search(search)
        entries: list[str] = []
        if replay.world and cat and window:
            entries = replay.world.query(cat.group(1), _ts(window.group(1)), _ts(window.group(2)))
        body = render.atom_feed(entries[start : start + per_page], search, len(entries), start, per_page)
        return await replay.respond("arxiv", f"{search}|{start}|{per_page}", 200, body, "application/atom+xml; charset=utf-8")

    async def pdf(request: Request) -> Response:
        name = request.path_params["name"].removesuffix(".pdf")
        data = replay.world.pdfs.get(name) if replay.world else None
        if data is None:
            return await replay.respond("pdf", name, 404, b"not found", "text/plain")
        return await replay.respond("pdf", name, 200, data, "application/pdf")

    return [Route("/arxiv/api/query", query, methods=["GET"]), Route("/arxiv/pdf/{name}", pdf, methods=["GET"])]
