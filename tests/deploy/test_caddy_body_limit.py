"""deploy/Caddyfile caps request bodies of the survey site at the survey server's own cap
(``MAX_BODY_BYTES``), so a large POST stops at Caddy: no more of it reaches the upstream.
The survey server's own refusal is tested in tests/survey/test_body_limit.py."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from revbench.replay.server import free_port
from revbench.survey.server import MAX_BODY_BYTES
from tests.deploy.conftest import CADDYFILE


def _handlers(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The handlers of the survey site's route, in order."""
    (server,) = config["apps"]["http"]["servers"].values()
    (route,) = [r for r in server["routes"] if r["match"][0].get("host") == ["survey.example.org"]]
    return [h for sub in route["handle"] for r in sub["routes"] for h in r["handle"]]


def test_the_caddyfile_caps_the_survey_body_at_the_servers_cap(caddy_bin: str, caddy_env: dict[str, str],
                                                                 tmp_path: Path) -> None:
    env = {**caddy_env, "SURVEY_DOMAIN": "survey.example.org", "SURVEY_TLS": "internal"}
    done = subprocess.run([caddy_bin, "adapt", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
                          env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    handlers = _handlers(json.loads(done.stdout))
    assert [h["max_size"] for h in handlers if h["handler"] == "request_body"] == [MAX_BODY_BYTES]
    kinds = [h["handler"] for h in handlers]
    assert kinds.index("request_body") < kinds.index("reverse_proxy")  # it applies before the body is passed on


class _Upstream(ThreadingHTTPServer):
    """A stand-in for the survey server that reads every body whole and remembers how much of it
    came through Caddy."""

    daemon_threads = True
    received: list[int]


class _Reader(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.server.received.append(len(self.rfile.read(int(self.headers.get("content-length", "0")))))
        self._answer()

    def _answer(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    server = _Upstream(("127.0.0.1", 0), _Reader)
    server.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_caddy_passes_on_no_more_of_a_body_than_the_cap(upstream: _Upstream, caddy_front: Callable[..., Any]) -> None:
    with caddy_front(free_port(), f"127.0.0.1:{upstream.server_address[1]}") as front, \
            httpx.Client(base_url=front.base, verify=front.trust(), timeout=30) as http:
        small = http.post("/u/x", content=b"x" * MAX_BODY_BYTES)
        large = http.post("/u/x", content=b"x" * (4 * MAX_BODY_BYTES))
    assert small.status_code == 200 and upstream.received[0] == MAX_BODY_BYTES
    # Caddy 2.6 (Debian's) answers 502 when the limit cuts the body it was passing on; later ones 413.
    assert large.status_code in (413, 502) and max(upstream.received[1:], default=0) <= MAX_BODY_BYTES
