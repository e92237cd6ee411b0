"""``revbench doctor``'s survey probe: the survey server at its public address answers as the
survey's links will need it to (its health over verified TLS, a link signed with this
configuration's key verifying there, a link signed with another key refused).

Loaded only when the doctor probes the survey (``revbench.services``), before the probe's clock
starts: what it imports is not counted against the server's time.
"""

from __future__ import annotations

import secrets
import ssl
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from revbench.errors import UsageError
from revbench.health import Probe, ProbeContext, http_client, is_loopback, ms, read, unreachable
from revbench.survey.tokens import LinkSigner

if TYPE_CHECKING:
    from revbench.settings import Settings


def _tls_context(settings: Settings) -> Any:
    """What a survey probe trusts: httpx's defaults (certifi, or SSL_CERT_FILE), and the
    authorities in REVBENCH_HTTP__CA_BUNDLE when it is set."""
    ctx = httpx.create_ssl_context()
    if settings.http.ca_bundle is not None:
        ctx.load_verify_locations(cafile=str(settings.http.ca_bundle))
    return ctx


def probe_survey(ctx: ProbeContext) -> Probe:
    """``GET /healthz`` at the public base URL (certificate verified), then a probe link signed with
    this configuration's key at ``/healthz/link/{token}``: verified there, the survey's links will be;
    then one signed with a key made up here, which must be refused: a server that accepts it would
    take a forged rating or opt-out as well."""
    settings, clock = ctx.settings, ctx.clock
    sv = settings.survey
    base = sv.base_url.rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Probe("survey", base, "fail", "not an http(s) URL", fix="set REVBENCH_SURVEY__BASE_URL to https://your.host")
    plain = parts.scheme == "http"
    if plain and not is_loopback(parts.hostname):
        return Probe("survey", base, "fail", "http:// outside this machine: links would travel in clear",
                     fix="serve the survey behind HTTPS (e.g. Caddy) and set REVBENCH_SURVEY__BASE_URL=https://...")
    try:
        verify = _tls_context(settings)
    except (OSError, ssl.SSLError) as exc:
        return Probe("survey", base, "fail", f"REVBENCH_HTTP__CA_BUNDLE={settings.http.ca_bundle} cannot be read ({exc})",
                     fix="point REVBENCH_HTTP__CA_BUNDLE at a PEM file of CA certificates, or leave it empty")
    try:
        signer = LinkSigner.from_settings(sv)
    except UsageError as exc:
        return Probe("survey", base, "fail", "no link can be signed", fix=str(exc))
    try:
        with http_client(settings, clock, verify=verify) as client:
            t0 = time.monotonic()
            health = read(client, "GET", f"{base}/healthz", "/healthz", timeout=clock.left())
            latency = ms(t0)
            bad = _survey_health(base, health, latency)
            if bad is not None:
                return bad
            link = read(client, "GET", f"{base}/healthz/link/{signer.probe_token()}", "/healthz/link", timeout=clock.left())
            bad = _survey_link(base, link, latency)
            if bad is not None:
                return bad
            # A link signed with a key made up here: a server that checks signatures with its keys refuses it.
            forged = LinkSigner(SecretStr(secrets.token_urlsafe(32))).probe_token()
            unsigned = read(client, "GET", f"{base}/healthz/link/{forged}", "/healthz/link", timeout=clock.left())
    except httpx.HTTPError as exc:
        return unreachable("survey", base, exc, clock, "REVBENCH_SURVEY__BASE_URL")
    bad = _survey_forged(base, unsigned, latency)
    if bad is not None:
        return bad
    if plain:
        return Probe("survey", base, "warn", "a signed link verifies, another refused; plain http on this machine (the "
                     "demo's setup): anywhere else links would travel in clear", latency)
    return Probe("survey", base, "ok", "certificate verified; a signed link verifies, another refused", latency)


def _survey_forged(base: str, answer: Any, latency: float) -> Probe | None:
    """A link this revbench did not sign must be refused (403; the survey server says "bad signature")."""
    if answer.status_code == 403:
        return None
    if answer.status_code == 200:
        return Probe("survey", base, "fail", "accepts a link this revbench did not sign: it runs with another signing "
                     "key, or does not check signatures (anyone could rate or opt out for anyone)", latency,
                     fix="run `revbench survey serve` of this revbench there, with the flows' REVBENCH_SURVEY__SIGNING_KEY")
    return Probe("survey", base, "fail", f"a link this revbench did not sign answered HTTP {answer.status_code}, not a "
                 "refusal (403)", latency, fix="check that REVBENCH_SURVEY__BASE_URL reaches `revbench survey serve`")


def _survey_health(base: str, health: Any, latency: float) -> Probe | None:
    if 300 <= health.status_code < 400:
        return Probe("survey", base, "fail", f"/healthz redirects to {health.headers.get('location', '?')}", latency,
                     fix="set REVBENCH_SURVEY__BASE_URL to the address the links should use (where it redirects)")
    try:
        ok = health.status_code == 200 and health.json().get("ok") is True
    except (ValueError, AttributeError):
        ok = False
    if not ok:
        return Probe("survey", base, "fail", f"/healthz answered HTTP {health.status_code}: not the survey server", latency,
                     fix="point REVBENCH_SURVEY__BASE_URL (or the proxy in front) at `revbench survey serve`")
    return None


def _survey_link(base: str, link: Any, latency: float) -> Probe | None:
    if link.status_code == 200:
        return None
    if link.status_code == 404:
        return Probe("survey", base, "fail", "the server does not know /healthz/link: it runs an older revbench", latency,
                     fix="upgrade revbench where the survey server runs, and restart it")
    try:
        reason = str(link.json().get("reason", ""))
    except (ValueError, AttributeError):
        reason = ""
    if reason == "bad signature":
        return Probe("survey", base, "fail", "a link signed with this REVBENCH_SURVEY__SIGNING_KEY does not verify there: "
                     "the server runs with another signing key", latency,
                     fix="give the survey server and the flows the same REVBENCH_SURVEY__SIGNING_KEY (keep an old key "
                         "in REVBENCH_SURVEY__OLD_SIGNING_KEYS on the server while its links are out)")
    if reason == "expired":
        return Probe("survey", base, "fail", "a link signed just now is out of date there: the two machines' clocks "
                     "differ by more than 10 minutes", latency, fix="synchronise both clocks (NTP)")
    return Probe("survey", base, "fail", f"the probe link was refused: HTTP {link.status_code} {reason}".rstrip(), latency,
                 fix="check that REVBENCH_SURVEY__BASE_URL reaches `revbench survey serve`")
