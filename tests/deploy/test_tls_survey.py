"""The survey behind TLS as deploy/ runs it: Debian's caddy with deploy/Caddyfile (Caddy's internal
CA, as on a test host) in front of `revbench survey serve` on 127.0.0.1; chromium rates a paper
through the HTTPS link of an invitation, trusting Caddy's root the way a system does (a certificate
database, not an ignored error); and `revbench doctor` passes its survey check there. As the
systemd units run it, the survey server listens on a unix socket instead, and Caddy proxies to it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from revbench.flows.survey import survey_flow
from revbench.survey.privilege import foreign_secrets
from revbench.replay.mailsink import MailSink
from revbench.replay.server import free_port
from revbench.settings import Settings
from revbench.warehouse.store import SurveyStore
from tests.support.browser import chromium
from tests.support.cli import cli
from tests.support.common import settings_env
from tests.support.survey import KEY, survey_server_process

pytestmark = pytest.mark.slow


@pytest.fixture
def tls_survey(survey_settings: Settings,
               caddy_front: Callable[..., Any]) -> Iterator[tuple[Settings, Any, subprocess.Popen[str]]]:
    """`revbench survey serve` in its own process behind Caddy, with settings whose links use
    Caddy's HTTPS address; yields the settings, Caddy (a ``Front``, see conftest.py) and the survey
    server's process."""
    port = free_port()
    s = survey_settings.with_overrides(survey={"base_url": f"https://127.0.0.1:{port}"})
    with survey_server_process(s) as (upstream, proc), caddy_front(port, upstream.removeprefix("http://")) as front:
        yield s, front, proc


def trusting_home(home: Path, root: Path, certutil: str) -> Path:
    """A HOME whose NSS certificate database (where chromium on Linux reads the roots a user
    trusts) holds Caddy's root as a trusted CA."""
    # chromium reads ~/.pki/nssdb where it exists, and newer builds otherwise create and read
    # ~/.local/share/pki/nssdb: the root goes in both.
    for db in (home / ".pki" / "nssdb", home / ".local" / "share" / "pki" / "nssdb"):
        db.mkdir(parents=True)
        subprocess.run([certutil, "-N", "-d", f"sql:{db}", "--empty-password"], check=True, capture_output=True)
        subprocess.run([certutil, "-A", "-d", f"sql:{db}", "-n", "caddy-test-root", "-t", "C,,", "-i", str(root)],
                       check=True, capture_output=True)
    return home


def test_a_paper_is_rated_over_https_through_caddy(tls_survey, certutil_bin: str, sink: MailSink, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    s, front, survey_proc = tls_survey
    # Only Caddy's root makes its certificate valid: the public roots do not.
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{front.base}/healthz", timeout=10)
    health = httpx.get(f"{front.base}/healthz", verify=front.trust(), timeout=10)
    assert health.json() == {"ok": True}
    assert health.headers["strict-transport-security"] == "max-age=31536000"
    # The survey server's own headers come through; Caddy drops the Server header (its and uvicorn's).
    assert health.headers["x-frame-options"] == "DENY" and "server" not in health.headers

    survey_flow.fn(s, round=1, approve="all", approver="tester")
    msg = sink.messages[0]
    invitation = re.search(r"<(inv_[0-9a-f]{20})\.", msg["Message-ID"]).group(1)  # type: ignore[union-attr]
    html = msg.get_body(("html",)).get_content()  # type: ignore[union-attr]
    link = re.search(r'href="([^"]+/r/[^"]+)"', html).group(1)  # type: ignore[union-attr]
    assert link.startswith(f"{front.base}/r/")
    store = SurveyStore(s.survey_store_path)

    # chromium reads its trusted roots from the certificate database under $HOME when it starts.
    monkeypatch.setenv("HOME", str(trusting_home(tmp_path / "browser-home", front.root, certutil_bin)))
    with chromium() as browser:
        context = browser.new_context(ignore_https_errors=False)
        try:
            page = context.new_page()
            page.set_content(html)  # the email, as a mail client shows it
            with page.expect_navigation(url=re.compile(r"/r/")) as opened:
                page.locator("a.circle[title='4: Expert']").first.click()  # click 1: the circle in the email
            response = opened.value
            assert response is not None and response.ok and response.url.startswith(f"{front.base}/r/")
            tls = response.security_details()
            assert tls is not None and "Caddy Local Authority" in tls["issuer"], tls
            assert page.get_by_text("4 · Expert").is_visible() and store.events_since() == []
            page.get_by_role("button", name="Confirm").click()  # click 2
            page.wait_for_url(re.compile(r"/i/"))
            assert page.url.startswith(f"{front.base}/i/")
            assert "was saved" in page.locator("[role=status]").inner_text()
            assert page.evaluate("window.isSecureContext")
        finally:
            context.close()
    assert [(e["invitation_id"], e["rating"], e["source"]) for e in store.events_since()] == [(invitation, 4, "click")]

    # With the survey server down, Caddy logs the failed request: neither the client's address nor
    # the link (which signs a respondent's answer) may be in its log.
    survey_proc.kill()
    survey_proc.wait()
    token = link.rsplit("/r/", 1)[1]
    assert httpx.get(link, verify=front.trust(), timeout=10).status_code == 502
    log = front.log()
    assert "http.log.error" in log and '"status": 502' in log, log
    for secret in ("remote_ip", "client_ip", "remote_port", token):
        assert secret not in log, f"{secret!r} in Caddy's log:\n{log}"


def test_doctor_passes_the_survey_check_through_caddy(tls_survey) -> None:
    # Until `revbench doctor` exists (issue 26, part 1) there is nothing to run; once the module is
    # there, anything wrong in it fails this test.
    if importlib.util.find_spec("revbench.app.doctor") is None:
        pytest.importorskip("revbench.app.doctor")
    s, front, _proc = tls_survey

    def doctor(**extra: str) -> tuple[int, dict[str, Any]]:
        done = cli(s, "doctor", "--only", "survey", "--json", extra=extra)
        assert done.stdout.strip(), done.stderr
        return done.returncode, json.loads(done.stdout)

    code, trusted = doctor(REVBENCH_HTTP__CA_BUNDLE=str(front.root))
    assert code == 0 and trusted["ok"], trusted
    [probe] = trusted["probes"]
    assert (probe["service"], probe["status"]) == ("survey", "ok") and probe["url"] == front.base, probe
    # Without Caddy's root the certificate is not trusted, and the survey check says so.
    code, untrusted = doctor()
    assert code == 1 and not untrusted["ok"], untrusted
    [probe] = untrusted["probes"]
    assert (probe["service"], probe["status"]) == ("survey", "fail") and probe["url"] == front.base, probe
    assert "certificate" in f"{probe['detail']} {probe['fix']}".lower(), probe


def test_caddy_proxies_to_the_survey_server_on_a_unix_socket(settings: Settings, caddy_front: Callable[..., Any],
                                                            tmp_path: Path) -> None:
    # The survey settings survey.env gives it (no secret but its key), and a socket where the
    # systemd unit puts one: a folder of its own, which only the proxy's group may enter.
    s = settings.with_overrides(survey={"signing_key": KEY, "store_dir": str(tmp_path / "store")})
    assert foreign_secrets(s, {}) == []
    run = tmp_path / "run"
    run.mkdir(mode=0o750)
    sock = run / "survey.sock"
    assert len(str(sock)) < 100  # a unix socket's path has at most 107 bytes
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
    env.update(settings_env(s))
    log = tmp_path / "survey.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "revbench", "survey", "serve", "--socket", str(sock)], env=env,
                                cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        direct = httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://survey", timeout=5)
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            try:
                if direct.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o660
        with caddy_front(free_port(), f"unix/{sock}") as front:
            health = httpx.get(f"{front.base}/healthz", verify=front.trust(), timeout=10)
            assert health.status_code == 200 and health.json() == {"ok": True}
            assert health.headers["strict-transport-security"] == "max-age=31536000"
            assert health.headers["x-frame-options"] == "DENY" and "server" not in health.headers
            # A forged link through the socket is the survey server's own refusal, not Caddy's.
            forged = httpx.get(f"{front.base}/r/forged-token", verify=front.trust(), timeout=10)
            assert forged.status_code == 403 and "This link is not valid" in forged.text
        direct.close()
        # Stopped as systemd stops it, it takes its socket along; its store is in its folder alone.
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
        assert not sock.exists() and (tmp_path / "store" / "survey.sqlite").is_file()
        assert not (tmp_path / "data").exists(), "the survey server wrote outside its store folder"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
