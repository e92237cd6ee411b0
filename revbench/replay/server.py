"""One local server that stands in for arXiv, Semantic Scholar, arxiv.org PDFs, GROBID, OpenAlex and
an OpenAI-compatible LLM (one module per service beside this one).

It answers from recorded fixtures (a ``routes.json`` index of recorded responses) first and
from a synthetic world directory second, and injects transient faults at a seeded rate. It
binds to loopback only.

Mount points (the base URLs the clients are given):
``/arxiv/api/query``, ``/s2/graph/v1``, ``/arxiv/pdf/<id>v<n>``, ``/grobid/api/...``, ``/openalex``, ``/llm/v1``.

Each service module holds a module-level ``router`` whose handlers close over nothing: they read
this server from ``request.app.state.replay`` as the :class:`~revbench.replay.context.ReplayContext`
it satisfies (``replay_of``; they keep what they remember between requests in
:meth:`ReplayApp.service_state`), so they never import this module, which includes their routes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from revbench.replay import arxiv, grobid, llm, openalex, s2
from revbench.replay.cassettes import Playback, RecordedRoute, load_recordings
from revbench.replay.context import ReplayContext
from revbench.replay.faults import FaultInjector, corrupt
from revbench.replay.world_store import WorldStore
from revbench.settings import ReplaySettings

GROBID_VERSION = "0.8.2"
"""The GROBID release the replay server says it is (the newest in the conformance samples)."""
LLM_MODELS = ("gpt-4o-mini", "replay")
"""The models the replay LLM lists (the default REVBENCH_LLM__MODEL among them)."""
SERVICE_ROUTERS = (arxiv.router, s2.router, grobid.router, openalex.router, llm.router)
"""The services' routers, whose routes the replay app includes in this order."""

T = TypeVar("T")


def load_fixtures(directory: Path) -> list[RecordedRoute]:
    """The recorded answers of one directory (``routes.json`` and VCR cassettes, see ``cassettes``)."""
    return load_recordings(directory)


class ReplayApp:
    """The ASGI app and its state."""

    def __init__(
        self,
        settings: ReplaySettings,
        world_dir: Path | None = None,
        fixtures_dir: Path | None = None,
        as_of: datetime | None = None,
        fault_kinds: dict[str, tuple[str, ...]] | None = None,
        grobid_version: str = GROBID_VERSION,
        api_keys: dict[str, str] | None = None,
        llm_models: tuple[str, ...] = LLM_MODELS,
    ):
        self.settings = settings
        # What `revbench doctor` reads, and its faults: an old GROBID, a wrong key (``{"s2": KEY}``
        # refuses any other x-api-key with 403, ``{"llm": KEY}`` any other bearer with 401; no
        # key at all stays the keyless pool for S2), a model the endpoint does not serve.
        self.grobid_version = grobid_version
        self.api_keys = dict(api_keys or {})
        self.llm_models = llm_models
        self.world = WorldStore(world_dir, as_of=as_of) if world_dir else None
        self.fixtures = load_fixtures(fixtures_dir) if fixtures_dir else []
        self.playback = Playback(self.fixtures)
        self.faults = FaultInjector(
            settings.fault_rate, settings.fault_seed, settings.max_consecutive_faults, kinds=fault_kinds,
            throttle={"s2": settings.s2_throttle_seconds},
        )
        self._service_state: dict[str, Any] = {}
        self.app = Starlette(
            routes=[*(route for router in SERVICE_ROUTERS for route in router.routes),
                    Route("/_replay/stats", stats, methods=["GET"])]
        )
        # What every route reads: this server (its world, fixtures, fault schedule and doctor's faults),
        # which the service modules know as the ReplayContext it is.
        context: ReplayContext = self
        self.app.state.replay = context
        # Recorded fixtures take precedence over the world and may answer any path.
        self.app.add_middleware(_FixtureMiddleware, replay=self)
        self.app.add_middleware(_MarkReplay, replay=self)
        self.credentials_seen: list[str] = []

    async def respond(self, service: str, key: str, status: int, body: bytes, content_type: str,
                      headers: dict[str, str] | None = None) -> Response:
        """Answer, unless the fault schedule says this attempt fails."""
        kind = self.faults.decide(service, key)
        if kind is None:
            return Response(body, status_code=status, media_type=content_type, headers=headers)
        if kind == "429":
            return Response(b"rate limited", status_code=429, media_type="text/plain",
                            headers={"Retry-After": str(self.settings.retry_after_seconds)})
        if kind == "429_bare":
            return Response(b'{"message": "Too Many Requests"}', status_code=429, media_type="application/json")
        if kind in ("500", "503"):
            return Response(b"service unavailable", status_code=int(kind), media_type="text/plain")
        if kind == "timeout":
            await asyncio.sleep(self.settings.timeout_delay_seconds)
            return Response(body, status_code=status, media_type=content_type, headers=headers)
        if kind == "truncated":
            return _CutOffResponse(body, status_code=status, media_type=content_type, headers=headers)
        return Response(corrupt(body, kind, content_type), status_code=status, media_type=content_type, headers=headers)

    def wrong_key(self, service: str, request: Request) -> bool:
        """Whether ``request`` carries a key other than the one ``api_keys`` holds for ``service``
        (for S2, no key at all is the keyless pool, not a wrong key)."""
        want = self.api_keys.get(service)
        if want is None:
            return False
        if service == "s2":
            got = request.headers.get("x-api-key")
            return got is not None and got != want
        return request.headers.get("authorization") != f"Bearer {want}"

    def need_world(self) -> WorldStore:
        """The world, or a LookupError when the server runs on fixtures alone."""
        if self.world is None:
            raise LookupError("no world loaded")
        return self.world

    def service_state(self, name: str, make: Callable[[], T]) -> T:
        """What a service's routes remember for this server between requests (arXiv's quirk
        schedule, S2's index of its paper ids, OpenAlex's works), made by ``make`` on first use."""
        if name not in self._service_state:
            self._service_state[name] = make()
        state: T = self._service_state[name]
        return state


async def stats(request: Request) -> Response:
    """``GET /_replay/stats``: what the fault schedule served and injected, and how many
    credentials arrived."""
    replay: ReplayApp = request.app.state.replay
    return JSONResponse({**replay.faults.stats(), "credentials_seen": len(replay.credentials_seen)})


class _CutOffResponse(Response):
    """Declares the whole body's length, sends half of it, and drops the connection: what a
    truncated transfer looks like to a client."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2], "more_body": True})


class _QuietCutOffs(logging.Filter):
    # uvicorn reports every deliberately unfinished response as an ASGI error.
    def filter(self, record: logging.LogRecord) -> bool:
        return "without completing response" not in record.getMessage()


logging.getLogger("uvicorn.error").addFilter(_QuietCutOffs())


class _MarkReplay:
    """Marks every answer as the replay server's (so runs pointed here drop real API keys), and
    remembers any credential a client sent, so tests can show none arrives."""

    def __init__(self, app: Any, replay: ReplayApp):
        self.app = app
        self.replay = replay

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name.lower() in (b"authorization", b"x-api-key"):
                self.replay.credentials_seen.append(value.decode("latin-1"))

        async def marked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-revbench-replay", b"synthetic")]}
            await send(message)

        await self.app(scope, receive, marked)


class _FixtureMiddleware:
    """Serves recorded responses before the world routes see the request."""

    def __init__(self, app: Any, replay: ReplayApp):
        self.app = app
        self.replay = replay

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.replay.fixtures:
            request = Request(scope, receive)
            method, path = request.method, request.url.path
            body = None
            if self.replay.playback.wants_body(method, path):
                body = await request.body()
                receive = _replayed_body(body, receive)
            r = self.replay.playback.pick(method, path, dict(request.query_params), body)
            if r is not None:
                ctype = r.headers.get("content-type", "application/octet-stream")
                headers = {k: v for k, v in r.headers.items() if k.lower() != "content-type"}
                service = service_of(r.path)
                key = f"fixture:{r.method}:{r.path}:{sorted(request.query_params.items())}"
                response = await self.replay.respond(service, key, r.status, r.body, ctype, headers)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _replayed_body(body: bytes, receive: Any) -> Any:
    """A ``receive`` that hands the already-read body on once, then waits as the original does."""
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def service_of(path: str) -> str:
    """Which service a path belongs to (decides the fault kinds it can get)."""
    if path.startswith("/arxiv/pdf/"):
        return "pdf"
    head = path.strip("/").split("/")[0]
    return head if head in ("arxiv", "s2", "grobid", "openalex", "llm") else "arxiv"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class AppServer:
    """Runs an ASGI app under uvicorn in a background thread of this process, on loopback."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("local servers bind to loopback only")
        self.host = host
        self.port = port or free_port(host)
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", access_log=False,
                                timeout_keep_alive=30)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> AppServer:
        self._thread = threading.Thread(target=self.server.run, name="local-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("local server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread:
            self._thread.join(timeout=10)

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ReplayServer(AppServer):
    """The replay app in a background thread."""

    def __init__(self, replay: ReplayApp, host: str = "127.0.0.1", port: int = 0):
        super().__init__(replay.app, host, port)
        self.replay = replay


def replay_overrides(base: str) -> dict[str, dict[str, Any]]:
    """Settings sections that point every client at a replay server at ``base``, unpaced; no
    API key travels to the replay server (a user's real key is for the real service only)."""
    return {
        "arxiv": {"base_url": f"{base}/arxiv/api/query", "delay_seconds": 0},
        "s2": {"base_url": f"{base}/s2/graph/v1", "delay_seconds": 0, "keyless_delay_seconds": 0, "api_key": None},
        "pdf": {"base_url": f"{base}/arxiv"},
        "grobid": {"base_url": f"{base}/grobid", "busy_sleep_seconds": 0},
        "openalex": {"base_url": f"{base}/openalex", "delay_seconds": 0},
        "llm": {"base_url": f"{base}/llm/v1", "api_key": None},
    }
