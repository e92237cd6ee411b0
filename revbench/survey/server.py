"""The survey web server: one-click ratings, the invitation page, opt-out.

Every path carries a signed token (``revbench.survey.tokens``); anything forged, tampered,
expired, foreign to the invitation or malformed gets a plain 403 page and records nothing. A
response is acknowledged only after its event is committed in the survey store. Pages work
without JavaScript (radio buttons in fieldsets, labelled), escape every text, and carry a
strict content security policy; no IP address or user agent is stored or logged.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from revbench.errors import UsageError
from revbench.settings import Settings
from revbench.survey.tokens import BadToken, Claim, LinkSigner, token_digest
from revbench.templates import bars_scale, read, render
from revbench.warehouse.survey_store import SurveyStore

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class RateLimiter:
    """At most ``limit`` requests per link in any 60 s (kept in memory, keyed by a token digest)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._hits: dict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            hits = self._hits[key]
            while hits and now - hits[0] > 60:
                hits.popleft()
            if len(hits) >= self.limit:
                return False
            hits.append(now)
            return True


class Pages:
    """What every route shares: the signer, the store, the rate limit and the page templates."""

    def __init__(self, settings: Settings, store: SurveyStore | None = None):
        sv = settings.survey
        self.team = sv.team
        self.signer = LinkSigner(sv.signing_key, sv.old_signing_keys, sv.link_max_age_days)
        self.store = store or SurveyStore(settings.survey_store_path)
        self.limiter = RateLimiter(sv.rate_limit_per_minute)
        self.scale = bars_scale()

    def page(self, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        html, _version = render(f"survey/{name}.html.j2", team=self.team, **ctx)
        return HTMLResponse(html, status_code=status)

    def refuse(self) -> HTMLResponse:
        return self.page("message", 403, title="Link not valid", heading="This link is not valid",
                         text="It may have expired, or been changed. Please use a link from your most recent email; "
                              "nothing was recorded.")

    def claim_for(self, token: str, *actions: str) -> tuple[Claim, dict[str, Any]] | HTMLResponse:
        """The token's claim and its invitation, or the page that refuses it (rate-limited,
        invalid, the wrong kind of link, an unknown invitation, or a paper not in it)."""
        if not self.limiter.allow(token_digest(token)):
            return self.page("message", 429, title="Too many requests", heading="Too many requests",
                             text="Please wait a minute and try again.")
        try:
            claim = self.signer.verify(token)
        except BadToken:
            return self.refuse()
        if claim.action not in actions:
            return self.refuse()
        inv = self.store.invitation(claim.invitation)
        if inv is None:
            return self.refuse()
        if claim.paper is not None and claim.paper not in {p["paper_id"] for p in inv["papers"]}:
            return self.refuse()
        return claim, inv

    async def checked(self, token: str, action: str) -> tuple[Claim, dict[str, Any]] | HTMLResponse:
        return await run_in_threadpool(self.claim_for, token, action)

    def page_token(self, invitation_id: str) -> str:
        return self.signer.sign(Claim(invitation_id, "page"))


def create_app(settings: Settings, store: SurveyStore | None = None) -> FastAPI:
    """The survey app for ``settings`` (its signing keys, store and team)."""
    pages = Pages(settings, store)
    store, signer, scale, page = pages.store, pages.signer, pages.scale, pages.page
    css = read("survey/survey.css")
    app = FastAPI(title="revbench survey", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def security(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        for k, v in SECURITY_HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        return JSONResponse({"ok": True})

    @app.get("/static/survey.css")
    async def stylesheet() -> Response:
        return Response(css, media_type="text/css", headers={"Cache-Control": "public, max-age=3600"})

    @app.get("/r/{token}")
    async def rate(token: str) -> Response:
        got = await pages.checked(token, "rate")
        if isinstance(got, HTMLResponse):
            return got
        claim, inv = got
        await run_in_threadpool(store.record_click, claim.invitation, claim.paper, claim.rating, token_digest(token))
        index = [p["paper_id"] for p in inv["papers"]].index(claim.paper) + 1
        return RedirectResponse(f"/i/{pages.page_token(claim.invitation)}?saved={index}#paper-{index}", status_code=303)

    @app.get("/i/{token}")
    async def show(token: str, saved: int | None = None) -> Response:
        got = await pages.checked(token, "page")
        if isinstance(got, HTMLResponse):
            return got
        claim, inv = got
        current = await run_in_threadpool(store.current, claim.invitation)
        papers = [{**p, "answer": current.get(p["paper_id"]), "skipped": p["paper_id"] in current and current[p["paper_id"]] is None}
                  for p in inv["papers"]]
        saved_title = papers[saved - 1]["title"] if saved and 1 <= saved <= len(papers) else None
        return page("page", title="Reviewer-expertise survey", token=token, papers=papers, levels=scale["levels"],
                    question=scale["question"], saved=saved_title, optout_token=signer.sign(Claim(claim.invitation, "optout")))

    @app.post("/i/{token}")
    async def submit(token: str, request: Request) -> Response:
        got = await pages.checked(token, "page")
        if isinstance(got, HTMLResponse):
            return got
        claim, inv = got
        form = await request.form()
        ids = {p["paper_id"] for p in inv["papers"]}
        answers: dict[str, int | None] = {}
        for key, value in form.multi_items():
            pid = key.removeprefix("answer-")
            if not key.startswith("answer-") or pid not in ids or value not in ("1", "2", "3", "4", "5", "skip"):
                return page("message", 400, title="Not understood", heading="That answer was not understood",
                            text="Please go back and choose one of the levels, or skip the paper. Nothing was recorded.")
            answers[pid] = None if value == "skip" else int(str(value))
        await run_in_threadpool(store.record_answers, claim.invitation, answers)
        return RedirectResponse(f"/thanks/{token}", status_code=303)

    @app.get("/thanks/{token}")
    async def thanks(token: str) -> Response:
        got = await pages.checked(token, "page")
        if isinstance(got, HTMLResponse):
            return got
        claim, inv = got
        current = await run_in_threadpool(store.current, claim.invitation)
        skipped = sum(1 for v in current.values() if v is None)
        return page("thanks", title="Thank you", token=token, answered=len(current) - skipped, skipped=skipped,
                    total=len(inv["papers"]))

    @app.get("/u/{token}")
    async def optout_page(token: str) -> Response:
        got = await pages.checked(token, "optout")
        if isinstance(got, HTMLResponse):
            return got
        return page("optout", title="Stop these emails", token=token, done=False)

    @app.post("/u/{token}")
    async def optout(token: str, request: Request) -> Response:
        got = await pages.checked(token, "optout")
        if isinstance(got, HTMLResponse):
            return got
        claim, _inv = got
        body = (await request.body()).decode(errors="replace")
        source = "one-click" if "List-Unsubscribe=One-Click" in body else "link"
        await run_in_threadpool(store.opt_out, claim.invitation, source)
        return page("optout", title="You will not be contacted again", token=token, done=True)

    return app


def serve(settings: Settings, host: str, port: int, announce: Callable[[str], None] = lambda line: None) -> None:
    """Run the survey server until stopped (no access log: no IP address is written anywhere).
    ``announce`` hears where it listens once the key is checked and the port is taken."""
    import socket

    import uvicorn

    app = create_app(settings)
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
    uvicorn.Server(uvicorn.Config(app, access_log=False, log_level="warning")).run(sockets=[sock])
