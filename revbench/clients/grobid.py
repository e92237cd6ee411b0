"""GROBID header extraction, and optionally the full text's references, through ``grobid-client-python``."""

from __future__ import annotations

import io
import logging
import re
import threading
import time
from typing import Any

import requests

from revbench.clients.bounded import read_requests
from revbench.clients.tei import TeiError, TeiHeader, TeiReference, parse_tei_header, parse_tei_references
from revbench.errors import UsageError
from revbench.health import Probe, ProbeContext, http_client, ms, read, short, unreachable, version_tuple
from revbench.retry import RETRYABLE_STATUS, Breaker, PermanentError, ResponseTooLarge, TransientError, call_with_retries
from revbench.settings import GrobidSettings, HttpSettings


def _grobid_client_class() -> Any:
    """``grobid_client.GrobidClient``, imported without its side effect: the package calls
    ``logging.basicConfig(level=INFO)`` at import, which would print every library's INFO
    records to the console; the root logger is put back as it was."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    from grobid_client.grobid_client import GrobidClient

    root.setLevel(level)
    for h in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(h)
    return GrobidClient


def _bounded_client_class(limit: int) -> Any:
    """``GrobidClient`` whose answers are read up to ``limit`` bytes (``read_requests``). The
    package sends with ``requests`` and turns any exception into an answer (status 500, the
    error's text), so an answer over the cap is also kept aside, per thread, for ``take_overflow``
    to name it: an endless answer must not read as a retryable server error."""
    base = _grobid_client_class()

    class Bounded(base):  # type: ignore[misc, valid-type]
        _overflow = threading.local()

        def call_api(self, method: str, url: str, headers: dict[str, str] | None = None,
                     params: dict[str, Any] | None = None, data: dict[str, Any] | None = None,
                     files: dict[str, Any] | None = None, timeout: float | None = None) -> tuple[Any, int]:
            # The package's own call_api, streamed and capped.
            headers = {**(headers or {}), "Accept": self.accept_type}
            r = requests.request(method, url, headers=headers, params=params or {}, files=files or {}, data=data or {},
                                 timeout=timeout, stream=True)
            try:
                read_requests(r, limit, "GROBID")
            except ResponseTooLarge as exc:
                self._overflow.error = exc
                raise
            return r, r.status_code

        def take_overflow(self) -> ResponseTooLarge | None:
            error, self._overflow.error = getattr(self._overflow, "error", None), None
            return error

    return Bounded


class GrobidHeaderClient:
    """``processHeaderDocument`` with our retry policy; answers parsed TEI headers. With
    ``grobid.fulltext`` on, also ``processFulltextDocument`` for a paper's reference list."""

    def __init__(self, settings: GrobidSettings, http: HttpSettings):
        self.settings = settings
        self.http = http
        self._client = _bounded_client_class(http.max_response_bytes)(
            grobid_server=settings.base_url.rstrip("/"),
            check_server=False,
            timeout=settings.timeout_seconds,  # type: ignore[arg-type]  # requests takes floats
            sleep_time=settings.busy_sleep_seconds,
        )
        # The package logs every failed request at ERROR; our retries make most of them noise.
        logging.getLogger("grobid_client.grobid_client").setLevel(logging.CRITICAL)
        self.requests_made = 0
        self.breaker = Breaker("GROBID", settings.base_url, http.breaker_failures)

    def _once(self, pdf: bytes, name: str) -> tuple[TeiHeader, str]:
        text = self._post("processHeaderDocument", pdf, name, consolidate_header=self.settings.consolidate_header)
        try:
            return parse_tei_header(text), text
        except TeiError as exc:
            raise TransientError(str(exc), kind="grobid_invalid_tei") from exc

    def _post(self, service: str, pdf: bytes, name: str, **params: bool) -> str:
        """One request to ``service``; the TEI text of a 200, else the fault as our retry policy reads it."""
        stream = io.BytesIO(pdf)
        stream.name = name
        self.requests_made += 1
        self._client.take_overflow()
        _name, status, text = self._client.process_pdf(service, stream, **params)
        overflow = self._client.take_overflow()
        if overflow is not None:
            raise overflow
        # grobid-client catches requests' timeouts as IOError ("Failed to open file", 400); our
        # input is in memory and cannot fail to open, so that answer is a transport fault.
        transport = status == 400 and (text or "").startswith("Failed to open file")
        if status in RETRYABLE_STATUS or transport:
            raise TransientError(f"GROBID: HTTP {status}: {(text or '')[:200]}", kind="grobid_http")
        if status != 200 or text is None:
            raise PermanentError(f"GROBID: HTTP {status}: {(text or '')[:200]}", kind="grobid_failed")
        return text

    def header(self, pdf: bytes, name: str = "paper.pdf") -> tuple[TeiHeader, str]:
        """Extract the header of one PDF; returns the parsed header and the raw TEI."""
        return call_with_retries(lambda: self._once(pdf, name), self.http, f"GROBID {name}", breaker=self.breaker)

    def _fulltext_once(self, pdf: bytes, name: str) -> tuple[TeiHeader, list[TeiReference], str]:
        # The package sends consolidateCitations only when true, and GROBID's default is 0; the raw
        # reference strings are asked for, as they are what a person reads to judge a match.
        text = self._post("processFulltextDocument", pdf, name, consolidate_header=self.settings.consolidate_header,
                          consolidate_citations=self.settings.consolidate_citations, include_raw_citations=True)
        try:
            # The full text carries the same teiHeader as processHeaderDocument's answer (the
            # conformance suite compares both on the same PDF), so one request gives both.
            return parse_tei_header(text), parse_tei_references(text, f"GROBID full text of {name}"), text
        except TeiError as exc:
            raise TransientError(str(exc), kind="grobid_invalid_tei") from exc

    def references(self, pdf: bytes, name: str = "paper.pdf") -> tuple[list[TeiReference], str]:
        """The reference list of one PDF's full text (``processFulltextDocument``), one record per
        ``<biblStruct>`` in order, and the raw TEI. Only with ``grobid.fulltext`` on: it costs
        several times the header's time on GROBID."""
        if not self.settings.fulltext:
            raise UsageError("GROBID full text is off (REVBENCH_GROBID__FULLTEXT=false); "
                             "set it to true to read papers' reference lists from GROBID")
        _header, refs, tei = self._fulltext(pdf, name)
        return refs, tei

    def _fulltext(self, pdf: bytes, name: str) -> tuple[TeiHeader, list[TeiReference], str]:
        return call_with_retries(lambda: self._fulltext_once(pdf, name), self.http, f"GROBID full text {name}",
                                 breaker=self.breaker)

    def document(self, pdf: bytes, name: str = "paper.pdf") -> tuple[TeiHeader, list[TeiReference] | None, str]:
        """One PDF's header and, with ``grobid.fulltext`` on, its reference list, from one request
        (``processFulltextDocument`` instead of ``processHeaderDocument``); references are None when off."""
        if not self.settings.fulltext:
            header, tei = self.header(pdf, name)
            return header, None, tei
        return self._fulltext(pdf, name)


# What `revbench doctor` asks this service (registered in revbench/services.py).

GROBID_FLOOR = (0, 6, 1)
"""The oldest GROBID whose TEI our parser is tested on: the conformance suite
(tests/conformance/test_grobid.py) parses every sample of ../shared/external/real-responses/grobid,
written by GROBID 0.6.1 (the oldest, resources__test_pdf__0046d83a-...tei.xml) up to 0.8.3-SNAPSHOT."""


def probe_grobid(ctx: ProbeContext) -> Probe:
    """``GET /api/isalive`` (true), then ``/api/version``, not older than :data:`GROBID_FLOOR`."""
    import httpx

    settings, clock = ctx.settings, ctx.clock
    base = settings.grobid.base_url.rstrip("/")
    setting = "REVBENCH_GROBID__BASE_URL"
    try:
        with http_client(settings, clock) as client:
            t0 = time.monotonic()
            alive = read(client, "GET", f"{base}/api/isalive", "/api/isalive", timeout=clock.left())
            latency = ms(t0)
            if alive.status_code != 200 or alive.text.strip().lower() != "true":
                return Probe("grobid", base, "fail", f"/api/isalive answered HTTP {alive.status_code} "
                             f"{short(alive.text, 60)!r}, not true", latency,
                             fix=f"set {setting} to the GROBID server's root (where /api/isalive answers true)")
            answer = read(client, "GET", f"{base}/api/version", "/api/version", timeout=clock.left())
    except httpx.HTTPError as exc:
        return unreachable("grobid", base, exc, clock, setting)
    version = _grobid_version(answer)
    floor = ".".join(map(str, GROBID_FLOOR))
    if version is None:
        return Probe("grobid", base, "warn", f"alive; /api/version answered HTTP {answer.status_code}, no version",
                     latency, fix=f"run GROBID {floor} or newer (the TEI parser is tested on 0.6.1 to 0.8.3)")
    if version_tuple(version) < GROBID_FLOOR:
        return Probe("grobid", base, "fail", f"GROBID {version} is older than {floor}, the oldest whose TEI our parser is "
                     "tested on", latency, version, fix="run a current GROBID (e.g. the grobid/grobid:0.8.2 image)")
    return Probe("grobid", base, "ok", "alive", latency, version)


def _grobid_version(answer: Any) -> str | None:
    """GROBID's version: JSON ``{"version": ...}`` from recent servers, the bare text from older ones."""
    if answer.status_code != 200:
        return None
    text = answer.text.strip()
    try:
        import json

        body = json.loads(text)
    except ValueError:
        body = text
    version = body.get("version") if isinstance(body, dict) else body if isinstance(body, str) else None
    return str(version) if version and re.match(r"^\d+\.\d+", str(version)) else None
