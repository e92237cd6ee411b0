"""`revbench doctor`: every probe against the real local stand-ins (the replay server, the SMTP sink,
the survey server under uvicorn, the Prefect test server, a warehouse and a survey store), each
also in a fault mode (down, wrong credentials, a certificate nobody vouches for, a wrong version),
and the whole command as a user runs it: a table, one line per failure, no secret printed."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from revbench.app.doctor import needs, run_probes
from revbench.health import Probe, redact
from revbench.replay.mailsink import HANG, MailSink
from revbench.replay.server import AppServer, ReplayApp, ReplayServer, free_port, replay_overrides
from revbench.services import LABELS as SERVICES
from revbench.settings import ReplaySettings, Settings
from revbench.survey.server import create_app
from revbench.survey.tokens import Claim, LinkSigner
from revbench.warehouse import Warehouse
from revbench.warehouse.migrations import LATEST_VERSION
from revbench.warehouse.store import SurveyStore
from tests.support.common import run_cli, settings_env
from tests.support.survey import KEY
from tests.support.tls import self_signed_certificate

RELEASE_KEY = "release-key-" + "r" * 24
S2_KEY = "s2-key-" + "s" * 20
LLM_KEY = "sk-llm-" + "l" * 20
SMTP_LOGIN = ("survey-bot", "smtp-pass-" + "p" * 12)


def _one(settings: Settings, service: str, timeout: float = 5.0, prefect: str | None = None) -> Probe:
    [probe] = run_probes(settings, prefect, {service}, timeout)
    assert probe.service == service
    return probe


def _closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SYNTHETIC world small enough to build in a moment (no PDFs: the doctor asks for none)."""
    from datetime import date

    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import generate_world

    out = tmp_path_factory.mktemp("doctor-world")
    generate_world(out, WorldSpec(n_papers=20, seed=3, start=date(2026, 9, 1), end=date(2026, 9, 20), documents=False))
    return out


@pytest.fixture
def serve_replay(world: Path) -> Iterator[Callable[..., str]]:
    """``serve_replay(**ReplayApp kwargs)``: a replay server on the world, in this process; its base URL."""
    servers: list[ReplayServer] = []

    def start(**kw: Any) -> str:
        app = ReplayApp(ReplaySettings(), world_dir=world, **kw)
        server = ReplayServer(app).start()
        servers.append(server)
        return server.base

    yield start
    for s in servers:
        s.stop()


def _on(settings: Settings, base: str, **sections: dict[str, Any]) -> Settings:
    overrides = replay_overrides(base)
    for name, values in sections.items():
        overrides[name] = {**overrides.get(name, {}), **values}
    return settings.with_overrides(**overrides)


@contextmanager
def survey_server(settings: Settings, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """The survey app under uvicorn on a free loopback port, over TLS with ``tls`` (cert, key); its base URL."""
    if tls is None:
        with AppServer(create_app(settings)) as server:
            yield server.base
        return
    import uvicorn

    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning", access_log=False,
                            ssl_certfile=str(tls[0]), ssl_keyfile=str(tls[1]))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the survey server did not start"
        time.sleep(0.02)
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections (the kernel completes them) and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


# --- GROBID ---------------------------------------------------------------------------------------

def test_grobid_alive_with_its_version(serve_replay, settings: Settings) -> None:
    p = _one(_on(settings, serve_replay()), "grobid")
    assert (p.status, p.version, p.detail) == ("ok", "0.8.2", "alive") and p.latency_ms is not None


@pytest.mark.parametrize(("version", "status"), [("0.6.1", "ok"), ("0.5.5", "fail"), ("0.8.3-SNAPSHOT", "ok")])
def test_grobid_older_than_the_parser_is_tested_on_fails(serve_replay, settings: Settings, version: str, status: str) -> None:
    p = _one(_on(settings, serve_replay(grobid_version=version)), "grobid")
    assert (p.status, p.version) == (status, version)
    if status == "fail":
        assert "older than 0.6.1" in p.detail and "GROBID" in p.fix


def test_grobid_down_or_not_grobid(serve_replay, settings: Settings) -> None:
    down = _one(settings.with_overrides(grobid={"base_url": _closed_url()}), "grobid")
    assert down.status == "fail" and "cannot connect" in down.detail and "REVBENCH_GROBID__BASE_URL" in down.fix
    elsewhere = _one(settings.with_overrides(grobid={"base_url": serve_replay() + "/s2"}), "grobid")
    assert elsewhere.status == "fail" and "/api/isalive answered HTTP 404" in elsewhere.detail


# --- arXiv, Semantic Scholar, the LLM --------------------------------------------------------------

def test_arxiv_one_result_through_the_atom_parser(serve_replay, settings: Settings) -> None:
    p = _one(_on(settings, serve_replay()), "arxiv")
    assert p.status == "ok" and p.detail.startswith("Atom feed parsed: ") and " of " in p.detail
    down = _one(settings.with_overrides(arxiv={"base_url": _closed_url() + "/api/query"}), "arxiv")
    assert down.status == "fail" and "cannot connect" in down.detail and "REVBENCH_ARXIV__BASE_URL" in down.fix


def test_arxiv_rate_limited_is_a_warning_at_once(world: Path, settings: Settings) -> None:
    """A run waits arXiv's 429s out (up to its patience); the probe says so at once, not 900 s later."""
    app = ReplayApp(ReplaySettings(fault_rate=1.0, max_consecutive_faults=1000), world_dir=world,
                    fault_kinds={"arxiv": ("429_bare",)})
    with ReplayServer(app) as server:
        t0 = time.monotonic()
        p = _one(_on(settings, server.base), "arxiv")
    assert p.status == "warn" and "rate-limited right now (HTTP 429)" in p.detail and time.monotonic() - t0 < 5
    assert app.faults.stats()["injected"]["arxiv:429_bare"] == 1


def test_pdf_host_answers_or_not(serve_replay, settings: Settings) -> None:
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    replay = _one(_on(settings, serve_replay()), "pdf")  # the demo's world holds no such paper: still an answer
    assert replay.status == "ok" and "HTTP 404" in replay.detail and replay.latency_ms is not None

    async def pdf(request: Any) -> Response:
        return Response(b"", media_type="application/pdf")

    async def busy(request: Any) -> Response:
        return Response(b"", status_code=503)

    app = Starlette(routes=[Route("/ok/pdf/{name}", pdf), Route("/busy/pdf/{name}", busy)])
    with AppServer(app) as server:
        ok = _one(settings.with_overrides(pdf={"base_url": server.base + "/ok"}), "pdf")
        assert ok.status == "ok" and ok.detail == "a PDF answers at /pdf/1706.03762v1"
        busy_ = _one(settings.with_overrides(pdf={"base_url": server.base + "/busy"}), "pdf")
        assert busy_.status == "warn" and "HTTP 503" in busy_.detail
    down = _one(settings.with_overrides(pdf={"base_url": _closed_url()}), "pdf")
    assert down.status == "fail" and "cannot connect" in down.detail and "REVBENCH_PDF__BASE_URL" in down.fix
    assert "ingest" in needs(settings.with_overrides(refresh={"stages": ["ingest"]}), None)["pdf"]


def test_s2_keyless_and_keyed_pace(serve_replay, settings: Settings) -> None:
    base = serve_replay(api_keys={"s2": S2_KEY})
    keyless = _one(_on(settings, base, s2={"keyless_delay_seconds": 3.0}), "s2")
    assert keyless.status == "ok" and "keyless" in keyless.detail and "one request per 3 s" in keyless.detail
    keyed = _one(_on(settings, base, s2={"api_key": S2_KEY, "delay_seconds": 1.0}), "s2")
    assert keyed.status == "ok" and "key accepted" in keyed.detail and "one request per 1 s" in keyed.detail


def test_s2_wrong_key_or_down(serve_replay, settings: Settings) -> None:
    wrong = _one(_on(settings, serve_replay(api_keys={"s2": S2_KEY}), s2={"api_key": "not-the-key-" + "x" * 9}), "s2")
    assert wrong.status == "fail" and "refused: HTTP 403" in wrong.detail and "REVBENCH_S2__API_KEY" in wrong.fix
    down = _one(settings.with_overrides(s2={"base_url": _closed_url()}), "s2")
    assert down.status == "fail" and "cannot connect" in down.detail


def test_llm_model_listed_or_not_and_keys(serve_replay, settings: Settings) -> None:
    base = serve_replay(api_keys={"llm": LLM_KEY}, llm_models=("qwen-7b", "gpt-4o-mini"))
    ok = _one(_on(settings, base, llm={"api_key": LLM_KEY}), "llm")
    assert ok.status == "ok" and "gpt-4o-mini listed" in ok.detail
    missing = _one(_on(settings, base, llm={"api_key": LLM_KEY, "model": "llama-70b"}), "llm")
    assert missing.status == "fail" and "'llama-70b' is not among the 2" in missing.detail
    assert "REVBENCH_LLM__MODEL" in missing.fix
    wrong = _one(_on(settings, base, llm={"api_key": "sk-wrong-" + "w" * 12}), "llm")
    assert wrong.status == "fail" and "HTTP 401" in wrong.detail and "REVBENCH_LLM__API_KEY" in wrong.fix
    down = _one(settings.with_overrides(llm={"base_url": _closed_url() + "/v1"}), "llm")
    assert down.status == "fail" and "cannot connect" in down.detail
    unset = _one(settings, "llm")
    assert unset.status == "skipped" and "not configured" in unset.detail


# --- SMTP ------------------------------------------------------------------------------------------

@pytest.fixture
def tls_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MailSink, Path]]:
    """A sink that requires STARTTLS and a login, with a certificate this process trusts (SSL_CERT_FILE)."""
    cert, key = self_signed_certificate(tmp_path, "smtp")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with MailSink(tls=server_tls, require_starttls=True, login=SMTP_LOGIN) as sink:
        yield sink, cert


def test_smtp_starttls_and_login_and_nothing_sent(tls_sink, settings: Settings) -> None:
    sink, _ = tls_sink
    p = _one(settings.with_overrides(smtp=sink.smtp_overrides()), "smtp")
    assert p.status == "ok", p
    assert p.detail == f"EHLO, STARTTLS, AUTH as {SMTP_LOGIN[0]}; nothing sent"
    assert sink.logins == [(SMTP_LOGIN[0], True)] and sink.messages == [] and sink.attempts == 0


def test_smtp_wrong_password_is_535(tls_sink, settings: Settings) -> None:
    sink, _ = tls_sink
    s = settings.with_overrides(smtp={**sink.smtp_overrides(), "password": "wrong-" + "w" * 10})
    p = _one(s, "smtp")
    assert p.status == "fail" and "535" in p.detail and "REVBENCH_SMTP__PASSWORD" in p.fix
    # smtplib tries each mechanism the server offers (PLAIN, then LOGIN): every one refused
    assert sink.logins and set(sink.logins) == {(SMTP_LOGIN[0], False)} and sink.messages == []


def test_smtp_certificate_not_trusted(tls_sink, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    sink, _ = tls_sink
    monkeypatch.delenv("SSL_CERT_FILE")
    p = _one(settings.with_overrides(smtp=sink.smtp_overrides()), "smtp")
    assert p.status == "fail" and "certificate is not trusted" in p.detail and sink.logins == []


def test_smtp_without_starttls_offered(settings: Settings) -> None:
    with MailSink() as plain:
        p = _one(settings.with_overrides(smtp={**plain.smtp_overrides(), "security": "starttls"}), "smtp")
        assert p.status == "fail" and "does not offer STARTTLS" in p.detail
        local = _one(settings.with_overrides(smtp=plain.smtp_overrides()), "smtp")
        assert local.status == "warn" and "plain text on this machine" in local.detail


def test_smtp_down_silent_or_in_clear(settings: Settings) -> None:
    down = _one(settings.with_overrides(smtp={"host": "127.0.0.1", "port": free_port(), "security": "none"}), "smtp")
    assert down.status == "fail" and "cannot connect" in down.detail
    with MailSink(connect=lambda n: HANG) as hung:  # accepts, never greets
        silent = _one(settings.with_overrides(smtp=hung.smtp_overrides()), "smtp", timeout=0.5)
    assert silent.status == "fail" and silent.detail == "no greeting within 0.5 s"
    clear = _one(settings.with_overrides(smtp={"host": "mail.university.org", "security": "none"}), "smtp")
    assert clear.status == "fail" and "in clear" in clear.detail  # refused before any connection


@contextmanager
def dripping_server(reply: bytes) -> Iterator[int]:
    """A port that answers ``reply`` one byte every 0.1 s, then nothing: each read gets a byte
    well within any per-read timeout, so only a deadline on the whole exchange ends it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    stop = threading.Event()

    def serve() -> None:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn:
            for byte in reply:
                if stop.wait(0.1):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
            stop.wait()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        sock.close()
        thread.join(5)


def test_smtp_dripping_greeting_ends_within_the_probes_own_deadline(settings: Settings) -> None:
    with dripping_server(b"220 " + b"x" * 200 + b"\r\n") as port:
        p = _one(settings.with_overrides(smtp={"host": "127.0.0.1", "port": port, "security": "none"}), "smtp", timeout=0.5)
        # the probe's own report (not the runner's "no answer" for a probe it left behind), and no thread left
        assert p.status == "fail" and p.detail == "no greeting within 0.5 s", p
        assert not [t for t in threading.enumerate() if t.name == "doctor-smtp"]


# --- the survey server -----------------------------------------------------------------------------

def _survey(settings: Settings, base: str, **survey: Any) -> Settings:
    return settings.with_overrides(survey={"signing_key": KEY, "base_url": base, **survey})


def test_survey_over_https_needs_a_trusted_certificate(tmp_path: Path, settings: Settings,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    cert, key = self_signed_certificate(tmp_path, "survey")
    server_side = _survey(settings, "https://survey.placeholder")
    with survey_server(server_side, tls=(cert, key)) as base:
        untrusted = _one(_survey(settings, base), "survey")
        assert untrusted.status == "fail" and "certificate is not trusted" in untrusted.detail
        assert "REVBENCH_HTTP__CA_BUNDLE" in untrusted.fix
        trusted = _one(_survey(settings, base).with_overrides(http={"ca_bundle": cert}), "survey")
        assert trusted.status == "ok" and trusted.detail == "certificate verified; a signed link verifies, another refused"
        other_key = _survey(settings, base, signing_key="another-key-" + "o" * 20).with_overrides(http={"ca_bundle": cert})
        mismatch = _one(other_key, "survey")
        assert mismatch.status == "fail" and "another signing key" in mismatch.detail
        assert "REVBENCH_SURVEY__SIGNING_KEY" in mismatch.fix
    missing = _one(_survey(settings, base).with_overrides(http={"ca_bundle": tmp_path / "nowhere.pem"}), "survey")
    assert missing.status == "fail" and "REVBENCH_HTTP__CA_BUNDLE" in missing.detail


def test_survey_plain_http_is_a_warning_on_loopback_and_a_failure_elsewhere(settings: Settings) -> None:
    s = _survey(settings, "http://127.0.0.1:9")
    with survey_server(s) as base:
        local = _one(_survey(settings, base), "survey")
    assert local.status == "warn" and "a signed link verifies" in local.detail and "plain http" in local.detail
    store = SurveyStore(s.survey_store_path)
    assert store.max_event_id() == 0 and store.opted_out() == {}  # the probe recorded nothing
    clear = _one(_survey(settings, "http://survey.university.org"), "survey")
    assert clear.status == "fail" and "travel in clear" in clear.detail
    down = _one(_survey(settings, _closed_url()), "survey")
    assert down.status == "fail" and "cannot connect" in down.detail
    unsigned = _one(settings.with_overrides(survey={"base_url": "http://127.0.0.1:9"}), "survey")
    assert unsigned.status == "fail" and "REVBENCH_SURVEY__SIGNING_KEY" in unsigned.fix


def test_the_probe_route_accepts_only_probe_links(settings: Settings) -> None:
    s = _survey(settings, "http://127.0.0.1:9")
    signer = LinkSigner(s.survey.signing_key)
    with survey_server(s) as base:
        assert httpx.get(f"{base}/healthz/link/{signer.probe_token()}").json() == {"ok": True}
        page = httpx.get(f"{base}/healthz/link/{signer.sign(Claim('inv-1', 'page'))}")
        assert page.status_code == 403 and page.json()["reason"] == "not a probe link"
        forged = httpx.get(f"{base}/healthz/link/{LinkSigner(SecretStr(KEY.replace('k', 'z'))).probe_token()}")
        assert forged.status_code == 403 and forged.json()["reason"] == "bad signature"
        # and no rating route takes a probe link
        assert httpx.get(f"{base}/i/{signer.probe_token()}").status_code == 403


def test_the_probe_route_is_rate_limited_like_every_link(settings: Settings) -> None:
    s = _survey(settings, "http://127.0.0.1:9", rate_limit_per_minute=2)
    signer = LinkSigner(s.survey.signing_key)
    token = signer.probe_token()
    with survey_server(s) as base:
        with httpx.Client() as client:
            answers = [client.get(f"{base}/healthz/link/{token}") for _ in range(3)]
            forged = client.get(f"{base}/healthz/link/{LinkSigner(SecretStr(KEY.replace('k', 'z'))).probe_token()}")
    assert [a.status_code for a in answers] == [200, 200, 429] and answers[2].json()["reason"] == "too many requests"
    assert forged.status_code == 403  # refused before any per-link state exists


# --- the Prefect API -------------------------------------------------------------------------------

def test_prefect_api_health_and_version(prefect_server: str, settings: Settings) -> None:
    import importlib.metadata

    p = _one(settings, "prefect", prefect=prefect_server)
    assert p.status == "ok" and p.version == importlib.metadata.version("prefect")
    down = _one(settings, "prefect", prefect=_closed_url() + "/api")
    assert down.status == "fail" and "PREFECT_API_URL" in down.fix
    unset = _one(settings, "prefect")
    assert unset.status == "skipped" and "not configured" in unset.detail


def test_isolation_fails_when_a_curator_surface_answers_from_the_survey_side(prefect_server: str,
                                                                            settings: Settings) -> None:
    """Run from the survey server's side, the isolation probe fails on a Prefect API (here the
    session's real one) or a GROBID that accepts a connection, naming it, and passes when none
    does; a plain `revbench doctor` (the flows' side, where they are reachable) never runs it."""
    reached = _one(settings, "isolation", prefect=prefect_server)
    port = prefect_server.split(":")[2].split("/")[0]
    assert reached.status == "fail" and f"Prefect API at 127.0.0.1:{port}" in reached.detail
    assert "PrivateNetwork=yes" in reached.fix
    cut_off = _on(settings, _closed_url(), grobid={"base_url": _closed_url()})
    alone = _one(cut_off, "isolation", prefect=_closed_url() + "/api")
    assert alone.status == "ok" and "none of" in alone.detail
    everything = run_probes(cut_off, None, None, 1)
    assert "isolation" not in {p.service for p in everything}


# --- the data folder, the warehouse, the survey store ----------------------------------------------

def test_data_folder_warehouse_and_store(settings: Settings) -> None:
    fresh = {p.service: p for p in run_probes(settings, None, {"data", "warehouse", "store"}, 5)}
    assert fresh["data"].status == "ok" and "not there yet" in fresh["data"].detail
    assert fresh["warehouse"].detail.startswith("none yet") and fresh["store"].detail.startswith("none yet")
    with Warehouse.open(settings.warehouse_path):
        pass
    SurveyStore(settings.survey_store_path).close()
    got = {p.service: p for p in run_probes(settings, None, {"data", "warehouse", "store"}, 5)}
    assert got["data"].status == "ok" and got["data"].detail.startswith("writable; ")
    assert got["warehouse"].status == "ok" and got["warehouse"].version == f"schema {LATEST_VERSION} (code {LATEST_VERSION})"
    assert got["store"].status == "ok" and "0 events" in got["store"].detail


def test_a_warehouse_newer_than_the_code_fails(settings: Settings) -> None:
    import duckdb

    with Warehouse.open(settings.warehouse_path):
        pass
    con = duckdb.connect(str(settings.warehouse_path))
    con.execute("INSERT INTO schema_version VALUES (?, now(), 'from the future')", [LATEST_VERSION + 1])
    con.close()
    p = _one(settings, "warehouse")
    assert p.status == "fail" and f"schema {LATEST_VERSION + 1} is newer than this code's {LATEST_VERSION}" in p.detail
    assert "upgrade revbench" in p.fix


def test_a_warehouse_held_by_a_run_passes_with_a_note(settings: Settings) -> None:
    with Warehouse.open(settings.warehouse_path):
        pass
    code = (f"import time\nfrom revbench.warehouse import Warehouse\nwh = Warehouse({str(settings.warehouse_path)!r})\n"
            "print('held', flush=True)\ntime.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        p = _one(settings, "warehouse")
    finally:
        holder.kill()
        holder.wait()
    assert p.status == "ok" and "in use by another process" in p.detail


def test_a_damaged_store_or_a_data_path_that_is_a_file(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True)
    settings.survey_store_path.write_bytes(b"not a database, " * 64)
    store = _one(settings, "store")
    assert store.status == "fail" and "cannot be read" in store.detail and "backup" in store.fix
    as_file = settings.with_overrides(data_dir=settings.data_dir / "survey.sqlite")
    data = _one(as_file, "data")
    assert data.status == "fail" and "not a folder" in data.detail


# --- the settings ----------------------------------------------------------------------------------

def test_settings_secrets_and_placeholders(settings: Settings) -> None:
    bad = settings.with_overrides(
        survey={"signing_key": "change-me-" + "x" * 10}, release={"id_key": None},
        smtp={"host": "smtp.example.com", "username": "bot", "password": None}, s2={"api_key": ""})
    p = _one(bad, "settings")
    assert p.status == "fail"
    for needle in ("REVBENCH_SURVEY__SIGNING_KEY holds a template's placeholder", "REVBENCH_RELEASE__ID_KEY is not set",
                   "REVBENCH_SMTP__PASSWORD is not set", "REVBENCH_SMTP__HOST names the example host smtp.example.com"):
        assert needle in p.detail, p.detail
    assert bad.s2.api_key is None and "S2__API_KEY" not in p.detail  # `KEY=` is unset: no key, nothing to flag
    template = settings.with_overrides(  # what a production .env template holds until it is filled in
        http={"user_agent": "revbench/0.1 (mailto:change-me@example.org)"},
        survey={"signing_key": KEY, "team": "change-me", "base_url": "https://survey.example.org",
                "sender_email": "survey@example.org"},
        release={"id_key": RELEASE_KEY}, smtp={"host": "smtp.university.org"})
    t = _one(template, "settings")
    for needle in ("REVBENCH_HTTP__USER_AGENT holds a template's placeholder", "REVBENCH_SURVEY__TEAM holds a template's",
                   "REVBENCH_SURVEY__BASE_URL names the example host survey.example.org",
                   "REVBENCH_SURVEY__SENDER_EMAIL names the example host example.org"):
        assert needle in t.detail, t.detail
    ingest_only = settings.with_overrides(refresh={"stages": ["ingest"]})
    assert _one(ingest_only, "settings").status == "ok"  # no survey, no release: their keys are not needed
    good = settings.with_overrides(survey={"signing_key": KEY, "sender_email": "survey@lab.university.org"},
                                   release={"id_key": RELEASE_KEY}, smtp={"host": "127.0.0.1"})
    assert _one(good, "settings").status == "ok"


# --- the whole command ------------------------------------------------------------------------------

def _demo_like(settings: Settings, replay_base: str, sink: MailSink, survey_base: str) -> Settings:
    """What `revbench demo` runs with: every client on the replay server, the plain local sink, the
    survey server on loopback, its own keys."""
    return _on(settings, replay_base).with_overrides(
        smtp=sink.smtp_overrides(), survey={"signing_key": KEY, "base_url": survey_base},
        release={"id_key": RELEASE_KEY})


def _env(monkeypatch: pytest.MonkeyPatch, s: Settings) -> None:
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)


def test_the_whole_doctor_against_the_demo_stand_ins(serve_replay, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    with MailSink() as sink:
        probe_side = settings.with_overrides(survey={"signing_key": KEY})
        with survey_server(probe_side) as survey_base:
            s = _demo_like(settings, serve_replay(), sink, survey_base)
            _env(monkeypatch, s)
            code, out, err = run_cli("doctor")
            assert code == 0, out + err
            for name, label in SERVICES.items():
                assert (label in out) is (name != "isolation")  # the survey's side is asked for by name
            assert "FAIL" not in out and "ready: " in out
            code, out, _ = run_cli("doctor", "--json")
        assert sink.messages == [] and sink.attempts == 0
    body = json.loads(out)
    assert code == 0 and body["ok"] is True and [p["service"] for p in body["probes"]] == [n for n in SERVICES if n != "isolation"]
    status = {p["service"]: p["status"] for p in body["probes"]}
    assert status["prefect"] == "skipped" and status["grobid"] == "ok" and status["smtp"] == "warn"


def test_each_service_down_in_turn_names_it(serve_replay, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with MailSink() as sink:
        s = _demo_like(settings, serve_replay(), sink, "http://127.0.0.1:9")
        closed = _closed_url()
        for service, override in [("grobid", {"grobid": {"base_url": closed}}), ("s2", {"s2": {"base_url": closed}}),
                                  ("llm", {"llm": {"base_url": closed + "/v1"}})]:
            _env(monkeypatch, s.with_overrides(**override))
            code, out, _ = run_cli("doctor", "--only", "grobid,s2,llm", "--timeout", "2")
            fails = [ln for ln in out.splitlines() if ln.startswith("FAIL ")]
            assert code == 1 and len(fails) == 1 and SERVICES[service] in fails[0] and closed in fails[0], out


def test_a_service_no_stage_needs_is_not_needed(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings.with_overrides(refresh={"stages": ["evaluate"]})
    probes = {p.service: p for p in run_probes(s, None, None, 1)}
    for name in ("grobid", "arxiv", "s2", "smtp", "survey", "store"):
        assert probes[name].status == "skipped" and probes[name].detail.startswith("not needed"), probes[name]
    asked = _one(s.with_overrides(grobid={"base_url": _closed_url()}), "grobid")
    assert asked.status == "warn" and "not needed by the configured stages" in asked.detail
    _env(monkeypatch, s)
    code, out, _ = run_cli("doctor", "--only", "settings,grobid,smtp")
    assert code == 0 and "not needed" in out


def test_wrong_only_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_cli("doctor", "--only", "grobid,smpt")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == "" and len(lines) == 1
    assert "'smpt'" in lines[0] and "did you mean smtp?" in lines[0]


def test_a_silent_service_costs_one_timeout_not_one_each(settings: Settings) -> None:
    with silent_server() as port:
        silent = f"http://127.0.0.1:{port}"
        s = settings.with_overrides(grobid={"base_url": silent}, s2={"base_url": silent}, llm={"base_url": silent},
                                    smtp={"host": "127.0.0.1", "port": port, "security": "none"},
                                    survey={"signing_key": KEY, "base_url": silent})
        probes = run_probes(s, silent, {"grobid", "s2", "llm", "smtp", "survey", "prefect"}, 0.5)
    for p in probes:
        said = "no greeting" if p.service == "smtp" else "no answer"
        assert p.status == "fail" and p.detail == f"{said} within 0.5 s", p


def test_no_secret_is_printed(serve_replay, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    password = "hunter2-" + "q" * 12
    closed = free_port()
    s = _on(settings, serve_replay(api_keys={"s2": S2_KEY, "llm": LLM_KEY}),
            s2={"api_key": "wrong-" + S2_KEY}, llm={"api_key": "wrong-" + LLM_KEY}).with_overrides(
        smtp={"host": "127.0.0.1", "port": closed, "username": "bot", "password": password, "security": "none"},
        survey={"signing_key": KEY, "base_url": f"http://127.0.0.1:{closed}"}, release={"id_key": RELEASE_KEY})
    _env(monkeypatch, s)
    # the one URL with a password the doctor still meets: the settings refuse one in theirs
    monkeypatch.setenv("PREFECT_API_URL", f"http://admin:{password}@127.0.0.1:{closed}/api")
    monkeypatch.setenv("COLUMNS", "300")
    for args in (["doctor"], ["doctor", "--json"]):
        code, out, err = run_cli(*args, "--timeout", "2")
        assert code == 1
        for secret in (password, "wrong-" + S2_KEY, "wrong-" + LLM_KEY, KEY, RELEASE_KEY):
            assert secret not in out + err
    assert f"admin:***@127.0.0.1:{closed}" in out


def test_redact() -> None:
    assert redact("https://user:pw@host:1/x?api_key=abc&q=1") == "https://user:***@host:1/x?api_key=***&q=1"
    assert redact("http://127.0.0.1:8070") == "http://127.0.0.1:8070"
    assert redact("http://lu:pw@[::1") == "http://lu:***@[::1"  # a URL urlsplit refuses
    assert redact("http://user@host/x") == "http://user@host/x"


def test_no_password_of_a_malformed_url_is_printed(settings: Settings) -> None:
    password = "llm-url-pass-" + "m" * 8
    for url in (f"http://lu:{password}@[::1", f"http://g:{password.replace('-', '%2D')}x@127.0.0.1:{free_port()}"):
        [p] = run_probes(settings, url, {"prefect"}, 2)
        text = json.dumps(p.__dict__)
        assert password not in text and password.replace("-", "%2D") not in text
        assert p.status == "fail" and "PREFECT_API_URL holds credentials" in p.detail and ":***@" in p.url
        assert "PREFECT_API_AUTH_STRING" in p.fix


def test_a_huge_probe_timeout_setting_is_capped(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    # REVBENCH_HTTP__PROBE_TIMEOUT_SECONDS has no upper bound; a socket or a thread join refuses 1e12
    s = settings.with_overrides(http={"probe_timeout_seconds": 1e12}, grobid={"base_url": _closed_url()})
    _env(monkeypatch, s)
    code, out, err = run_cli("doctor", "--only", "grobid", "--json")
    assert code == 1 and json.loads(out)["probes"][0]["detail"].startswith("cannot connect"), out + err


def test_the_llm_is_needed_where_a_configured_stage_runs_a_scorer_that_calls_it(settings: Settings) -> None:
    def need(stages: list[str], scorers: list[str], base_url: str | None = "http://127.0.0.1:9/v1",
             **sections: dict[str, Any]) -> list[str]:
        s = settings.with_overrides(refresh={"stages": stages}, ratings={"evaluate_scorers": scorers, **sections.pop(
            "ratings", {})}, llm={"base_url": base_url}, **sections)
        return needs(s, None)["llm"]

    # the evaluate stage runs the scorers whatever REVBENCH_RATINGS__EVALUATE_AFTER says
    assert need(["evaluate"], ["trivial", "llm"], ratings={"evaluate_after": False}) == ["evaluate"]
    # a refresh's ratings stage evaluates nothing; a release only with REVBENCH_RELEASE__EVALUATE_AFTER
    assert need(["ratings"], ["llm"]) == []
    assert need(["release"], ["llm"], release={"evaluate_after": False}) == []
    assert need(["release"], ["llm"], release={"evaluate_after": True}) == ["release"]
    # rate calls the LLM for keywords only when asked to (or, with auto, when one is configured)
    assert need(["evaluate"], ["rate:keywords=file"]) == []
    assert need(["evaluate"], ["rate"]) == ["evaluate"] and need(["evaluate"], ["rate"], base_url=None) == []
    # a scorer that needs an LLM none is configured for fails the doctor, as it would fail the run
    s = settings.with_overrides(refresh={"stages": ["evaluate"]}, ratings={"evaluate_scorers": ["rate:keywords=llm"]})
    p = _one(s, "llm")
    assert p.status == "fail" and "REVBENCH_LLM__BASE_URL is not set" in p.detail and "rate:keywords=llm" in p.detail


# --- what would fail in production (issue 33) --------------------------------------------------------

def test_a_survey_server_that_accepts_a_link_this_revbench_did_not_sign_fails(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _survey(settings, "http://127.0.0.1:9")
    with survey_server(s) as base:
        honest = _one(_survey(settings, base), "survey")
        assert honest.status == "warn"
        # the same server, now taking any link as a probe link: one that checks no signature
        monkeypatch.setattr(LinkSigner, "verify", lambda self, token: Claim("doctor", "probe"))
        lying = _one(_survey(settings, base), "survey")
        assert lying.status == "fail" and "accepts a link this revbench did not sign" in lying.detail
        assert "another signing key, or does not check signatures" in lying.detail
        _env(monkeypatch, _survey(settings, base))
        code, out, _ = run_cli("doctor", "--only", "survey")
    [line] = [ln for ln in out.splitlines() if ln.startswith("FAIL ")]
    assert code == 1 and base in line and "accepts a link this revbench did not sign" in line
    assert "a signed link verifies, another refused" in honest.detail


@contextmanager
def html_server(html_at: tuple[str, ...] = ("/health", "/admin/version")) -> Iterator[str]:
    """A web server that answers an HTML page at ``html_at`` and Prefect's own answers elsewhere."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    def route(path: str, body: object) -> Route:
        async def answer(request: Any) -> Response:
            return HTMLResponse("<!doctype html><title>Welcome</title><p>It works!") if path in html_at else JSONResponse(body)
        return Route(path, answer)

    app = Starlette(routes=[route("/health", True), route("/admin/version", "3.8.8")])
    with AppServer(app) as server:
        yield server.base


def test_an_html_page_at_prefect_api_url_is_not_a_prefect_api(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    with html_server() as base:
        page = _one(settings, "prefect", prefect=base)
        monkeypatch.setenv("PREFECT_API_URL", base)
        code, out, _ = run_cli("doctor", "--only", "prefect")
    assert page.status == "fail" and "/health answered text/html" in page.detail and "not a Prefect API" in page.detail
    assert "PREFECT_API_URL" in page.fix
    assert code == 1 and [ln for ln in out.splitlines() if ln.startswith("FAIL ")]
    with html_server(("/admin/version",)) as base:  # healthy, and then a page where the version should be
        version = _one(settings, "prefect", prefect=base)
    assert version.status == "fail" and "/admin/version answered HTTP 200 text/html" in version.detail


def test_a_prefect_api_off_this_machine_without_credentials_fails(settings: Settings) -> None:
    p = _one(settings, "prefect", prefect="http://prefect.invalid:4200/api")
    assert p.status == "fail" and "PREFECT_API_AUTH_STRING is not set for an API off this machine" in p.detail


def test_prefect_answering_without_credentials_the_deployment_says_it_has(
        prefect_server: str, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = "curator:" + "c" * 24
    [p] = run_probes(settings, prefect_server, {"prefect"}, 10, prefect_auth=auth)
    assert p.status == "fail" and "answered HTTP 200 without credentials, though PREFECT_API_AUTH_STRING is set" in p.detail
    assert "PREFECT_SERVER_API_AUTH_STRING" in p.fix
    monkeypatch.setenv("PREFECT_API_URL", prefect_server)
    monkeypatch.setenv("PREFECT_API_AUTH_STRING", auth)
    code, out, err = run_cli("doctor", "--only", "prefect", "--timeout", "10")
    assert code == 1 and "without credentials" in out and auth not in out + err


@pytest.fixture(scope="module")
def prefect_with_auth() -> Iterator[tuple[str, str]]:
    """Prefect's own REST API (its auth middleware, its health and version routes) with an auth
    string, in this process: (its URL, the auth string). The routes the doctor asks touch no database."""
    from prefect.server.api.server import create_api_app
    from prefect.settings import PREFECT_SERVER_API_AUTH_STRING, temporary_settings

    auth = "curator:" + "a" * 24
    with temporary_settings({PREFECT_SERVER_API_AUTH_STRING: auth}):
        app = create_api_app(ignore_cache=True)
    with AppServer(app) as server:
        yield server.base, auth


def test_prefect_with_its_credentials_passes_and_wrong_ones_name_the_auth_string(
        prefect_with_auth: tuple[str, str], settings: Settings) -> None:
    base, auth = prefect_with_auth
    [ok] = run_probes(settings, base, {"prefect"}, 10, prefect_auth=auth)
    assert ok.status == "ok" and ok.detail.startswith("healthy with credentials, refused without"), ok
    [wrong] = run_probes(settings, base, {"prefect"}, 10, prefect_auth="curator:wrong-" + "w" * 12)
    assert wrong.status == "fail" and "HTTP 401: PREFECT_API_AUTH_STRING was refused" in wrong.detail
    assert "wrong-" not in wrong.detail + wrong.fix
    [none] = run_probes(settings, base, {"prefect"}, 10)
    assert none.status == "fail" and "HTTP 401: the server wants credentials" in none.detail
    assert "PREFECT_API_AUTH_STRING" in none.fix


@contextmanager
def endless_server() -> Iterator[str]:
    """A socket server that answers every request 200 and a body that never ends (64 KiB every
    5 ms, about 13 MB/s, until the client hangs up); its base URL. The pace keeps a reader that
    does not stop (the doctor before issue 33) from taking gigabytes before its timeout."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    stop = threading.Event()
    chunk = b"x" * 65536

    def one(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)  # the request (the probes' fit in one read)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
                while not stop.wait(0.005):
                    conn.sendall(chunk)
            except OSError:
                pass

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        sock.close()
        thread.join(5)


def test_an_endless_answer_ends_each_probe_in_one_line_within_the_timeout(settings: Settings) -> None:
    import tracemalloc

    answer_cap, models_cap = 64 * 1024, 4 * 2**20  # revbench.health.ANSWER_CAP, revbench.clients.llm.MODELS_CAP
    with endless_server() as base:
        s = settings.with_overrides(grobid={"base_url": base}, arxiv={"base_url": base + "/api/query"},
                                    s2={"base_url": base}, llm={"base_url": base + "/v1"},
                                    survey={"signing_key": KEY, "base_url": base})
        names = {"grobid", "arxiv", "s2", "llm", "survey", "prefect"}
        tracemalloc.start()
        t0 = time.monotonic()
        try:
            probes = run_probes(s, base, names, 5)
            took = time.monotonic() - t0
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    said = {p.service: p.detail for p in probes}
    asked = {"grobid": "/api/isalive", "arxiv": "", "s2": "/paper/batch", "llm": "/models", "survey": "/healthz",
             "prefect": "/health"}
    for name, path in asked.items():
        cap = models_cap if name == "llm" else answer_cap
        assert said[name].startswith(path) and said[name].endswith(f"answered more than {cap} bytes"), said
    assert all(p.status == "fail" and "\n" not in p.detail + p.fix for p in probes)
    assert took < 5, took  # each probe ends at its cap (under tracemalloc, ~2 s on two busy cores), not at the timeout
    assert peak < 32 * 2**20, peak  # the largest cap is 4 MiB; the answers were endless


@pytest.mark.parametrize("seconds", ["601", "61"])
def test_timeout_over_a_minute_is_a_usage_error(seconds: str, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    _env(monkeypatch, settings.with_overrides(grobid={"base_url": _closed_url()}))
    code, out, err = run_cli("doctor", "--only", "grobid", "--timeout", seconds)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == "" and len(lines) == 1, out + err
    assert "--timeout" in lines[0] and "less than or equal to 60 " in lines[0]


URL_SETTINGS_OF_EVERY_SECTION = ["REVBENCH_ARXIV__BASE_URL", "REVBENCH_S2__BASE_URL", "REVBENCH_OPENALEX__BASE_URL",
                                 "REVBENCH_PDF__BASE_URL", "REVBENCH_GROBID__BASE_URL", "REVBENCH_LLM__BASE_URL",
                                 "REVBENCH_SURVEY__BASE_URL", "REVBENCH_RELEASE__URL", "REVBENCH_RUNNER__DASK_ADDRESS"]


def test_every_address_setting_is_checked() -> None:
    """Each setting named like an address (``*url``, ``*_address``) is in the list below: a new one is tested too."""
    from revbench.settings import URL_FIELD, env_names

    found = [n for n in env_names() if URL_FIELD.search(n.rpartition("__")[2].lower())]
    assert found == URL_SETTINGS_OF_EVERY_SECTION


@pytest.mark.parametrize("var", URL_SETTINGS_OF_EVERY_SECTION)
def test_credentials_in_an_address_setting_are_refused(var: str, monkeypatch: pytest.MonkeyPatch) -> None:
    password = "pw-" + "p" * 14
    scheme = "tcp" if var.endswith("DASK_ADDRESS") else "https"
    monkeypatch.setenv(var, f"{scheme}://alice:{password}@host.lab.org:4443/x")
    code, out, err = run_cli("doctor", "--only", "settings")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert var in lines[0] and "credentials do not belong in a URL" in lines[0] and "***@host.lab.org" in lines[0]
    assert password not in err and "alice" not in err
    if var in ("REVBENCH_S2__BASE_URL", "REVBENCH_LLM__BASE_URL"):
        assert var.replace("BASE_URL", "API_KEY") in lines[0]  # where the key goes instead
    monkeypatch.setenv(var, f"{scheme}://{password}@host.lab.org")  # a token alone is a credential too
    assert run_cli("doctor", "--only", "settings")[0] == 2


def test_a_reminder_cannot_carry_a_link_with_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The survey's base URL is written into every email's links: one with credentials stops the
    command at its settings, in one line, before any email is rendered."""
    monkeypatch.setenv("REVBENCH_SURVEY__BASE_URL", "https://alice:link-pass-123@survey.lab.org")
    monkeypatch.setenv("REVBENCH_SURVEY__SIGNING_KEY", KEY)
    for args in (["survey", "remind", "--dry-run"], ["survey", "send", "--dry-run"]):
        code, out, err = run_cli(*args)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and "REVBENCH_SURVEY__BASE_URL" in lines[0], err
        assert "link-pass-123" not in out + err
    assert not list(tmp_path.rglob("*.eml"))
