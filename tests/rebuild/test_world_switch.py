"""A demo data folder belongs to one world: when the world changes (another seed, or a rebuild of
other benchmark files), the warehouse, the survey store and the releases are set aside together,
never mixed; and the simulated mail scanners stay on the machine."""

from __future__ import annotations

from revbench.app.demo import demo_warehouse_for
from revbench.settings import Settings


def test_a_new_world_sets_the_warehouse_and_the_survey_store_aside_together(settings: Settings) -> None:
    data = settings.data_dir
    data.mkdir(parents=True, exist_ok=True)
    demo_warehouse_for(settings, {"base_key": "world-a", "spec_key": "world-a", "format": 1})
    for name in ("warehouse.duckdb", "warehouse.duckdb.wal", "survey.sqlite", "survey.sqlite-wal"):
        (data / name).write_text(name)
    (settings.releases_dir / "v1").mkdir(parents=True)
    demo_warehouse_for(settings, {"base_key": "world-a", "spec_key": "world-a", "format": 1})  # the same world: nothing moves
    assert (data / "warehouse.duckdb").exists() and (data / "survey.sqlite").exists()
    demo_warehouse_for(settings, {"base_key": "world-b", "spec_key": "world-b", "format": 1})
    aside = [p for p in data.iterdir() if p.name.startswith("previous-demo-")]
    assert len(aside) == 1
    assert sorted(p.name for p in aside[0].iterdir()) == [
        settings.releases_dir.name, "survey.sqlite", "survey.sqlite-wal", "warehouse.duckdb", "warehouse.duckdb.wal"]
    assert (aside[0] / settings.releases_dir.name / "v1").is_dir() and not settings.releases_dir.exists()
    assert not list(data.glob("warehouse.duckdb*")) and not list(data.glob("survey.sqlite*"))
    assert (data / ".demo-world").read_text().startswith("world-b-format1-pools")


def test_other_pool_settings_set_the_demo_warehouse_aside_too(settings: Settings) -> None:
    """Round 1 cannot be re-run under other pool settings (a changed default, a REVBENCH_POOLS__
    variable): the folder starts afresh instead of the demo stopping at its second run."""
    data = settings.data_dir
    data.mkdir(parents=True, exist_ok=True)
    world = {"base_key": "world-a", "spec_key": "world-a", "format": 1}
    demo_warehouse_for(settings, world)
    (data / "warehouse.duckdb").write_text("round 1 at tau 0.4")
    demo_warehouse_for(settings, world)
    assert (data / "warehouse.duckdb").exists()
    demo_warehouse_for(settings.with_overrides(pools={"tau": 0.6}), world)
    [aside] = [p for p in data.iterdir() if p.name.startswith("previous-demo-")]
    assert (aside / "warehouse.duckdb").read_text() == "round 1 at tau 0.4" and not (data / "warehouse.duckdb").exists()


def test_a_scanner_opens_only_the_survey_servers_links_and_fails_loudly_when_it_is_down() -> None:
    import threading
    from email.message import EmailMessage
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx
    import pytest

    from revbench.synth.respondents import scan

    seen: list[str] = []

    class Answer(BaseHTTPRequestHandler):
        def _ok(self) -> None:
            seen.append(f"{self.command} {self.path}")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(b"ok")

        do_GET = do_HEAD = _ok

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    def message(survey_port: int) -> EmailMessage:
        msg = EmailMessage()
        msg["To"] = "ada@lab.example"
        # A real LR-bench title carries a web address: a scanner must not take the panel off the machine.
        msg.set_content(f"1. Graph agents (https://github.com/lab/agents)\nOpt out: http://127.0.0.1:{survey_port}/u/tok\n")
        return msg

    try:
        assert scan(message(port), seed=0) == 2
        assert sorted(seen) == ["GET /u/tok", "HEAD /u/tok"]
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(httpx.ConnectError):  # the survey server down is not passed over
        scan(message(port), seed=0)
