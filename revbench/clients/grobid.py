"""GROBID header extraction through ``grobid-client-python``."""

from __future__ import annotations

import io
import logging
import threading
from typing import Any

import requests

from revbench.clients.bounded import read_requests
from revbench.clients.tei import TeiError, TeiHeader, parse_tei_header
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
    """``processHeaderDocument`` with our retry policy; answers parsed TEI headers."""

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
        stream = io.BytesIO(pdf)
        stream.name = name
        self.requests_made += 1
        self._client.take_overflow()
        _name, status, text = self._client.process_pdf(
            "processHeaderDocument", stream, consolidate_header=self.settings.consolidate_header
        )
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
        try:
            return parse_tei_header(text), text
        except TeiError as exc:
            raise TransientError(str(exc), kind="grobid_invalid_tei") from exc

    def header(self, pdf: bytes, name: str = "paper.pdf") -> tuple[TeiHeader, str]:
        """Extract the header of one PDF; returns the parsed header and the raw TEI."""
        return call_with_retries(lambda: self._once(pdf, name), self.http, f"GROBID {name}", breaker=self.breaker)
