"""The survey server's routes, as module-level routers that ``revbench.survey.server.create_app``
includes: health checks, rating links (``/r/``), the invitation page (``/i/``, ``/thanks/``, its
stylesheet) and opt-out (``/u/``).

A handler closes over nothing: what it shares with the others (the :class:`Pages` that
``create_app`` keeps on ``app.state``) and each check of its link reach it as FastAPI
dependencies. Each check runs before the route's body, in the order of its parameters (the link,
then the declared time), and a refusal is raised as the page that answers instead (``Refused``,
turned back into that page by the app's handler)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from revbench.survey.pages import Checked, Pages
from revbench.survey.tokens import Action, BadToken, Claim, token_digest

MAX_FORM_FIELDS = 500
"""Most fields of the page's form: one per paper of an invitation."""


async def _pages(request: Request) -> Pages:
    """The app's shared :class:`Pages` (``create_app`` keeps it on ``app.state``)."""
    pages: Pages = request.app.state.pages
    return pages


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


SharedPages = Annotated[Pages, Depends(_pages)]
"""The signer, store, rate limit and templates every route shares."""
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


health = APIRouter()
"""``/healthz`` and ``/healthz/link/{token}``: JSON for checks, touching no store."""


@health.get("/healthz")
async def healthz() -> JSONResponse:
    return JSONResponse({"ok": True})


@health.get("/healthz/link/{token}")
async def probe_link(token: str, pages: SharedPages) -> JSONResponse:
    """Whether ``token`` is a probe link this server's keys verify. `revbench doctor` signs one
    with its own key: verified here, the links a flow signs will be too. It reads and records
    nothing, accepts no other kind of link, and the reason of a refusal names no secret (a key
    other than the server's reads "bad signature"). A verified link is rate-limited as every other
    route's is (a forged one costs one HMAC and no memory, as there)."""
    try:
        claim = pages.signer.verify(token)
    except BadToken as exc:
        return JSONResponse({"ok": False, "reason": exc.reason}, status_code=403)
    if not pages.limiter.allow(token_digest(token)):
        return JSONResponse({"ok": False, "reason": "too many requests"}, status_code=429)
    if claim.action != "probe":
        return JSONResponse({"ok": False, "reason": "not a probe link"}, status_code=403)
    return JSONResponse({"ok": True})


rating = APIRouter()
"""``/r/{token}``: a rating link, confirmed by a POST."""


@rating.get("/r/{token}")
async def confirm_page(token: str, got: RatingLink, pages: SharedPages) -> Response:
    # Opening a rating link records nothing (a scanner opens it too): it shows what one
    # press of Confirm will save.
    claim, inv = got
    scale = pages.scale
    index = [p["paper_id"] for p in inv["papers"]].index(claim.paper) + 1
    level = next(lv for lv in scale["levels"] if lv["rating"] == claim.rating)
    current = await run_in_threadpool(pages.store.current, claim.invitation)
    return pages.page("confirm", title="Confirm your answer", token=token, paper=inv["papers"][index - 1], level=level,
                      question=scale["question"], answered=claim.paper in current, current=current.get(claim.paper),
                      labels={lv["rating"]: lv["label"] for lv in scale["levels"]},
                      page_url=f"/i/{pages.page_token(claim.invitation)}#paper-{index}")


@rating.post("/r/{token}")
async def rate(token: str, got: RatingLink, at: AnsweredAt, pages: SharedPages) -> Response:
    claim, inv = got
    await run_in_threadpool(pages.store.record_click, claim.invitation, claim.paper, claim.rating, token_digest(token), at)
    index = [p["paper_id"] for p in inv["papers"]].index(claim.paper) + 1
    return RedirectResponse(f"/i/{pages.page_token(claim.invitation)}?saved={index}#paper-{index}", status_code=303)


survey_page = APIRouter()
"""``/i/{token}`` (the invitation's page and its form), ``/thanks/{token}`` and the stylesheet."""


@survey_page.get("/static/survey.css")
async def stylesheet(pages: SharedPages) -> Response:
    return Response(pages.css, media_type="text/css", headers={"Cache-Control": "public, max-age=3600"})


@survey_page.get("/i/{token}")
async def show(token: str, shown: ShownPage, pages: SharedPages) -> Response:
    (claim, inv), saved = shown
    current = await run_in_threadpool(pages.store.current, claim.invitation)
    papers = [{**p, "answer": current.get(p["paper_id"]), "skipped": p["paper_id"] in current and current[p["paper_id"]] is None}
              for p in inv["papers"]]
    saved_title = papers[saved - 1]["title"] if saved and 1 <= saved <= len(papers) else None
    return pages.page("page", title="Reviewer-expertise survey", token=token, papers=papers, levels=pages.scale["levels"],
                      question=pages.scale["question"], saved=saved_title,
                      optout_token=pages.signer.sign(Claim(claim.invitation, "optout")))


@survey_page.post("/i/{token}")
async def submit(token: str, request: Request, got: PageLink, at: AnsweredAt, pages: SharedPages) -> Response:
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
            return pages.page("message", 400, title="Not understood", heading="That answer was not understood",
                              text="Please go back and choose one of the levels, or skip the paper. Nothing was recorded.")
        answers[pid] = None if value == "skip" else int(str(value))
    await run_in_threadpool(pages.store.record_answers, claim.invitation, answers, at)
    return RedirectResponse(f"/thanks/{token}", status_code=303)


@survey_page.get("/thanks/{token}")
async def thanks(token: str, got: PageLink, pages: SharedPages) -> Response:
    claim, inv = got
    current = await run_in_threadpool(pages.store.current, claim.invitation)
    skipped = sum(1 for v in current.values() if v is None)
    return pages.page("thanks", title="Thank you", token=token, answered=len(current) - skipped, skipped=skipped,
                      total=len(inv["papers"]))


optout = APIRouter()
"""``/u/{token}``: the opt-out page and its one button (or a mail client's one-click POST)."""


@optout.get("/u/{token}")
async def optout_page(token: str, _got: OptOutLink, pages: SharedPages) -> Response:
    return pages.page("optout", title="Stop these emails", token=token, done=False)


@optout.post("/u/{token}")
async def opt_out(token: str, request: Request, got: OptOutLink, at: AnsweredAt, pages: SharedPages) -> Response:
    claim, _inv = got
    body = (await request.body()).decode(errors="replace")
    source = "one-click" if "List-Unsubscribe=One-Click" in body else "link"
    await run_in_threadpool(pages.store.opt_out, claim.invitation, source, at)
    return pages.page("optout", title="You will not be contacted again", token=token, done=True)


ROUTERS = (health, rating, survey_page, optout)
"""Every router of the survey app, in the order ``create_app`` includes them."""
