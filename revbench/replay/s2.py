"""The Semantic Scholar Graph API: paper batches and author publication lists."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from revbench.replay.server import ReplayApp


def forbidden() -> Response:
    """What S2 answers a request whose x-api-key it does not know."""
    return JSONResponse({"message": "Forbidden"}, status_code=403)


def routes(replay: ReplayApp) -> list[Route]:
    """``POST /s2/graph/v1/paper/batch`` and ``GET /s2/graph/v1/author/<id>/papers``."""

    async def batch(request: Request) -> Response:
        if replay.wrong_key("s2", request):
            return forbidden()
        world = replay.world  # without a world no paper is known: each id answers null, as S2 does
        try:
            ids = (await request.json())["ids"]
        except (json.JSONDecodeError, KeyError, TypeError):
            return JSONResponse({"error": "body must be {\"ids\": [...]}"}, status_code=400)
        if len(ids) > 500:
            return JSONResponse({"error": "at most 500 ids"}, status_code=400)
        items = []
        for pid in ids:
            raw = world.s2_papers.get(pid.removeprefix("ARXIV:")) if world and pid.startswith("ARXIV:") else None
            items.append(raw if raw is not None else "null")
        body = ("[" + ",".join(items) + "]").encode("utf-8")
        return await replay.respond("s2", hashlib.sha1(",".join(ids).encode()).hexdigest(), 200, body, "application/json")

    async def author_papers(request: Request) -> Response:
        if replay.wrong_key("s2", request):
            return forbidden()
        world = replay.need_world()
        author_id = request.path_params["author_id"]
        raw = world.s2_authors.get(author_id)
        if raw is None:
            return await replay.respond("s2", f"author:{author_id}", 404, b'{"error":"Author not found"}', "application/json")
        papers = json.loads(raw)
        offset = int(request.query_params.get("offset", 0))
        limit = min(int(request.query_params.get("limit", 100)), 1000)
        page: dict[str, Any] = {"offset": offset, "data": papers[offset : offset + limit]}
        if offset + limit < len(papers):
            page["next"] = offset + limit
        body = json.dumps(page, ensure_ascii=False).encode("utf-8")
        return await replay.respond("s2", f"author:{author_id}:{offset}:{limit}", 200, body, "application/json")

    return [Route("/s2/graph/v1/paper/batch", batch, methods=["POST"]),
            Route("/s2/graph/v1/author/{author_id}/papers", author_papers, methods=["GET"])]
