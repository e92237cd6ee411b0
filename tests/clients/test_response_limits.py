"""Every answer a client reads is bounded (``http.max_response_bytes``): against a local server
that answers every request with an endless body, or declares one of 10 GB, each client stops
with ``ResponseTooLarge`` (one line: the service, its URL without query, the cap) within its
timeout, in little memory, after one request (not retried); a reachability probe reads no body."""

from __future__ import annotations

import socketserver
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import httpx
import pytest

from revbench.clients.arxiv_api import ArxivClient
from revbench.clients.bounded import read_httpx
from revbench.clients.grobid import GrobidHeaderClient
from revbench.clients.llm import LlmClient
from revbench.clients.openalex import OpenAlexClient
from revbench.clients.pdf import PdfClient
from revbench.clients.probe import probe
from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.replay.server import replay_overrides
from revbench.retry import PermanentError, ResponseTooLarge
from revbench.settings import Settings
from tests.support.common import FIXTURES

CAP = 1 << 20
DAY = (datetime(2025, 9, 1, tzinfo=UTC), datetime(2025, 9, 1, 23, 59, tzinfo=UTC))


class Endless(socketserver.ThreadingTCPServer):
    """Answers every request 200 with a body that never ends (chunked), or, ``declared``, with a
    Content-Length of 10 GB it then streams towards; counts requests and bytes it got out."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, declared: bool):
        super().__init__(("127.0.0.1", 0), _Stream)
        self.declared, self.requests, self.served, self.stopping = declared, 0, 0, False

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Stream(socketserver.StreamRequestHandler):
    server: Endless

    def handle(self) -> None:
        headers = {}
        for line in iter(self.rfile.readline, b"\r\n"):
            if not line:
                return
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        self.rfile.read(int(headers.get("content-length", "0")))
        self.server.requests += 1
        framing = b"Content-Length: 10000000000" if self.server.declared else b"Transfer-Encoding: chunked"
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + framing + b"\r\n\r\n")
        block = b"[" * 65536
        frame = block if self.server.declared else b"10000\r\n" + block + b"\r\n"
        try:
            while not self.server.stopping:
                self.wfile.write(frame)
                self.server.served += len(block)
        except OSError:
            pass  # the client hung up: what the test wants


@pytest.fixture(params=[False, True], ids=["chunked", "declared"])
def endless(request: pytest.FixtureRequest) -> Iterator[Endless]:
    server = Endless(request.param)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.stopping = True
        server.shutdown()
        server.server_close()


def _bounded(call: Callable[[], Any]) -> tuple[BaseException, float, int]:
    """What ``call`` raised, how long it took and its peak of traced memory."""
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        with pytest.raises((ResponseTooLarge, PermanentError)) as raised:
            call()
        return raised.value, time.monotonic() - t0, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _settings(settings: Settings, server: Endless) -> Settings:
    """Every client pointed at ``server``, reading at most ``CAP`` bytes of an answer."""
    return settings.with_overrides(**replay_overrides(server.base), http={"timeout_seconds": 10, "max_response_bytes": CAP})


def test_the_shared_reader_stops_at_the_cap(endless: Endless) -> None:
    with httpx.Client(timeout=10) as http, http.stream("GET", f"{endless.base}/x?api_key=secret") as resp:
        exc, seconds, peak = _bounded(lambda: read_httpx(resp, CAP, "Some service"))
    assert str(exc) == f"Some service {endless.base}/x: answered more than {CAP} bytes"
    assert seconds < 10 and peak < 4 * CAP


# Each client is built first (imports and set-up are not what is measured), then called.
CLIENTS: dict[str, tuple[str, Callable[[Settings], Callable[[], Any]]]] = {
    "s2": ("Semantic Scholar", lambda s: partial(SemanticScholarClient(s.s2, s.http).paper_batch, ["2508.01234"])),
    "arxiv": ("arXiv API", lambda s: partial(ArxivClient(s.arxiv, s.http).search_window, "cs.IR", *DAY)),
    "grobid": ("GROBID", lambda s: partial(GrobidHeaderClient(s.grobid, s.http).header, (FIXTURES / "paper.pdf").read_bytes())),
    "llm": ("LLM", lambda s: partial(LlmClient(s.llm, s.http).complete, "Which of these are the same person?")),
    "openalex": ("OpenAlex", lambda s: partial(OpenAlexClient(s.openalex, s.http).work_by_arxiv, "2508.01234")),
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_client_ends_an_endless_answer_with_one_named_line(endless: Endless, settings: Settings, client: str) -> None:
    service, call = CLIENTS[client]
    exc, seconds, peak = _bounded(call(_settings(settings, endless)))
    assert isinstance(exc, ResponseTooLarge) and exc.kind == "too_large"
    line = str(exc)
    assert line.startswith(f"{service} {endless.base}/") and line.endswith(f": answered more than {CAP} bytes")
    assert "?" not in line and "\n" not in line
    assert endless.requests == 1  # not retried: the same request would get the same answer
    assert seconds < 10 and peak < 4 * CAP and endless.served < 64 * CAP


def test_a_pdf_over_its_cap_stays_a_final_pdf_too_large(endless: Endless, settings: Settings) -> None:
    s = _settings(settings, endless).with_overrides(pdf={"max_bytes": CAP})
    exc, seconds, peak = _bounded(partial(PdfClient(s.pdf, s.http).fetch, "2508.01234", 2))
    assert isinstance(exc, PermanentError) and exc.kind == "pdf_too_large"
    assert str(exc) == f"arXiv PDFs {endless.base}/arxiv/pdf/2508.01234v2: answered more than {CAP} bytes"
    assert endless.requests == 1 and seconds < 10 and peak < 4 * CAP


def test_a_reachability_probe_reads_no_body(endless: Endless, settings: Settings) -> None:
    s = _settings(settings, endless)
    tracemalloc.start()
    try:
        t0 = time.monotonic()
        found = probe(s, "s2")
        seconds, peak = time.monotonic() - t0, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.status == 200 and endless.requests == 1 and seconds < 10 and peak < CAP
