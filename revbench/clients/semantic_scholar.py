"""Semantic Scholar Graph API: paper batches by arXiv id, author publication histories.

Pacing follows the documented rates (https://www.semanticscholar.org/product/api): 1 request per
second with an API key; without one, requests share a pool with every unauthenticated user, which
promises no rate, so we keep to the older documented 100 requests per 5 minutes (3 s). The public
API answers 429 without Retry-After when the pool is busy: the client then slows down (adaptive
pacing, see ``AdaptivePacer``) and keeps going instead of failing.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx

from revbench.clients.bounded import read_httpx
from revbench.retry import AdaptivePacer, Breaker, TransientError, call_with_retries, classify_status, send_through_429s
from revbench.settings import HttpSettings, SemanticScholarSettings

PAPER_FIELDS = "paperId,externalIds,title,year,authors"
AUTHOR_PAPER_FIELDS = "paperId,externalIds,title,abstract,year,publicationDate,authors"
log = logging.getLogger("revbench.clients.s2")


def error_text(body: bytes) -> str | None:
    """The service's own explanation in an error answer (``{"error": ...}`` or ``{"message": ...}``)."""
    try:
        parsed = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if isinstance(parsed, dict):
        text = parsed.get("error") or parsed.get("message")
        if isinstance(text, str) and text.strip():
            return " ".join(text.split())[:300]
    return None


def request_headers(settings: SemanticScholarSettings, http: HttpSettings) -> dict[str, str]:
    """What every request to Semantic Scholar carries: our user agent, and the API key when one is set."""
    headers = {"user-agent": http.user_agent}
    if settings.api_key is not None:
        headers["x-api-key"] = settings.api_key.get_secret_value()
    return headers


class SemanticScholarClient:
    """Thin typed client; every call honours the pace, retries and the API key."""

    def __init__(self, settings: SemanticScholarSettings, http: HttpSettings, client: httpx.Client | None = None):
        self.settings = settings
        self.http = http
        self._client = client or httpx.Client(
            base_url=settings.base_url.rstrip("/"), timeout=http.timeout_seconds, headers=request_headers(settings, http)
        )
        floor = settings.delay_seconds if settings.api_key is not None else settings.keyless_delay_seconds
        self.pacer = AdaptivePacer(floor, settings.throttle_max_delay_seconds, settings.throttle_recovery_seconds)
        self.requests_made = 0
        self.throttled = 0
        self.breaker = Breaker("Semantic Scholar", settings.base_url, http.breaker_failures)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        def send() -> tuple[httpx.Response, bytes]:
            self.requests_made += 1
            try:
                resp = self._client.send(self._client.build_request(method, path, **kwargs), stream=True)
                try:
                    return resp, read_httpx(resp, self.http.max_response_bytes, "Semantic Scholar")
                finally:
                    resp.close()
            except httpx.TimeoutException as exc:
                raise TransientError(f"S2 timeout: {exc}", kind="timeout") from exc
            except httpx.TransportError as exc:
                raise TransientError(f"S2 transport: {exc}", kind="transport") from exc

        def throttled(slowed: bool) -> None:
            self.throttled += 1
            if slowed:
                log.info("S2 answered 429 without Retry-After; %.1f s between requests now", self.pacer.interval)

        resp, content = send_through_429s(send, lambda r: (r[0].status_code, r[0].headers), self.pacer,
                                          self.settings.throttle_patience_seconds, self.http.retry_after_max_seconds,
                                          f"S2 {path}", throttled)
        classify_status(resp.status_code, resp.headers, f"S2 {path}", detail=error_text(content))
        try:
            return json.loads(content)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TransientError(f"S2 answered unreadable JSON: {exc}", kind="malformed") from exc

    def paper_batch(self, arxiv_ids: list[str], fields: str = PAPER_FIELDS) -> list[dict[str, Any] | None]:
        """Look up to ``batch_size`` papers by ``ARXIV:<id>``; None where S2 has no record."""
        if len(arxiv_ids) > self.settings.batch_size:
            raise ValueError(f"at most {self.settings.batch_size} ids per batch")

        def once() -> list[dict[str, Any] | None]:
            body = self._json(
                "POST", "/paper/batch", params={"fields": fields}, json={"ids": [f"ARXIV:{a}" for a in arxiv_ids]}
            )
            if not isinstance(body, list) or len(body) != len(arxiv_ids):
                raise TransientError("S2 batch answer does not match the ids sent", kind="malformed")
            return body

        return call_with_retries(once, self.http, f"S2 batch of {len(arxiv_ids)}", breaker=self.breaker)

    def author_papers(self, author_id: str, fields: str = AUTHOR_PAPER_FIELDS, limit: int = 1000) -> list[dict[str, Any]]:
        """An author's whole publication list, following ``next`` offsets. A ``next`` that does not
        move past the offset just asked (or is not an offset) ends it with a ``TransientError``
        naming the endpoint and the offset: the list is left whole for another run, never
        followed round in a loop nor kept cut short."""
        out: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            start = offset

            def once() -> dict[str, Any]:
                body = self._json(
                    "GET", f"/author/{author_id}/papers", params={"fields": fields, "limit": limit, "offset": start}
                )
                if isinstance(body, dict) and "data" not in body and "offset" in body and "error" not in body:
                    return {**body, "data": []}  # S2 leaves out "data" on an empty page: {"total": 0, "offset": 0}
                if not isinstance(body, dict) or not isinstance(body.get("data"), list):
                    raise TransientError("S2 author papers answer lacks 'data'", kind="malformed")
                return body

            body = call_with_retries(once, self.http, f"S2 author {author_id}", breaker=self.breaker)
            out.extend(body["data"])
            offset = body.get("next")
            if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int) or offset <= start):
                raise TransientError(f"S2 /author/{author_id}/papers: 'next' {offset!r} after offset {start} does not advance; "
                                     f"stopped paging after {len(out)} papers", kind="paging_stuck")
        return out

    def close(self) -> None:
        self._client.close()
