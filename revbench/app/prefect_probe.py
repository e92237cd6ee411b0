"""``revbench doctor``'s Prefect probe: the API at PREFECT_API_URL speaks Prefect's protocol, at a
version the installed client works with, and is closed to a request without credentials.

The Prefect API is the curator's plane: waves are sent, flags decided and releases approved there.
A deployment that says it has credentials (PREFECT_API_AUTH_STRING, which the Prefect client sends
as HTTP Basic) must have a server that refuses a request without them; one without credentials
must be on this machine. Prefect's own API auth leaves ``/health`` and ``/ready`` open (for
orchestrators' probes) and closes everything else; a proxy's basic auth closes everything, so the
probe sends the credentials with its own requests and leaves them out of one request to
``/admin/version``.
"""

from __future__ import annotations

import base64
import re
import time
from typing import Any

from revbench.health import (Probe, ProbeContext, http_client, is_loopback, ms, read, short, unreachable, userinfo,
                             version_tuple)

SETTING = "PREFECT_API_URL"
AUTH = "PREFECT_API_AUTH_STRING"
ROOT_FIX = "set PREFECT_API_URL to the Prefect server's API root (http://HOST:4200/api)"
REFUSED = (401, 403)
"""What a server answers a request whose credentials are missing or wrong (Prefect: 401)."""


def probe_prefect(ctx: ProbeContext) -> Probe:
    """``GET /health`` (JSON ``true``) and ``/admin/version`` (a JSON version string, against the
    installed prefect) with PREFECT_API_AUTH_STRING when set, then, with it set, the version again
    without it, which must be refused. Without it, only an API on this machine passes."""
    import importlib.metadata
    from urllib.parse import urlsplit

    import httpx

    settings, clock, url, auth = ctx.settings, ctx.clock, ctx.prefect_api_url or "", ctx.prefect_auth
    base = url.rstrip("/")
    if userinfo(base)[2]:  # read without parsing the host: a URL urlsplit refuses still has its password found
        return Probe("prefect", base, "fail", f"{SETTING} holds credentials (user:password@): they do not belong in a URL "
                     "(every log and error that names it would show them)",
                     fix=f"take them out of {SETTING} and put them in {AUTH} (the server's PREFECT_SERVER_API_AUTH_STRING)")
    try:
        parts = urlsplit(base)
    except ValueError as exc:
        return Probe("prefect", base, "fail", f"not a valid URL ({exc})", fix=ROOT_FIX)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Probe("prefect", base, "fail", "not an http(s) URL", fix=ROOT_FIX)
    if not auth and not is_loopback(parts.hostname):
        # Either the server asks for credentials and every run here would be refused, or it asks for
        # none and anyone on its network can do what a curator does: both need the auth string.
        return Probe("prefect", base, "fail", f"{AUTH} is not set for an API off this machine: the curator's plane "
                     "(waves, flags, releases) would be open to whoever reaches it", fix=f"start the server with "
                     f"PREFECT_SERVER_API_AUTH_STRING and set {AUTH} to the same value here (docs/going-live.md)")
    signed = {"authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    try:
        with http_client(settings, clock) as client:
            t0 = time.monotonic()
            health = read(client, "GET", f"{base}/health", "/health", headers=signed, timeout=clock.left())
            latency = ms(t0)
            bad = _refused(base, "/health", health, auth, latency) or _not_health(base, health, latency)
            if bad is not None:
                return bad
            answer = read(client, "GET", f"{base}/admin/version", "/admin/version", headers=signed, timeout=clock.left())
            bad = _refused(base, "/admin/version", answer, auth, latency)
            if bad is not None:
                return bad
            server = _version(answer)
            if server is None:
                return Probe("prefect", base, "fail", f"/admin/version answered HTTP {answer.status_code} "
                             f"{_said(answer)}, not a version: not a Prefect API", latency, fix=ROOT_FIX)
            bare = None
            if auth:
                bare = read(client, "GET", f"{base}/admin/version", "/admin/version", timeout=clock.left())
    except httpx.HTTPError as exc:
        return unreachable("prefect", base, exc, clock, SETTING)
    if bare is not None and bare.status_code not in REFUSED:
        return Probe("prefect", base, "fail", f"/admin/version answered HTTP {bare.status_code} without credentials, though "
                     f"{AUTH} is set: anyone who reaches it can send waves, decide flags and approve releases", latency,
                     server, fix=f"start the server with PREFECT_SERVER_API_AUTH_STRING set to {AUTH}'s value (or put "
                                 "it behind a proxy that asks for them)")
    return _compare(base, server, importlib.metadata.version("prefect"), latency, "with credentials" if auth else "")


def _refused(base: str, path: str, answer: Any, auth: str | None, latency: float) -> Probe | None:
    if answer.status_code not in REFUSED:
        return None
    if auth:
        return Probe("prefect", base, "fail", f"{path} answered HTTP {answer.status_code}: {AUTH} was refused", latency,
                     fix=f"set {AUTH} to the server's PREFECT_SERVER_API_AUTH_STRING (or the proxy's user:password)")
    return Probe("prefect", base, "fail", f"{path} answered HTTP {answer.status_code}: the server wants credentials",
                 latency, fix=f"set {AUTH} to the server's PREFECT_SERVER_API_AUTH_STRING")


def _not_health(base: str, health: Any, latency: float) -> Probe | None:
    if health.status_code != 200:
        return Probe("prefect", base, "fail", f"/health answered HTTP {health.status_code}", latency, fix=ROOT_FIX)
    try:
        ok = health.json() is True
    except ValueError:
        ok = False
    if not ok:
        return Probe("prefect", base, "fail", f"/health answered {_said(health)}, not Prefect's true: not a Prefect API",
                     latency, fix=ROOT_FIX)
    return None


def _version(answer: Any) -> str | None:
    """The server's version: Prefect answers ``/admin/version`` with a JSON string."""
    if answer.status_code != 200:
        return None
    try:
        body = answer.json()
    except ValueError:
        return None
    return body if isinstance(body, str) and re.match(r"^\d+\.\d+", body) else None


def _said(answer: Any) -> str:
    """An answer in a few words: its type and the start of its text."""
    kind = answer.headers.get("content-type", "").split(";")[0].strip() or "untyped"
    return f"{kind} {short(answer.text, 40)!r}"


def _compare(base: str, server: str, installed: str, latency: float, how: str) -> Probe:
    """The server's version against the installed client's: another major version fails, an older one warns."""
    how = f" {how}" if how else ""
    if version_tuple(server)[:1] != version_tuple(installed)[:1]:
        return Probe("prefect", base, "fail", f"server {server}, installed client {installed}: another major version",
                     latency, server, fix=f"run a Prefect {installed} server (`prefect server start`)")
    if version_tuple(server) < version_tuple(installed):
        return Probe("prefect", base, "warn", f"healthy{how}; the server ({server}) is older than the installed client "
                     f"({installed})", latency, server, fix=f"upgrade the server to prefect {installed}")
    if how:
        return Probe("prefect", base, "ok", f"healthy{how}, refused without; installed client {installed}", latency, server)
    return Probe("prefect", base, "ok", f"healthy; installed client {installed}", latency, server)
