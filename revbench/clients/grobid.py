"""GROBID header extraction through ``grobid-client-python``."""

from __future__ import annotations

import io
import logging
from typing import Any

from revbench.clients.tei import TeiError, TeiHeader, parse_tei_header
from revbench.retry import RETRYABLE_STATUS, Breaker, PermanentError, TransientError, call_with_retries
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


class GrobidHeaderClient:
    """``processHeaderDocument`` with our retry policy; answers parsed TEI headers."""

    def __init__(self, settings: GrobidSettings, http: HttpSettings):
        self.settings = settings
        self.http = http
        self._client = _grobid_client_class()(
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
        _name, status, text = self._client.process_pdf(
            "processHeaderDocument", stream, consolidate_header=self.settings.consolidate_header
        )
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
