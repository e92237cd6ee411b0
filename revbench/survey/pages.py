"""What every route of the survey server shares (``revbench.survey.server`` keeps one on its app's
state): the link signer, the survey store, the per-link rate limit and the page templates, and
:class:`Refused`, the page a route's checks answer instead of it."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from revbench.settings import Settings
from revbench.survey import SIMULATED_TIME_HEADER
from revbench.survey.tokens import BadToken, Claim, LinkSigner, token_digest
from revbench.templates import bars_scale, read, render
from revbench.warehouse.store import SurveyStore


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
    """What every route shares: the signer, the store, the rate limit, the page templates and the
    stylesheet."""

    def __init__(self, settings: Settings, store: SurveyStore | None = None):
        sv = settings.survey
        self.team = sv.team
        self.signer = LinkSigner.from_settings(sv)
        self.store = store or SurveyStore(settings.survey_store_path)
        self.limiter = RateLimiter(sv.rate_limit_per_minute)
        self.scale = bars_scale()
        self.css = read("survey/survey.css")
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
