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
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from revbench.errors import SurveyStoreGone, UsageError
from revbench.settings import Settings
from revbench.survey import SIMULATED_TIME_HEADER
from revbench.survey.tokens import Action, BadToken, Claim, LinkSigner, token_digest
from revbench.templates import bars_scale, read, render
from revbench.warehouse.store import SurveyStore

log = logging.getLogger("revbench.survey")

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class RateLimiter:
    """At most ``limit`` requests per link in any ``window`` seconds, in memory, keyed by a token
    digest. Memory stays bounded: a link idle for a window is forgotten, and at most ``max_keys``
    links are kept (the least recently used go first; a forgotten link only starts afresh)."""

    def __init__(self, limit: int, window: float = 60.0, max_keys: int = 20_000):
        self.limit, self.window, self.max_keys = limit, window, max_keys
        self._hits: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, key: str) -> bool:
        """Whether one more request on ``key`` is allowed now (and count it if so)."""
        now = time.monotonic()
        with self._lock:
            self._forget_idle(now)
            hits = self._hits.get(key)
            if hits is None:
                hits = self._hits[key] = deque()
                while len(self._hits) > self.max_keys:
                    self._hits.popitem(last=False)
            else:
                self._hits.move_to_end(key)
                while hits and now - hits[0] > self.window:
                    hits.popleft()
            if len(hits) >= self.limit:
                return False
            hits.append(now)
            return True

    def _forget_idle(self, now: float) -> None:
        # Keys are in order of last use, so the idle ones are at the front; a key that is left
        # behind out of order is still bounded by max_keys.
        while self._hits:
            key, hits = next(iter(self._hits.items()))
            if hits and now - hits[-1] <= self.window:
                return
            del self._hits[key]

    def __len__(self) -> int:
        return len(self._hits)


Checked = tuple[Claim, dict[str, Any]]
"""A valid link's claim and the invitation it names."""


class Refused(Exception):
    """The page that answers a request instead of its route: a link refused, or an answer not
    understood. Raised by the route's dependencies, so nothing is recorded."""

    def __init__(self, response: HTMLResponse):
        super().__init__(response.status_code)
        self.response = response


class Pages:
    """What every route shares: the signer, the store, the rate limit and the page templates."""

    def __init__(self, settings: Settings, store: SurveyStore | None = None):
        sv = settings.survey
        self.team = sv.team
        self.signer = LinkSigner.from_settings(sv)
        self.store = store or SurveyStore(settings.survey_store_path)
        self.limiter = RateLimiter(sv.rate_limit_per_minute)
        self.scale = bars_scale()
        self.store_trouble_logged = float("-inf")
        self.simulated_times = sv.simulated_answer_times

    def page(self, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        html, _version = render(f"survey/{name}.html.j2", team=self.team, **ctx)
        return HTMLResponse(html, status_code=status)

    def refuse(self) -> HTMLResponse:
        return self.page("message", 403, title="Link not valid", heading="This link is not valid",
                         text="It may have expired, or been changed. Please use a link from your most recent email; "
                              "nothing was recorded.")

    def too_large(self) -> HTMLResponse:
        return self.page("message", 413, title="Too much sent", heading="That was more than this page accepts",
                         text="Nothing was recorded. Please use the buttons of the page or of your email.")

    def claim_for(self, token: str, *actions: str) -> Checked:
        """The token's claim and its invitation; :class:`Refused` with the page that refuses it
        (rate-limited, invalid, the wrong kind of link, an unknown invitation, or a paper not in it)."""
        # The signature first (one HMAC): a forged token is refused before any per-link state
        # exists, so a flood of them costs no memory.
        try:
            claim = self.signer.verify(token)
        except BadToken:
            raise Refused(self.refuse()) from None
        if not self.limiter.allow(token_digest(token)):
            raise Refused(self.page("message", 429, title="Too many requests", heading="Too many requests",
                                    text="Please wait a minute and try again."))
        if claim.action not in actions:
            raise Refused(self.refuse())
        inv = self.store.invitation(claim.invitation)
        if inv is None:
            raise Refused(self.refuse())
        if claim.paper is not None and claim.paper not in {p["paper_id"] for p in inv["papers"]}:
            raise Refused(self.refuse())
        return claim, inv

    def page_token(self, invitation_id: str) -> str:
        return self.signer.sign(Claim(invitation_id, "page"))

    def answered_at(self, request: Request) -> datetime | None:
        """When the answer was given: None for the store's clock (now), or, on a server for a
        SYNTHETIC panel (``simulated_answer_times``), the time the panel declares on its simulated
        clock, so that flags on its pace do not depend on how loaded the machine was; a declared
        time that does not parse records nothing (:class:`Refused`, 400)."""
        declared = request.headers.get(SIMULATED_TIME_HEADER)
        if not self.simulated_times or declared is None:
            return None
        try:
            at = datetime.fromisoformat(declared)
            if at.tzinfo is None:
                raise ValueError("no time zone")
        except ValueError:
            raise Refused(self.page("message", 400, title="Not understood", heading="That answer was not understood",
                                    text=f"{SIMULATED_TIME_HEADER} is not a time with a time zone. Nothing was "
                                         "recorded.")) from None
        return at


# Each route's checks are FastAPI dependencies: they run before the route's body, in the order of
# its parameters (the link, then the declared time), and a refusal is raised as the page that
# answers instead (``Refused``, turned back into that page by the app's handler).

def _link(action: Action) -> Callable[[str, Request], Awaitable[Checked]]:
    async def check(token: str, request: Request) -> Checked:
        pages: Pages = request.app.state.pages
        return await run_in_threadpool(pages.claim_for, token, action)

    return check


_page_link = _link("page")


async def _shown_page(token: str, request: Request, saved: int | None = None) -> tuple[Checked, int | None]:
    """The invitation page's link, with ``?saved=`` (the paper just saved) validated first, as
    the route's query parameter is: a malformed one is answered 422 before the link is checked."""
    return await _page_link(token, request), saved


async def _answered_at(request: Request) -> datetime | None:
    pages: Pages = request.app.state.pages
    return pages.answered_at(request)


RatingLink = Annotated[Checked, Depends(_link("rate"))]
"""A rating link (``/r/``): its claim and invitation, or the page that refuses it."""
PageLink = Annotated[Checked, Depends(_page_link)]
"""An invitation page's link (``/i/``, ``/thanks/``)."""
ShownPage = Annotated[tuple[Checked, int | None], Depends(_shown_page)]
"""The invitation page's link (``GET /i/``) and which paper was just saved."""
OptOutLink = Annotated[Checked, Depends(_link("optout"))]
"""An opt-out link (``/u/``)."""
AnsweredAt = Annotated[datetime | None, Depends(_answered_at)]
"""When the answer was given (:meth:`Pages.answered_at`)."""


async def refused(request: Request, exc: Refused) -> Response:
    """The page a dependency refused the request with."""
    return exc.response


def probe_link(signer: LinkSigner, limiter: RateLimiter) -> Callable[[str], Awaitable[JSONResponse]]:
    """``GET /healthz/link/{token}``: whether ``token`` is a probe link this server's keys verify.
    `revbench doctor` signs one with its own key: verified here, the links a flow signs will be too.
    It reads and records nothing, accepts no other kind of link, and the reason of a refusal names
    no secret (a key other than the server's reads "bad signature"). A verified link is rate-limited
    as every other route's is (a forged one costs one HMAC and no memory, as there)."""

    async def check(token: str) -> JSONResponse:
        try:
            claim = signer.verify(token)
        except BadToken as exc:
            return JSONResponse({"ok": False, "reason": exc.reason}, status_code=403)
        if not limiter.allow(token_digest(token)):
            return JSONResponse({"ok": False, "reason": "too many requests"}, status_code=429)
        if claim.action != "probe":
            return JSONResponse({"ok": False, "reason": "not a probe link"}, status_code=403)
        return JSONResponse({"ok": True})

    return check


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
MAX_FORM_FIELDS = 500
"""Most fields of the page's form: one per paper of an invitation."""


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


def store_gone(pages: Pages) -> Callable[[Request, SurveyStoreGone], Awaitable[Response]]:
    """The answer while the store's file is gone from its path (see ``StoreBase``): nothing was
    recorded, the person is asked to come back (the link stays good), and the curator reads the
    store's one line in the server's log (once a minute at most)."""

    async def handle(request: Request, exc: SurveyStoreGone) -> Response:
        now = time.monotonic()
        if now - pages.store_trouble_logged > 60:
            pages.store_trouble_logged = now
            log.error("%s", exc)
        response = pages.page("message", 503, title="Briefly unavailable", heading="The survey is briefly unavailable",
                              text="Nothing was recorded. Please try again in a few minutes; your link stays valid.")
        response.headers["Retry-After"] = "60"
        return response

    return handle


def create_app(settings: Settings, store: SurveyStore | None = None) -> FastAPI:
    """The survey app for ``settings`` (its signing keys, store and team)."""
    pages = Pages(settings, store)
    store, signer, scale, page = pages.store, pages.signer, pages.scale, pages.page
    css = read("survey/survey.css")
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        # A stopped server closes its threads' connections (they reopen on the next call): one left
        # to the garbage collector keeps the store's log open in this process.
        store.close_all()

    app = FastAPI(title="revbench survey", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan,
                  exception_handlers={SurveyStoreGone: store_gone(pages), Refused: refused})
    app.state.pages = pages
    # Before security_headers, so it runs inside it: the 413 page carries the headers too.
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES, refuse=pages.too_large)
    app.middleware("http")(security_headers)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        return JSONResponse({"ok": True})

    app.get("/healthz/link/{token}")(probe_link(signer, pages.limiter))

    @app.get("/static/survey.css")
    async def stylesheet() -> Response:
        return Response(css, media_type="text/css", headers={"Cache-Control": "public, max-age=3600"})

    @app.get("/r/{token}")
    async def confirm_page(token: str, got: RatingLink) -> Response:
        # Opening a rating link records nothing (a scanner opens it too): it shows what one
        # press of Confirm will save.
        claim, inv = got
        index = [p["paper_id"] for p in inv["papers"]].index(claim.paper) + 1
        level = next(lv for lv in scale["levels"] if lv["rating"] == claim.rating)
        current = await run_in_threadpool(store.current, claim.invitation)
        return page("confirm", title="Confirm your answer", token=token, paper=inv["papers"][index - 1], level=level,
                    question=scale["question"], answered=claim.paper in current, current=current.get(claim.paper),
                    labels={lv["rating"]: lv["label"] for lv in scale["levels"]},
                    page_url=f"/i/{pages.page_token(claim.invitation)}#paper-{index}")

    @app.post("/r/{token}")
    async def rate(token: str, got: RatingLink, at: AnsweredAt) -> Response:
        claim, inv = got
        await run_in_threadpool(store.record_click, claim.invitation, claim.paper, claim.rating, token_digest(token), at)
        index = [p["paper_id"] for p in inv["papers"]].index(claim.paper) + 1
        return RedirectResponse(f"/i/{pages.page_token(claim.invitation)}?saved={index}#paper-{index}", status_code=303)

    @app.get("/i/{token}")
    async def show(token: str, shown: ShownPage) -> Response:
        (claim, inv), saved = shown
        current = await run_in_threadpool(store.current, claim.invitation)
        papers = [{**p, "answer": current.get(p["paper_id"]), "skipped": p["paper_id"] in current and current[p["paper_id"]] is None}
                  for p in inv["papers"]]
        saved_title = papers[saved - 1]["title"] if saved and 1 <= saved <= len(papers) else None
        return page("page", title="Reviewer-expertise survey", token=token, papers=papers, levels=scale["levels"],
                    question=scale["question"], saved=saved_title, optout_token=signer.sign(Claim(claim.invitation, "optout")))

    @app.post("/i/{token}")
    async def submit(token: str, request: Request, got: PageLink, at: AnsweredAt) -> Response:
        claim, inv = got
        try:
            items = (await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)).multi_items()
        except HTTPException:  # Starlette's refusal of a file or too many fields: no form of ours
            items = [("", "")]  # refused below, as any field not ours is
        ids = {p["paper_id"] for p in inv["papers"]}
        answers: dict[str, int | None] = {}
        for key, value in items:
            pid = key.removeprefix("answer-")
            if not key.startswith("answer-") or pid not in ids or value not in ("1", "2", "3", "4", "5", "skip"):
                return page("message", 400, title="Not understood", heading="That answer was not understood",
                            text="Please go back and choose one of the levels, or skip the paper. Nothing was recorded.")
            answers[pid] = None if value == "skip" else int(str(value))
        await run_in_threadpool(store.record_answers, claim.invitation, answers, at)
        return RedirectResponse(f"/thanks/{token}", status_code=303)

    @app.get("/thanks/{token}")
    async def thanks(token: str, got: PageLink) -> Response:
        claim, inv = got
        current = await run_in_threadpool(store.current, claim.invitation)
        skipped = sum(1 for v in current.values() if v is None)
        return page("thanks", title="Thank you", token=token, answered=len(current) - skipped, skipped=skipped,
                    total=len(inv["papers"]))

    @app.get("/u/{token}")
    async def optout_page(token: str, _got: OptOutLink) -> Response:
        return page("optout", title="Stop these emails", token=token, done=False)

    @app.post("/u/{token}")
    async def optout(token: str, request: Request, got: OptOutLink, at: AnsweredAt) -> Response:
        claim, _inv = got
        body = (await request.body()).decode(errors="replace")
        source = "one-click" if "List-Unsubscribe=One-Click" in body else "link"
        await run_in_threadpool(store.opt_out, claim.invitation, source, at)
        return page("optout", title="You will not be contacted again", token=token, done=True)

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
