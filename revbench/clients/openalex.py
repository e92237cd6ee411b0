"""OpenAlex (https://docs.openalex.org): a work by DOI or id, lists of works by filter (cursor
paging), authors, institutions and topics. Optional and off by default (REVBENCH_OPENALEX__ENABLED).

Why a plain httpx client and not pyalex: pyalex keeps its configuration in one module-global
(``pyalex.config``: email, openalex_url, max_retries), shared by every caller in the process, where
revbench hands each run its own ``Settings`` and the tests run several configurations in one process;
it sends the contact address as a ``From`` header, not the ``mailto`` parameter the polite pool is
documented with; its retries are urllib3's ``Retry`` (none by default) on a new requests session per
call, mounted for ``https://`` only, so a local replay server gets none, and a 429's wait is not our
``HttpSettings``; it reads each answer whole (``res.json()``) and paces nothing. What OpenAlex needs
is a handful of GETs, so this client asks them the way our other clients do: one retry policy with
Retry-After and a breaker (``revbench.retry``), every answer capped (``revbench.clients.bounded``),
adaptive pacing at the polite pool's documented 10 requests per second. Many works or authors are
asked as OpenAlex documents it, by one list request per batch with the values OR'ed in one filter
(``works_by_dois``, ``authors_by_ids``), not one request each.

Every answer is read for the keys used and nothing else: new keys appear every year, and any key
may be missing or null (deleted authors, paratext works without authors or topics). OpenAlex
answers an unknown DOI or id with an HTML 404 page, never shown: the error names what was asked.
Every answer's strings are made valid UTF-8 as they are parsed (a lone surrogate becomes U+FFFD,
counted in ``cleaned``), and each record's lists the parsers read (references, authorships,
topics, institutions) are cut at their caps (``openalex.max_*``), each cut named in ``truncated``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from revbench.clients.bounded import Cut, cut_list, send_streamed
from revbench.clients.openalex_graph import openalex_id
from revbench.health import Probe, ProbeContext, http_client, ms, read, unreachable
from revbench.retry import AdaptivePacer, Breaker, PermanentError, TransientError, call_with_retries, classify_status, \
    send_through_429s
from revbench.settings import HttpSettings, OpenAlexSettings
from revbench.text_clean import parse_json

log = logging.getLogger("revbench.clients.openalex")
ARXIV_DOI_PREFIX = "10.48550/arxiv."
"""arXiv's DataCite DOIs (``10.48550/arXiv.2401.00001``), by which OpenAlex knows arXiv papers."""


def error_text(body: bytes) -> str | None:
    """OpenAlex's own explanation in an error answer (``{"error": ..., "message": ...}``), in one
    line, or None (an HTML page says nothing a line should repeat)."""
    try:
        parsed = parse_json(body)[0]
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(parsed, dict):
        return None
    parts = [p for p in (parsed.get("error"), parsed.get("message")) if isinstance(p, str) and p.strip()]
    text = " ".join(" ".join(parts).split())
    return (text if len(text) <= 300 else text[:297] + "...") or None


def _short(filter: str) -> str:
    """A filter as a one-line error names it: a batch of 50 DOIs would fill the line, so its first value and a count."""
    name, _, values = filter.partition(":")
    parts = values.split("|")
    return filter if len(parts) <= 2 else f"{name}:{parts[0]}|... ({len(parts)} values)"


def bare_doi(doi: str) -> str:
    """A DOI without its ``https://doi.org/`` or ``doi:`` prefix, lower-case (DOIs ignore case)."""
    d = doi.strip()
    for prefix in ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:"):
        if d.lower().startswith(prefix):
            d = d[len(prefix):]
            break
    return d.lower()


def arxiv_doi(arxiv_id: str) -> str:
    """The DOI arXiv registered for a paper (without version): ``10.48550/arxiv.<id>``."""
    base = arxiv_id.strip()
    head, _, tail = base.rpartition("v")
    if head and tail.isdigit() and (head[-1].isdigit()):
        base = head
    return ARXIV_DOI_PREFIX + base.lower()


class OpenAlexClient:
    """Thin typed client; every call is paced, retried, capped and carries ``mailto`` when set."""

    def __init__(self, settings: OpenAlexSettings, http: HttpSettings, client: httpx.Client | None = None):
        self.settings = settings
        self.http = http
        self._client = client or httpx.Client(base_url=settings.base_url.rstrip("/"), timeout=http.timeout_seconds,
                                              headers={"user-agent": http.user_agent})
        self.pacer = AdaptivePacer(settings.delay_seconds, settings.throttle_max_delay_seconds,
                                   settings.throttle_recovery_seconds)
        self.requests_made = 0
        self.throttled = 0
        self.breaker = Breaker("OpenAlex", settings.base_url, http.breaker_failures)
        self.cleaned = 0
        """Characters of answers that UTF-8 cannot hold (lone surrogates), replaced by U+FFFD."""
        self.truncated: list[Cut] = []
        """The lists cut at their cap (``openalex.max_*``), in the order they were."""

    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in params.items() if v is not None}
        if self.settings.mailto:
            out["mailto"] = self.settings.mailto
        return out

    def _get(self, path: str, params: dict[str, Any], missing: str, what: str | None = None) -> Any:
        """One GET, paced and through 429s, as JSON; ``missing`` names what a 404 did not find,
        ``what`` the request in an error line (the path unless given)."""
        what = what or f"OpenAlex {path}"

        def send() -> tuple[httpx.Response, bytes]:
            self.requests_made += 1
            return send_streamed(self._client, self._client.build_request("GET", path, params=self._params(params)),
                                 self.http.max_response_bytes, "OpenAlex", what)

        def throttled(slowed: bool) -> None:
            self.throttled += 1
            if slowed:
                log.info("OpenAlex answered 429 without Retry-After; %.2f s between requests now", self.pacer.interval)

        resp, content = send_through_429s(send, lambda r: (r[0].status_code, r[0].headers), self.pacer,
                                          self.settings.throttle_patience_seconds, self.http.retry_after_max_seconds,
                                          what, throttled)
        if resp.status_code == 404:
            raise PermanentError(f"OpenAlex has no {missing} (HTTP 404 at {path})", kind="not_found")
        classify_status(resp.status_code, resp.headers, what, detail=error_text(content))
        try:
            body, replaced = parse_json(content)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TransientError(f"{what}: answered unreadable JSON ({exc})", kind="malformed") from exc
        if replaced:
            self.cleaned += replaced
            log.info("%s: %d characters UTF-8 cannot hold (lone surrogates) replaced by U+FFFD", what, replaced)
        return body

    def _bounded(self, record: Any) -> None:
        """Cut a work's or an author's lists at their caps, naming each cut (and logging it)."""
        if not isinstance(record, dict):
            return
        s = self.settings
        name = openalex_id(record.get("id")) or "a record without an id"
        if isinstance(record.get("doi"), str):
            name += f" ({bare_doi(record['doi'])})"
        caps = {"referenced_works": (s.max_references_per_paper, "max_references_per_paper"),
                "authorships": (s.max_authors_per_paper, "max_authors_per_paper"),
                "topics": (s.max_topics_per_paper, "max_topics_per_paper"),
                "affiliations": (s.max_institutions_per_author, "max_institutions_per_author")}
        cuts = [(key, most, setting, cut_list(record, key, most)) for key, (most, setting) in caps.items()]
        authorships = record.get("authorships")
        for position, authorship in enumerate(authorships if isinstance(authorships, list) else []):
            for key in ("institutions", "affiliations", "raw_affiliation_strings"):
                if isinstance(authorship, dict):
                    cuts.append((f"{key} of authorship {position}", s.max_institutions_per_author,
                                 "max_institutions_per_author", cut_list(authorship, key, s.max_institutions_per_author)))
        for key, most, setting, dropped in cuts:
            if dropped:
                cut = Cut("openalex", f"{key} of {name}", most, dropped)
                self.truncated.append(cut)
                log.warning("%s; the rest is not read (REVBENCH_OPENALEX__%s)", cut.line(), setting.upper())

    def _entity(self, path: str, missing: str, select: Sequence[str] | None = None) -> dict[str, Any]:
        def once() -> dict[str, Any]:
            body = self._get(path, {"select": ",".join(select) if select else None}, missing)
            if not isinstance(body, dict) or not isinstance(body.get("id"), str):
                raise TransientError(f"OpenAlex {path}: the answer is not one record with an id", kind="malformed")
            self._bounded(body)
            return body

        return call_with_retries(once, self.http, f"OpenAlex {path}", breaker=self.breaker)

    def work(self, key: str, select: Sequence[str] | None = None) -> dict[str, Any]:
        """One work by OpenAlex id (``W…``, or its URL) or ``doi:10.…``; ``PermanentError`` (kind
        ``not_found``) naming it when OpenAlex has none. ``select``: only these top-level keys."""
        if key.lower().startswith(("doi:", "https://doi.org/", "http://doi.org/")):
            doi = bare_doi(key)
            return self._entity(f"/works/doi:{quote(doi, safe='/:;()')}", f"work with DOI {doi}", select)
        wid = openalex_id(key) or key
        return self._entity(f"/works/{quote(wid, safe='')}", f"work {wid}", select)

    def work_by_doi(self, doi: str, select: Sequence[str] | None = None) -> dict[str, Any] | None:
        """The work with this DOI, or None when OpenAlex has none (its HTML 404)."""
        try:
            return self.work(f"doi:{bare_doi(doi)}", select)
        except PermanentError as exc:
            if exc.kind == "not_found":
                return None
            raise

    def work_by_arxiv(self, arxiv_id: str, select: Sequence[str] | None = None) -> dict[str, Any] | None:
        """An arXiv paper's work, by the DOI arXiv registered for it (``10.48550/arXiv.<id>``)."""
        return self.work_by_doi(arxiv_doi(arxiv_id), select)

    def works(self, filter: str, select: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Every work matching ``filter`` (OpenAlex's syntax, e.g. ``cites:W123``), following
        ``meta.next_cursor`` from ``cursor=*`` until a page comes back empty or without a next
        cursor. A cursor that comes back again ends it with a ``TransientError`` naming the filter:
        the list is left whole for another run, never followed round in a loop."""
        return self._listing("/works", filter, select)

    def authors(self, filter: str, select: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Every author matching ``filter`` (e.g. ``openalex:A1|A2``), cursor-paged as :meth:`works`."""
        return self._listing("/authors", filter, select)

    def _listing(self, path: str, filter: str, select: Sequence[str] | None) -> list[dict[str, Any]]:
        return [record for page in self._pages(path, filter, select) for record in page]

    def _pages(self, path: str, filter: str, select: Sequence[str] | None) -> Iterator[list[dict[str, Any]]]:
        """Each page's results, from ``cursor=*`` until a page comes back empty or without a next cursor."""
        cursor: str | None = "*"
        asked: set[str] = set()
        seen = 0
        while cursor is not None:
            page = self._page(filter, cursor, select, path=path)
            results = page["results"]
            for record in results:
                self._bounded(record)
            yield results
            seen += len(results)
            asked.add(cursor)
            meta = page.get("meta") if isinstance(page.get("meta"), dict) else {}
            following = meta.get("next_cursor")
            if not results or following is None:
                break
            if not isinstance(following, str) or following in asked:
                why = "was asked already" if isinstance(following, str) else "is not a cursor"
                raise TransientError(f"OpenAlex {path}?filter={_short(filter)}: next_cursor {str(following)[:40]!r} "
                                     f"{why}; stopped paging after {seen} {path.strip('/')}", kind="paging_stuck")
            cursor = following

    def works_by_dois(self, dois: Sequence[str], select: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """``asked DOI -> work`` for the works OpenAlex has among ``dois``, asked ``batch_size`` at a
        time through ``/works?filter=doi:A|B|...`` (one request a batch, plus cursor pages). Each
        result is matched back by its ``doi`` (OpenAlex writes ``https://doi.org/…`` lower-cased):
        an asked DOI with no result is not in OpenAlex (as the HTML 404 of one DOI says), a result
        matching nothing asked is ignored. With ``select``, ``doi`` is asked for too."""
        keys = {d: bare_doi(d) for d in dois}
        # OpenAlex reads `|` and `,` in a filter value as OR and AND: such a DOI is asked alone.
        alone = [d for d, k in keys.items() if "|" in k or "," in k]
        found = self._batched("/works", "doi", [k for d, k in keys.items() if d not in alone],
                              lambda w: bare_doi(w["doi"]) if isinstance(w.get("doi"), str) else None,
                              [*select, "doi"] if select else None)
        out = {d: found[k] for d, k in keys.items() if k in found}
        for d in alone:
            if (work := self.work_by_doi(d, select)) is not None:
                out[d] = work
        return out

    def authors_by_ids(self, ids: Sequence[str], select: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """``asked id -> author`` for the authors (``A…`` or their URLs) OpenAlex has among ``ids``,
        asked ``batch_size`` at a time through ``/authors?filter=openalex:A1|A2|...``, matched back
        by ``id``; an id without a result is an author OpenAlex does not have (deleted, merged away)."""
        keys = {i: (openalex_id(i) or i).upper() for i in ids}
        found = self._batched("/authors", "openalex", list(keys.values()),
                              lambda a: (openalex_id(a.get("id")) or "").upper() or None,
                              [*select, "id"] if select else None)
        return {i: found[k] for i, k in keys.items() if k in found}

    def _batched(self, path: str, name: str, keys: Sequence[str], key_of: Callable[[dict[str, Any]], str | None],
                 select: Sequence[str] | None) -> dict[str, dict[str, Any]]:
        """``key -> record`` over ``path?filter=name:k1|k2|...``, ``batch_size`` keys a request; the
        first result of a key wins (OpenAlex has kept two works under one DOI)."""
        unique = list(dict.fromkeys(keys))
        size = self.settings.batch_size
        out: dict[str, dict[str, Any]] = {}
        for start in range(0, len(unique), size):
            batch = unique[start:start + size]
            wanted = set(batch)
            for page in self._pages(path, f"{name}:{'|'.join(batch)}", select):
                for record in page:
                    key = key_of(record) if isinstance(record, dict) else None
                    if key in wanted and key not in out:
                        out[key] = record
                # OpenAlex gives a next cursor after its last page with results too; with every key
                # found, a further page could change nothing, so the empty page is not asked for.
                if wanted <= out.keys():
                    break
        return out

    def _page(self, filter: str, cursor: str | None, select: Sequence[str] | None,
              per_page: int | None = None, path: str = "/works") -> dict[str, Any]:
        params = {"filter": filter, "per-page": per_page or self.settings.per_page, "cursor": cursor,
                  "select": ",".join(select) if select else None}
        what = f"OpenAlex {path}?filter={_short(filter)}"

        def once() -> dict[str, Any]:
            body = self._get(path, params, f"{path.strip('/')} for filter {_short(filter)}", what)
            if not isinstance(body, dict) or not isinstance(body.get("results"), list):
                raise TransientError(f"{what}: the answer lacks a 'results' list", kind="malformed")
            return body

        return call_with_retries(once, self.http, what, breaker=self.breaker)

    def count_works(self, filter: str) -> int:
        """How many works match ``filter`` (``meta.count`` of a one-result page)."""
        meta = self._page(filter, None, ["id"], per_page=1).get("meta")
        count = meta.get("count") if isinstance(meta, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            raise TransientError(f"OpenAlex /works?filter={filter}: the answer has no meta.count", kind="malformed")
        return count

    def author(self, author_id: str) -> dict[str, Any]:
        """One author (``A…``) with its ``affiliations[].years``; ``PermanentError`` when unknown."""
        aid = openalex_id(author_id) or author_id
        return self._entity(f"/authors/{quote(aid, safe='')}", f"author {aid}")

    def institution(self, institution_id: str) -> dict[str, Any]:
        """One institution (``I…``, or ``ror:<id>``); ``PermanentError`` when unknown."""
        iid = institution_id if institution_id.startswith("ror:") else openalex_id(institution_id) or institution_id
        return self._entity(f"/institutions/{quote(iid, safe=':')}", f"institution {iid}")

    def topic(self, topic_id: str) -> dict[str, Any]:
        """One topic (``T…``) with its subfield, field and domain; ``PermanentError`` when unknown."""
        tid = openalex_id(topic_id) or topic_id
        return self._entity(f"/topics/{quote(tid, safe='')}", f"topic {tid}")

    def close(self) -> None:
        self._client.close()


# What `revbench doctor` asks this service (registered in revbench/services.py).

PROBE_DOI = arxiv_doi("1706.03762")
"""The work the OpenAlex probe looks for ("Attention Is All You Need" by its arXiv DOI; none found
is as good an answer: the list comes back empty)."""


def probe_openalex(ctx: ProbeContext) -> Probe:
    """A one-result ``GET /works?filter=doi:…`` with ``mailto`` when set; says the pool and pace."""
    settings, clock = ctx.settings, ctx.clock
    oa = settings.openalex
    base = oa.base_url.rstrip("/")
    params = {"filter": f"doi:{PROBE_DOI}", "select": "id", "per-page": 1}
    if oa.mailto:
        params["mailto"] = oa.mailto
    try:
        with http_client(settings, clock) as client:
            t0 = time.monotonic()
            resp = read(client, "GET", f"{base}/works", "/works", params=params, timeout=clock.left())
            latency = ms(t0)
    except httpx.HTTPError as exc:
        return unreachable("openalex", base, exc, clock, "REVBENCH_OPENALEX__BASE_URL")
    said = error_text(resp.content)
    said = f" ({said})" if said else ""
    if resp.status_code == 429:
        return Probe("openalex", base, "warn", f"answers, but rate-limited right now (HTTP 429){said}; runs slow down "
                     "and wait", latency, fix="" if oa.mailto else "set REVBENCH_OPENALEX__MAILTO for the polite pool")
    try:
        body = resp.json()
    except ValueError:
        body = None
    if resp.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("results"), list):
        return Probe("openalex", base, "fail", f"/works answered HTTP {resp.status_code}{said}, not a list of works",
                     latency, fix="set REVBENCH_OPENALEX__BASE_URL to the API root (https://api.openalex.org)")
    pace = f"{oa.delay_seconds:g} s between requests" if oa.delay_seconds > 0 else "requests without a pause"
    if oa.mailto:
        return Probe("openalex", base, "ok", f"polite pool (mailto set); runs send {pace}", latency)
    return Probe("openalex", base, "ok", f"no mailto: the common pool (REVBENCH_OPENALEX__MAILTO puts runs in the "
                 f"polite pool); runs send {pace}", latency)
