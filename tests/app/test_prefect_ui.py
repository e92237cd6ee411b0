"""One Prefect server per data folder's database: ``revbench ui`` serves the UI with telemetry off
and marks its home; a command with no Prefect API configured finds that server (or one started by
hand on the same home at Prefect's default address) and sends its runs there instead of starting
a second server on the same SQLite file. Stub HTTP servers stand in for Prefect."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from revbench.app import cli_ui, entry, prefect_ui
from revbench.app.cli_common import setup
from revbench.replay.server import free_port
from tests.support.cli import one_line_error
from tests.support.common import run_cli


@pytest.fixture
def own_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A Prefect home of this test's own and no API configured; the variables and signal handlers
    ``prepare_process`` sets for the whole process are put back after. Yields the home."""
    env, handlers = dict(os.environ), {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    home = (tmp_path / "data" / "prefect").resolve()
    monkeypatch.setenv("PREFECT_HOME", str(home))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    try:
        yield home
    finally:
        os.environ.clear()
        os.environ.update(env)
        for s, h in handlers.items():
            signal.signal(s, h)


@pytest.fixture
def stub() -> Iterator[tuple[str, dict[str, str]]]:
    """A stand-in Prefect API on loopback: ``/api/health`` answers ``true``, ``/api/admin/settings``
    the settings in the dict it yields (set ``home`` to say whose database it serves)."""
    said: dict[str, str] = {}

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"true" if self.path == "/api/health" else json.dumps(said).encode()
            self.send_response(200 if self.path in ("/api/health", "/api/admin/settings") else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api", said
    finally:
        server.shutdown()
        server.server_close()


def test_a_command_sends_its_runs_to_the_ui_server_marked_in_its_home(own_process: Path, stub, capsys) -> None:
    api, _ = stub
    own_process.mkdir(parents=True)
    (own_process / prefect_ui.UI_MARKER).write_text(json.dumps({"api_url": api, "pid": os.getpid()}))
    setup()
    assert os.environ["PREFECT_API_URL"] == api
    note = capsys.readouterr().err
    assert "`revbench ui` serves the runs of" in note and api.removesuffix("/api") in note and "no second server" in note
    assert entry.resolve_track(None, long_flow=False)  # a configured API: runs are tracked, on that server
    os.environ.pop("PREFECT_API_URL")
    setup()  # the same server again: said once
    assert os.environ["PREFECT_API_URL"] == api and capsys.readouterr().err == ""


def test_a_marker_left_by_a_server_that_is_gone_is_ignored(own_process: Path, stub) -> None:
    api, _ = stub
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    own_process.mkdir(parents=True)
    (own_process / prefect_ui.UI_MARKER).write_text(json.dumps({"api_url": api, "pid": gone.pid}))
    setup()
    assert "PREFECT_API_URL" not in os.environ
    # An API the user configured wins over any marker.
    os.environ["PREFECT_API_URL"] = "http://127.0.0.1:9/api"
    (own_process / prefect_ui.UI_MARKER).write_text(json.dumps({"api_url": api, "pid": os.getpid()}))
    setup()
    assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:9/api"


def test_a_server_started_by_hand_is_used_only_when_it_serves_the_same_home(own_process: Path, stub,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    api, said = stub
    host_port = api.removeprefix("http://").removesuffix("/api").split(":")
    monkeypatch.setattr(prefect_ui, "DEFAULT_ADDRESS", (host_port[0], int(host_port[1])))
    said["home"] = str(own_process.parent / "another-folder")
    assert prefect_ui.find_ui_server(own_process) is None
    setup()
    assert "PREFECT_API_URL" not in os.environ
    said["home"] = str(own_process)
    found = prefect_ui.find_ui_server(own_process)
    assert found is not None and found.api_url == api and found.pid is None
    setup()
    assert os.environ["PREFECT_API_URL"] == api


STUB_SERVER = r"""
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port, dump = int(sys.argv[1]), sys.argv[2]
names = ("PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED", "DO_NOT_TRACK", "PREFECT_UI_API_URL", "PREFECT_API_URL")
with open(dump, "w") as f:
    json.dump({k: os.environ.get(k) for k in names}, f)
class Answer(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"true"
        self.send_response(200); self.send_header("Content-Length", "4"); self.end_headers(); self.wfile.write(body)
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", port), Answer).serve_forever()
"""
"""What ``revbench ui`` starts in the test: an API that is healthy, after writing down its environment."""


def test_revbench_ui_serves_with_telemetry_off_marks_its_home_and_cleans_up(own_process: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    dump = tmp_path / "server-env.json"
    monkeypatch.setattr(cli_ui, "server_command", lambda host, port: [sys.executable, "-c", STUB_SERVER, str(port),
                                                                           str(dump)])
    port = free_port()
    result: dict[str, object] = {}
    runner = threading.Thread(target=lambda: result.update(zip(("code", "out", "err"),
                                                               run_cli("ui", "--port", str(port)))), daemon=True)
    runner.start()
    marker = own_process / prefect_ui.UI_MARKER
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline and runner.is_alive(), result
        time.sleep(0.2)
    written = json.loads(marker.read_text())
    assert written["api_url"] == f"http://127.0.0.1:{port}/api"
    env = json.loads(dump.read_text())
    assert env["PREFECT_HOME"] == str(own_process) and env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert env["DO_NOT_TRACK"] == "1" and env["PREFECT_UI_API_URL"] == written["api_url"] and env["PREFECT_API_URL"] is None
    found = prefect_ui.find_ui_server(own_process)  # what another command on the folder finds
    assert found is not None and found.api_url == written["api_url"] and found.pid == written["pid"]
    os.kill(int(written["pid"]), signal.SIGTERM)  # the server stops (as Ctrl-C stops it)
    runner.join(30)
    assert not runner.is_alive() and result["code"] == 0, result
    out = " ".join(str(result["out"]).split())
    assert f"Prefect UI: http://127.0.0.1:{port}" in out and "telemetry off" in out
    assert f"PREFECT_API_URL=http://127.0.0.1:{port}/api" in out
    assert not marker.exists()


def test_revbench_ui_refuses_a_taken_port_and_a_configured_api(own_process: Path, stub) -> None:
    api, _ = stub
    port = api.removesuffix("/api").rsplit(":", 1)[1]
    one_line_error(*run_cli("ui", "--port", port), 2, f"--port {port}", "taken by another program", "another --port")
    os.environ["PREFECT_API_URL"] = "http://prefect.example:4200/api"
    one_line_error(*run_cli("ui"), 2, "PREFECT_API_URL is set", "http://prefect.example:4200")
