"""Semantic Scholar Graph API: paper batches by arXiv id, author publication histories, a paper's
references and citations (parsed by ``revbench.clients.s2_graph``).

Pacing follows the documented rates (https://www.semanticscholar.org/product/api): 1 request per
second with an API key; without one, requests share a pool with every unauthenticated user, which
promises no rate, so we keep to the older documented 100 requests per 5 minutes (3 s). The public
API answers 429 without Retry-After when the pool is busy: the client then slows down (adaptive
pacing, see ``AdaptivePacer``) and keeps going instead of failing.

Every answer's strings are made valid UTF-8 as they are parsed (``revbench.text_clean``: a lone
surrogate becomes U+FFFD, counted in ``cleaned``), and every list S2 can grow is read up to its cap
(``s2.max_*``): paging stops there, so the rest is never fetched nor held, and each cut list is
named in ``truncated`` and logged.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from revbench.clients.bounded import Cut, cut_list, send_streamed
from revbench.health import Probe, ProbeContext, http_client, ms, read, unreachable
from revbench.retry import AdaptivePacer, Breaker, TransientError, call_with_retries, classify_status, send_through_429s
from revbench.settings import HttpSettings, SemanticScholarSettings
from revbench.text_clean import parse_json

PAPER_FIELDS = "paperId,externalIds,title,year,authors"
AUTHOR_PAPER_FIELDS = "paperId,externalIds,title,abstract,year,publicationDate,authors"
# The cited (or citing) paper's fields go unprefixed beside the edge's own: S2 answers them under
# ``citedPaper`` (``citingPaper``), as the recorded references cassettes show.
REFERENCE_FIELDS = "contexts,intents,isInfluential,paperId,title,year,externalIds"
GRAPH_PAPER_FIELDS = "paperId,externalIds,publicationTypes,fieldsOfStudy,s2FieldsOfStudy"
"""A paper's ids, types and fields of study, asked through ``paper_batch`` apart from ingest's
``PAPER_FIELDS``: ingest hashes the whole answer (``s2_papers.record_hash``), so more fields there
would change what it stores."""
log = logging.getLogger("revbench.clients.s2")
T = TypeVar("T")


def error_text(body: bytes) -> str | None:
    """The service's own explanation in an error answer (``{"error": ...}`` or ``{"message": ...}``)."""
    try:
        parsed = parse_json(body)[0]
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
        """Requests sent, each counted once: its first send."""
        self.retries = 0
        """Sends of a request again: after a failed attempt (a timeout, a 5xx, a bad answer) or a 429."""
        self.throttled = 0
        self.breaker = Breaker("Semantic Scholar", settings.base_url, http.breaker_failures)
        self.cleaned = 0
        """Characters of answers that UTF-8 cannot hold (lone surrogates), replaced by U+FFFD."""
        self.truncated: list[Cut] = []
        """The lists cut at their cap (``s2.max_*``), in the order they were."""
        self._count = threading.Lock()  # callers share one client across threads (s2.connections)

    def _json(self, method: str, path: str, *, again: bool = False, **kwargs: Any) -> Any:
        """The JSON answer to one attempt at a request (``again``: an attempt before it failed)."""
        resend = again

        def send() -> tuple[httpx.Response, bytes]:
            nonlocal resend
            with self._count:
                if resend:
                    self.retries += 1
                else:
                    self.requests_made += 1
            resend = True  # a send after a 429 is the same request again
            return send_streamed(self._client, self._client.build_request(method, path, **kwargs),
                                 self.http.max_response_bytes, "Semantic Scholar", f"S2 {path}")

        def throttled(slowed: bool) -> None:
            with self._count:
                self.throttled += 1
            if slowed:
                log.info("S2 answered 429 without Retry-After; %.1f s between requests now", self.pacer.interval)

        resp, content = send_through_429s(send, lambda r: (r[0].status_code, r[0].headers), self.pacer,
                                          self.settings.throttle_patience_seconds, self.http.retry_after_max_seconds,
                                          f"S2 {path}", throttled)
        classify_status(resp.status_code, resp.headers, f"S2 {path}", detail=error_text(content))
        try:
            body, replaced = parse_json(content)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TransientError(f"S2 answered unreadable JSON: {exc}", kind="malformed") from exc
        if replaced:
            with self._count:
                self.cleaned += replaced
            log.info("S2 %s: %d characters UTF-8 cannot hold (lone surrogates) replaced by U+FFFD", path, replaced)
        return body

    def _cut(self, source: str, of: str, kept: int, dropped: int | None, setting: str) -> None:
        cut = Cut(source, of, kept, dropped)
        with self._count:
            self.truncated.append(cut)
        log.warning("%s; the rest is not read (REVBENCH_S2__%s)", cut.line(), setting.upper())

    def _authors_capped(self, papers: list[Any], what: str) -> None:
        """Each paper's ``authors`` cut to ``max_authors_per_paper``, named when it was."""
        most = self.settings.max_authors_per_paper
        for paper in papers:
            if isinstance(paper, dict) and (dropped := cut_list(paper, "authors", most)):
                self._cut("s2", f"authors of {paper.get('paperId') or what}", most, dropped, "max_authors_per_paper")

    def _retried(self, once: Callable[[bool], T], what: str) -> T:
        """``once(again)`` under the retry policy, ``again`` true for every attempt after the first."""
        attempts = itertools.count()
        return call_with_retries(lambda: once(next(attempts) > 0), self.http, what, breaker=self.breaker)

    def paper_batch(self, arxiv_ids: list[str], fields: str = PAPER_FIELDS,
                    prefix: str = "ARXIV:") -> list[dict[str, Any] | None]:
        """Look up to ``batch_size`` papers by ``ARXIV:<id>`` (``prefix=""``: ids as S2 takes them,
        e.g. its own paper ids); None where S2 has no record."""
        if len(arxiv_ids) > self.settings.batch_size:
            raise ValueError(f"at most {self.settings.batch_size} ids per batch")

        def once(again: bool) -> list[dict[str, Any] | None]:
            body = self._json("POST", "/paper/batch", again=again, params={"fields": fields},
                              json={"ids": [f"{prefix}{a}" for a in arxiv_ids]})
            if not isinstance(body, list) or len(body) != len(arxiv_ids):
                raise TransientError("S2 batch answer does not match the ids sent", kind="malformed")
            self._authors_capped(body, "a batch paper")
            return body

        return self._retried(once, f"S2 batch of {len(arxiv_ids)}")

    def author_papers(self, author_id: str, fields: str = AUTHOR_PAPER_FIELDS, limit: int = 1000) -> list[dict[str, Any]]:
        """An author's publication list, following ``next`` offsets (see ``_pages``), up to
        ``max_papers_per_author`` papers."""
        papers = self._pages(f"/author/{author_id}", "papers", {"fields": fields, "limit": limit}, f"S2 author {author_id}",
                             self.settings.max_papers_per_author, f"papers of author {author_id}", "max_papers_per_author")
        self._authors_capped(papers, f"a paper of author {author_id}")
        return papers

    def references(self, paper_id: str, with_intent_contexts: bool = False, limit: int = 1000) -> list[Any]:
        """Every reference of one paper, in S2's order over all its pages (``paper_id`` as S2 takes
        it: an S2 id, ``ARXIV:<id>``, ``CorpusId:<n>``, a DOI). Each item is S2's edge: contexts,
        intents, isInfluential and ``citedPaper``, kept when its ``paperId`` is null (S2 still gives
        its title); ``contextsWithIntent`` too when asked. An unknown paper is a ``PermanentError``
        carrying S2's own text (HTTP 404). At most ``max_references_per_paper`` (the first ones)."""
        fields = REFERENCE_FIELDS + (",contextsWithIntent" if with_intent_contexts else "")
        return self._pages(f"/paper/{quote(paper_id, safe='/:')}", "references", {"fields": fields, "limit": limit},
                           f"S2 references of {paper_id}", self.settings.max_references_per_paper,
                           f"references of {paper_id}", "max_references_per_paper")

    def citations(self, paper_id: str, limit: int = 1000) -> list[Any]:
        """Every citation of one paper (the edge, with ``citingPaper``), over all its pages, up to
        ``max_references_per_paper``."""
        return self._pages(f"/paper/{quote(paper_id, safe='/:')}", "citations", {"fields": REFERENCE_FIELDS, "limit": limit},
                           f"S2 citations of {paper_id}", self.settings.max_references_per_paper,
                           f"citations of {paper_id}", "max_references_per_paper")

    def _pages(self, base: str, noun: str, params: dict[str, Any], what: str, most: int, of: str,
               setting: str) -> list[Any]:
        """The items of the list at ``{base}/{noun}``, following ``next`` offsets from 0. A page
        without ``data`` (S2 leaves it out when there is nothing: ``{"total": 0, "offset": 0}``) or
        with none in it ends the list. A ``next`` that does not move past the offset just asked (or
        is not an offset) ends it with a ``TransientError`` naming the endpoint and the offset: the
        list is left whole for another run, never followed round in a loop nor kept cut short.
        Paging stops at ``most`` items (no page asks past it); a list that had more is named in
        ``truncated`` as ``of`` (``setting`` raises the cap)."""
        path = f"{base}/{noun}"
        out: list[Any] = []
        offset: int | None = 0
        while offset is not None:
            start = offset
            # The last page asks only for what the cap leaves, so nothing past it is fetched.
            asked = {**params, "offset": start, "limit": max(1, min(params["limit"], most - len(out)))}

            def once(again: bool) -> dict[str, Any]:
                body = self._json("GET", path, again=again, params=asked)
                if isinstance(body, dict) and "data" not in body and "offset" in body and "error" not in body:
                    return {**body, "data": []}
                if not isinstance(body, dict) or not isinstance(body.get("data"), list):
                    raise TransientError(f"S2 {path} answer lacks 'data'", kind="malformed")
                return body

            body = self._retried(once, what)
            out.extend(body["data"])
            offset = body.get("next") if body["data"] else None
            if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int) or offset <= start):
                raise TransientError(f"S2 {path}: 'next' {offset!r} after offset {start} does not advance; "
                                     f"stopped paging after {len(out)} {noun}", kind="paging_stuck")
            if len(out) >= most and (offset is not None or len(out) > most):
                # A page longer than asked is cut too; what S2 still lists past the cap is never asked.
                self._cut("s2", of, most, len(out) - most if offset is None else None, setting)
                del out[most:]
                break
        return out

    def close(self) -> None:
        self._client.close()


# What `revbench doctor` asks this service (registered in revbench/services.py).

S2_PROBE_ID = "ARXIV:1706.03762"
"""The paper the Semantic Scholar probe looks up ("Attention Is All You Need"; an unknown id
answers null, which is as good an answer)."""


def probe_s2(ctx: ProbeContext) -> Probe:
    """A one-paper ``POST /paper/batch`` with the key when one is set; says the pace it implies."""
    settings, clock = ctx.settings, ctx.clock
    s2 = settings.s2
    base = s2.base_url.rstrip("/")
    key = s2.api_key is not None
    try:
        with http_client(settings, clock, headers=request_headers(s2, settings.http)) as client:
            t0 = time.monotonic()
            resp = read(client, "POST", f"{base}/paper/batch", "/paper/batch", params={"fields": "paperId"},
                        json={"ids": [S2_PROBE_ID]}, timeout=clock.left())
            latency = ms(t0)
    except httpx.HTTPError as exc:
        return unreachable("s2", base, exc, clock, "REVBENCH_S2__BASE_URL")
    said = error_text(resp.content)
    said = f" ({said})" if said else ""
    if resp.status_code in (401, 403):
        if key:
            return Probe("s2", base, "fail", f"the API key was refused: HTTP {resp.status_code}{said}", latency,
                         fix="check REVBENCH_S2__API_KEY (or leave it empty for the slower keyless pool)")
        return Probe("s2", base, "fail", f"HTTP {resp.status_code}{said} without a key", latency,
                     fix="set REVBENCH_S2__API_KEY, or check REVBENCH_S2__BASE_URL")
    if resp.status_code == 429:
        return Probe("s2", base, "warn", f"answers, but rate-limited right now (HTTP 429){said}; runs slow down and wait",
                     latency, fix="" if key else "an API key (REVBENCH_S2__API_KEY) gets a rate of its own")
    try:
        body = resp.json()
    except ValueError:
        body = None
    if resp.status_code != 200 or not isinstance(body, list) or len(body) != 1:
        return Probe("s2", base, "fail", f"/paper/batch answered HTTP {resp.status_code}{said}, not a one-paper batch",
                     latency, fix="set REVBENCH_S2__BASE_URL to the Graph API root (https://api.semanticscholar.org/graph/v1)")
    if key:
        return Probe("s2", base, "ok", f"key accepted: runs {_pace(s2.delay_seconds)}", latency)
    return Probe("s2", base, "ok", f"no key: the shared keyless pool; runs {_pace(s2.keyless_delay_seconds)}", latency)


def _pace(seconds: float) -> str:
    return f"send one request per {seconds:g} s" if seconds > 0 else "send requests without a pause"
