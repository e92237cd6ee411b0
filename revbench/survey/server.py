"""The survey web server: rating links, the invitation page, opt-out.

Every path carries a signed token (``revbench.survey.tokens``); anything forged, tampered,
expired, foreign to the invitation or malformed gets a plain 403 page and records nothing. Only
a POST records anything: mail security scanners open (GET, HEAD) every link of a message before
its reader does, so a rating link opens a page naming the paper and level with one Confirm button,
and the opt-out link a page with one button. A response is acknowledged only after its event is
committed in the survey store. Pages work without JavaScript (radio buttons in fieldsets,
labelled), escape every text, and carry a strict content security policy; no IP address or user
agent is stored or logged. ``/healthz`` and ``/healthz/link/{token}`` (a probe link signed by
``revbench doctor``) answer JSON for checks and touch no store.

The routes are module-level routers in ``revbench.survey.routes``; what they share (``Pages``, in
``revbench.survey.pages``) is kept on the app's state. ``create_app`` builds that state, the
middleware and the error pages, and includes the routers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from revbench.errors import SurveyStoreGone, UsageError
from revbench.settings import Settings
from revbench.survey.pages import Pages, RateLimiter, Refused
from revbench.survey.routes import MAX_FORM_FIELDS, ROUTERS
from revbench.warehouse.store import SurveyStore

__all__ = ["MAX_BODY_BYTES", "MAX_FORM_FIELDS", "SECURITY_HEADERS", "BodyLimit", "Pages", "RateLimiter", "Refused",
           "create_app", "serve"]

log = logging.getLogger("revbench.survey")

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


async def refused(request: Request, exc: Refused) -> Response:
    """The page a dependency refused the request with."""
    return exc.response


async def security_headers(request: Request, call_next: Any) -> Response:
    """Every answer with the security headers (a route's own values stand)."""
    response = await call_next(request)
    for k, v in SECURITY_HEADERS.items():
        response.headers.setdefault(k, v)
    return response


MAX_BODY_BYTES = 16 * 1024
"""Most bytes of a request body the server reads. Its largest form, a page of 500 papers each
answered (``answer-<id>=skip``), is under 16 KiB; most are under 300 bytes, the opt-out's is
26. deploy/Caddyfile caps the survey site at the same (tests/deploy/test_caddy_body_limit.py
holds them together)."""
class _BodyTooLarge(Exception):
    """Raised into the app by ``BodyLimit``'s receive; never leaves ``BodyLimit``."""


class BodyLimit:
    """Pure ASGI middleware (a ``BaseHTTPMiddleware`` would buffer): a request body over
    ``max_bytes`` gets ``refuse()`` (413) and the connection is closed. A declared length over the
    cap is refused before a byte of the body is read; a chunked body is counted as the app reads
    it and refused at the first chunk past the cap, nothing kept. A chunked body the app did not
    read whole closes the connection after the answer, so the server never reads on to its end."""

    def __init__(self, app: Callable[..., Awaitable[None]], max_bytes: int, refuse: Callable[[], Response]):
        self.app, self.max_bytes, self.refuse = app, max_bytes, refuse

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > self.max_bytes):
            await self._refuse(scope, receive, send)
            return
        received, body_done, started = 0, declared is not None or b"transfer-encoding" not in headers, False

        async def counted() -> dict[str, Any]:
            nonlocal received, body_done
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
                body_done = not message.get("more_body", False)
            return message

        async def closing(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if not body_done:
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, counted, closing)
        except _BodyTooLarge:
            if started:  # no route answers before reading its body; if one did, the connection just ends
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                      send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        response = self.refuse()
        response.headers["Connection"] = "close"  # whatever is still coming is not read
        await response(scope, receive, send)


async def store_gone(request: Request, exc: SurveyStoreGone) -> Response:
    """The answer while the store's file is gone from its path (see ``StoreBase``): nothing was
    recorded, the person is asked to come back (the link stays good), and the curator reads the
    store's one line in the server's log (once a minute at most)."""
    pages: Pages = request.app.state.pages
    now = time.monotonic()
    if now - pages.store_trouble_logged > 60:
        pages.store_trouble_logged = now
        log.error("%s", exc)
    response = pages.page("message", 503, title="Briefly unavailable", heading="The survey is briefly unavailable",
                          text="Nothing was recorded. Please try again in a few minutes; your link stays valid.")
    response.headers["Retry-After"] = "60"
    return response


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    # A stopped server closes its threads' connections (they reopen on the next call): one left
    # to the garbage collector keeps the store's log open in this process.
    pages: Pages = app.state.pages
    pages.store.close_all()


def create_app(settings: Settings, store: SurveyStore | None = None) -> FastAPI:
    """The survey app for ``settings`` (its signing keys, store and team): the state its routes
    share, its middleware and error pages, and the routers of ``revbench.survey.routes``."""
    pages = Pages(settings, store)
    app = FastAPI(title="revbench survey", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan,
                  exception_handlers={SurveyStoreGone: store_gone, Refused: refused})
    app.state.pages = pages
    # Before security_headers, so it runs inside it: the 413 page carries the headers too.
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES, refuse=pages.too_large)
    app.middleware("http")(security_headers)
    for router in ROUTERS:
        app.include_router(router)
    return app


def serve(settings: Settings, host: str, port: int, announce: Callable[[str], None] = lambda line: None,
          uds: Path | None = None) -> None:
    """Run the survey server until stopped (no access log: no IP address is written anywhere).
    ``announce`` hears where it listens once the key is checked and the port is taken. With
    ``uds``, it listens on that unix socket instead of ``host`` and ``port``."""
    import socket

    import uvicorn

    app = create_app(settings)
    config = uvicorn.Config(app, access_log=False, log_level="warning")
    if uds is not None:
        from revbench.survey.listen import unix_listener

        with unix_listener(uds) as unix:
            announce(f"survey server on unix socket {uds} (links use {settings.survey.base_url}); Ctrl-C stops it")
            uvicorn.Server(config).run(sockets=[unix])
        return
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Connections accepted from a socket handed to uvicorn keep Nagle's algorithm, which with
    # delayed ACKs held every keep-alive response ~40 ms (measured in benchmarks/survey_bench.py);
    # Linux passes the listening socket's TCP_NODELAY on to them.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); "
                         "is another survey server running?") from None
    announce(f"survey server on http://{host}:{port} (links use {settings.survey.base_url}); Ctrl-C stops it")
    uvicorn.Server(config).run(sockets=[sock])
