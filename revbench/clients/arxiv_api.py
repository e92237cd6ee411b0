"""arXiv export API through the ``arxiv`` package, with our retry policy and timeouts.

``arxiv.Client`` 4.x has no request timeout, does not honour Retry-After and only warns on a
malformed feed, so the one method that fetches a page is replaced; its URL building, result
parsing and Result type stay the package's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import unquote_plus, urlencode

import arxiv
import requests
from arxiv import _feed  # the package's own Atom parser; Result objects come from it
from lxml import etree

from revbench.clients.bounded import read_requests
from revbench.health import Probe, ProbeContext, cap_session, cert_problem, ms, root_cause, short
from revbench.retry import (
    AdaptivePacer,
    Breaker,
    PermanentError,
    RateLimited,
    TransientError,
    call_with_retries,
    classify_status,
    send_through_429s,
)
from revbench.settings import ArxivSettings, HttpSettings

log = logging.getLogger("revbench.clients.arxiv")
_STRICT = etree.XMLParser(resolve_entities=False, no_network=True, recover=False)
_NS = {"atom": "http://www.w3.org/2005/Atom"}
API_CEILING = 30000
"""The most results arXiv's API pages through for one query (its documented limit)."""


@dataclass(frozen=True)
class ArxivRecord:
    """One search result: the latest version of a paper."""

    arxiv_id: str
    version: int
    title: str
    abstract: str
    authors: list[str]
    primary_category: str
    categories: list[str]
    published: datetime | None
    updated: datetime
    comment: str | None
    journal_ref: str | None = None
    doi: str | None = None
    author_affiliations: list[list[str]] = field(default_factory=list)
    """Each author's ``arxiv:affiliation`` elements, parallel to ``authors``."""


@dataclass(frozen=True)
class ArxivPage:
    """One answer of the query endpoint: its records and the total the API reported."""

    records: list[ArxivRecord]
    total: int


def error_feed_text(root: etree._Element) -> str | None:
    """The summary of an Atom error entry (arXiv answers a bad query with one, its id under
    ``/api/errors``), as one line; None for an ordinary feed."""
    for entry in root.iterfind("atom:entry", _NS):
        if "/api/errors" in (entry.findtext("atom:id", "", _NS) or ""):
            summary = entry.findtext("atom:summary", "", _NS) or entry.findtext("atom:title", "", _NS) or "error"
            return " ".join(summary.split())
    return None


def _error_text(content: bytes) -> str | None:
    try:
        return error_feed_text(etree.fromstring(content, _STRICT))
    except etree.XMLSyntaxError:
        return None


def split_short_id(short_id: str) -> tuple[str, int]:
    """``2405.01234v2`` -> (``2405.01234``, 2); an id without version is version 1."""
    head, sep, tail = short_id.rpartition("v")
    if sep and tail.isdigit() and head:
        return head, int(tail)
    return short_id, 1


def query_for(category: str, start: datetime, end: datetime) -> str:
    """The arXiv query for a category over a last-revision-date window (minutes, inclusive)."""
    fmt = "%Y%m%d%H%M"
    return f"cat:{category} AND lastUpdatedDate:[{start.strftime(fmt)} TO {end.strftime(fmt)}]"


class ArxivClient(arxiv.Client):
    """``arxiv.Client`` pointed at ``settings.base_url`` with retries, timeouts and the delay."""

    def __init__(self, settings: ArxivSettings, http: HttpSettings):
        super().__init__(page_size=settings.page_size, delay_seconds=settings.delay_seconds, num_retries=0)
        self.query_url_format = settings.base_url.rstrip("?") + "?{}"
        self.settings = settings
        self.http = http
        # arXiv's 3 s is the fastest we go; its 429s slow us down as Semantic Scholar's do.
        self.pacer = AdaptivePacer(
            settings.delay_seconds, settings.throttle_max_delay_seconds, settings.throttle_recovery_seconds
        )
        self.requests_made = 0
        self.throttled = 0
        self.breaker = Breaker("arXiv API", settings.base_url, http.breaker_failures)

    def _fetch_once(self, url: str, first_page: bool) -> _feed.ParsedFeed:
        def send() -> requests.Response:
            self.requests_made += 1
            try:
                resp = self._session.get(url, headers={"user-agent": self.http.user_agent}, timeout=self.http.timeout_seconds,
                                         stream=True)
                read_requests(resp, self.http.max_response_bytes, "arXiv API")
                return resp
            except requests.RequestException as exc:  # timeouts, resets, bodies cut short
                raise TransientError(f"arXiv request failed: {exc}", kind="timeout") from exc

        def throttled(slowed: bool) -> None:
            self.throttled += 1
            if slowed:
                log.info("arXiv answered 429 without Retry-After; %.1f s between requests now", self.pacer.interval)

        resp = send_through_429s(send, lambda r: (r.status_code, r.headers), self.pacer, self.settings.throttle_patience_seconds,
                                 self.http.retry_after_max_seconds, "arXiv", throttled)
        # The body was read inside send(), up to the cap; a cut-off body showed up there as an exception.
        content = resp.content
        if resp.status_code >= 300:
            # arXiv explains a refused query in an Atom error entry; the line names it.
            reason = _error_text(content)
            try:
                classify_status(resp.status_code, resp.headers, "arXiv")
            except (TransientError, PermanentError) as exc:
                if reason is None:
                    raise
                if isinstance(exc, PermanentError):
                    raise PermanentError(f"{exc}: {reason} (query {_query_of(url)})", kind="bad_query") from None
                raise TransientError(f"{exc}: {reason}", retry_after=exc.retry_after, kind=exc.kind) from None
        try:
            content.decode("utf-8")
            root = etree.fromstring(content, _STRICT)
        except (UnicodeDecodeError, etree.XMLSyntaxError) as exc:
            raise TransientError(f"arXiv feed unreadable: {exc}", kind="malformed") from exc
        reason = error_feed_text(root)
        if reason is not None:
            # An error entry in a 200 answer to a query we built is arXiv's hiccup, not our query.
            raise TransientError(f"arXiv answered with an error feed: {reason}", kind="error_feed")
        feed = _feed.parse(content)
        if feed.malformed:
            raise TransientError(f"arXiv feed malformed: {feed.error}", kind="malformed")
        if not feed.results and (not first_page or feed.header.total_results > feed.header.start_index):
            raise TransientError("arXiv returned an empty page inside a result set", kind="empty_page")
        return feed

    def _parse_feed(self, url: str, first_page: bool = True, _try_index: int = 0) -> _feed.ParsedFeed:
        try:
            return call_with_retries(lambda: self._fetch_once(url, first_page), self.http, "arXiv query", breaker=self.breaker)
        except RateLimited as exc:
            # Nothing of a crawl goes on without arXiv: a request that waited out 429s for all its
            # patience counts as failed, so persistent 429s stop the run (after breaker_failures
            # such requests in a row) instead of pacing every slice through its own patience.
            self.breaker.failure(exc)
            raise

    def fetch(self, params: Mapping[str, str | int], first_page: bool = True) -> ArxivPage:
        """One answer of the query endpoint for these query parameters (``search_query``,
        ``id_list``, ``start``, ``max_results``...), with our retries."""
        feed = self._parse_feed(f"{self.query_url_format.format(urlencode(params))}", first_page=first_page)
        return ArxivPage([to_record(r) for r in feed.results], feed.header.total_results)

    def page(self, query: str, start: int) -> tuple[list[ArxivRecord], int]:
        """One page of a query sorted by last update, with the total result count.

        arXiv sometimes answers with fewer entries than asked though more exist; the page is
        returned as it came and the caller asks again from where it ended."""
        search = arxiv.Search(
            query=query,
            sort_by=arxiv.SortCriterion.LastUpdatedDate,
            sort_order=arxiv.SortOrder.Ascending,
        )
        feed = self._parse_feed(self._format_url(search, start, self.page_size), first_page=start == 0)
        return [to_record(r) for r in feed.results], feed.header.total_results

    def search_window(
        self, category: str, start: datetime, end: datetime, most: int | None = None
    ) -> tuple[list[ArxivRecord], int]:
        """All results of one window, paging until the total is reached.

        Returns the records and the total the API reported; a window whose total is above
        ``most`` (``max_results_per_query`` unless given) returns only its total, for the caller
        to split or to page through with a higher ``most`` (see ``tasks.crawl``).
        """
        query = query_for(category, start, end)
        records, total = self.page(query, 0)
        if total > (self.settings.max_results_per_query if most is None else most):
            return [], total
        while len(records) < total:
            more, _ = self.page(query, len(records))
            if not more:
                raise PermanentError(f"arXiv stopped at {len(records)} of {total} for {query}")
            records.extend(more)
        return records, total


def to_record(r: arxiv.Result) -> ArxivRecord:
    """Our record of one parsed entry."""
    arxiv_id, version = split_short_id(r.get_short_id())
    updated = r.updated if r.updated.tzinfo else r.updated.replace(tzinfo=UTC)
    published = r.published if (r.published is None or r.published.tzinfo) else r.published.replace(tzinfo=UTC)
    return ArxivRecord(
        arxiv_id=arxiv_id,
        version=version,
        title=" ".join((r.title or "").split()),
        abstract=" ".join((r.summary or "").split()),
        authors=[a.name for a in r.authors],
        primary_category=r.primary_category,
        categories=list(r.categories),
        published=published,
        updated=updated,
        comment=r.comment or None,
        journal_ref=_one_line(r.journal_ref),
        doi=_one_line(r.doi),
        author_affiliations=[[" ".join(af.split()) for af in a.affiliation] for a in r.authors],
    )


def _one_line(text: str | None) -> str | None:
    return " ".join(text.split()) or None if text else None


def _query_of(url: str) -> str:
    return unquote_plus(url.partition("?")[2])


# What `revbench doctor` asks this service (registered in revbench/services.py).

def probe_arxiv(ctx: ProbeContext) -> Probe:
    """A one-result query (``cat:cs.LG``) through our client and the ``arxiv`` package's Atom parser."""
    settings, clock = ctx.settings, ctx.clock
    url = settings.arxiv.base_url
    http = settings.http.model_copy(update={"timeout_seconds": clock.left(), "max_attempts": 1})
    # A probe reports a 429 at once; a run waits it out.
    client = ArxivClient(settings.arxiv.model_copy(update={"throttle_patience_seconds": 0.0}), http)
    cap_session(client._session, "the query endpoint")
    t0 = time.monotonic()
    try:
        page = client.fetch({"search_query": "cat:cs.LG", "max_results": 1})
    except RateLimited:
        return Probe("arxiv", url, "warn", "answers, but rate-limited right now (HTTP 429); runs slow down and wait", ms(t0))
    except (TransientError, PermanentError) as exc:
        cause = exc.__cause__
        if isinstance(cause, requests.Timeout):
            return Probe("arxiv", url, "fail", f"no answer within {clock.seconds:g} s",
                         fix="check that it runs and that REVBENCH_ARXIV__BASE_URL is its query endpoint "
                             "(https://export.arxiv.org/api/query)")
        if isinstance(cause, requests.RequestException):
            cert = cert_problem(cause)
            what = f"its TLS certificate is not trusted ({cert})" if cert else f"cannot connect ({root_cause(cause)})"
            return Probe("arxiv", url, "fail", what, fix="check REVBENCH_ARXIV__BASE_URL "
                         "(https://export.arxiv.org/api/query) and that arXiv can be reached from here")
        return Probe("arxiv", url, "fail", short(str(exc), 160), ms(t0),
                     fix="check REVBENCH_ARXIV__BASE_URL (https://export.arxiv.org/api/query) and that arXiv answers")
    finally:
        client._session.close()
    latency = ms(t0)
    if not page.records:
        return Probe("arxiv", url, "warn", f"the Atom feed parsed but held no entry ({page.total} results)", latency,
                     fix="check that REVBENCH_ARXIV__BASE_URL is arXiv's query endpoint")
    return Probe("arxiv", url, "ok", f"Atom feed parsed: {page.records[0].arxiv_id} of {page.total} results", latency)
