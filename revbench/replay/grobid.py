"""GROBID: the TEI header of each of the world's PDFs, looked up by the PDF's hash."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from revbench.replay.server import ReplayApp


def routes(replay: ReplayApp) -> list[Route]:
    """``GET /grobid/api/isalive``, ``GET /grobid/api/version`` and ``POST /grobid/api/processHeaderDocument``."""

    async def alive(request: Request) -> Response:
        return Response(b"true", media_type="text/plain")

    async def version(request: Request) -> Response:
        # Recent GROBID answers its ServiceInfo as JSON; older servers answered the bare version as
        # text. Both forms are given here (text below 0.7), as the doctor must read both.
        v = replay.grobid_version
        if tuple(int(n) for n in re.findall(r"\d+", v)[:2]) < (0, 7):
            return Response(v.encode(), media_type="text/plain")
        return JSONResponse({"version": v, "revision": "replay"})

    async def header(request: Request) -> Response:
        form = await request.form()
        upload = form.get("input")
        if upload is None or isinstance(upload, str):
            return Response(b"[BAD_INPUT_DATA] no input file", status_code=400, media_type="text/plain")
        sha = hashlib.sha256(await upload.read()).hexdigest()
        tei = replay.world.teis.get(sha) if replay.world else None
        if tei is None:
            return await replay.respond("grobid", sha, 500, b"[BAD_INPUT_DATA] PDF to XML conversion failed", "text/plain")
        return await replay.respond("grobid", sha, 200, tei, "application/xml; charset=UTF-8")

    return [Route("/grobid/api/isalive", alive, methods=["GET"]), Route("/grobid/api/version", version, methods=["GET"]),
            Route("/grobid/api/processHeaderDocument", header, methods=["POST"])]
