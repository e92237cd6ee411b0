"""Reachability probes: one cheap request to a service before a stage that needs it starts.

Any HTTP answer (even 404 or 503) means the service is reachable; only a refused connection, a
timeout or a broken transfer is a failure, reported as ``ServiceUnavailable`` naming the
service and its URL. A probe sends no credentials. The local replay server marks its answers
with ``x-revbench-replay``, so a run pointed at it can leave real API keys at home.

Where each service is asked is its ``reach`` in the one service table, ``revbench.services``.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from revbench.errors import ServiceUnavailable, UsageError
from revbench.services import BY_NAME, REACHABLE
from revbench.settings import Settings

REPLAY_HEADER = "x-revbench-replay"


@dataclass(frozen=True)
class Probe:
    """What a probe found: the service answered, and whether it is the local replay server."""

    service: str
    url: str
    status: int
    replay: bool


def probe_target(settings: Settings, service: str) -> tuple[str, str]:
    """(label, URL) a service is probed at: its row's ``reach`` in ``revbench.services``."""
    entry = BY_NAME.get(service)
    if entry is None or entry.reach is None:
        raise ValueError(f"unknown service {service!r}; known: {', '.join(REACHABLE)}")
    url = entry.reach(settings)
    if url is None:
        raise UsageError(f"no {entry.label} is configured (set {entry.setting})")
    return entry.label, url


def probe(settings: Settings, service: str) -> Probe:
    """One GET with the probe timeout; ``ServiceUnavailable`` when nothing answers."""
    name, url = probe_target(settings, service)
    timeout = settings.http.probe_timeout_seconds
    try:
        # Its status and headers are the whole answer a probe needs: the body is never read.
        with httpx.Client(timeout=timeout, headers={"user-agent": settings.http.user_agent}) as client, \
                client.stream("GET", url) as resp:
            pass
    except httpx.TimeoutException:
        raise ServiceUnavailable(name, url, f"no answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise ServiceUnavailable(name, url, str(exc) or type(exc).__name__) from None
    return Probe(service, url, resp.status_code, REPLAY_HEADER in resp.headers)
