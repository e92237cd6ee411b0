"""Semantic Scholar Graph API: paper batches by arXiv id, author publication histories."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

from revbench.retry import Breaker, TransientError, call_with_retries, classify_status
from revbench.settings import HttpSettings, SemanticScholarSettings

PAPER_FIELDS = "paperId,externalIds,title,year,authors"
AUTHOR_PAPER_FIELDS = "paperId,externalIds,title,abstract,year,publicationDate,authors"


class SemanticScholarClient:
    """Thin typed client; every call honours the delay, retries and the API key."""

    def __init__(self, settings: SemanticScholarSettings, http: HttpSettings, client: httpx.Client | None = None):
        self.settings = settings
        self.http = http
        headers = {"user-agent": http.user_agent}
        if settings.api_key is not None:
            headers["x-api-key"] = settings.api_key.get_secret_value()
        self._client = client or httpx.Client(
            base_url=settings.base_url.rstrip("/"), timeout=http.timeout_seconds, headers=headers
        )
        self._lock = threading.Lock()
        self._last: float | None = None
        self.requests_made = 0
        self.breaker = Breaker("Semantic Scholar", settings.base_url, http.breaker_failures)

    def _pace(self) -> None:
        with self._lock:
            if self._last is not None:
                wait = self.settings.delay_seconds - (time.monotonic() - self._last)
                if wait > 0:
                    time.sleep(wait)
            self._last = time.monotonic()

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        self._pace()
        self.requests_made += 1
        try:
            resp = self._client.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise TransientError(f"S2 timeout: {exc}", kind="timeout") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"S2 transport: {exc}", kind="transport") from exc
        classify_status(resp.status_code, resp.headers, f"S2 {path}")
        try:
            return json.loads(resp.content)
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
        """An author's whole publication list, following ``next`` offsets."""
        out: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            start = offset

            def once() -> dict[str, Any]:
                body = self._json(
                    "GET", f"/author/{author_id}/papers", params={"fields": fields, "limit": limit, "offset": start}
                )
                if not isinstance(body, dict) or not isinstance(body.get("data"), list):
                    raise TransientError("S2 author papers answer lacks 'data'", kind="malformed")
                return body

            body = call_with_retries(once, self.http, f"S2 author {author_id}", breaker=self.breaker)
            out.extend(body["data"])
            offset = body.get("next")
        return out

    def close(self) -> None:
        self._client.close()
