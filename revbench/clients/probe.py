"""Reachability probes: one cheap request to a service before a stage that needs it starts.

Any HTTP answer (even 404 or 503) means the service is reachable; only a refused connection, a
timeout or a broken transfer is a failure, reported as ``ServiceUnavailable`` naming the
service and its URL. A probe sends no credentials. The local replay server marks its answers
with ``x-revbench-replay``, so a run pointed at it can leave real API keys at home.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from revbench.errors import ServiceUnavailable, UsageError
from revbench.settings import Settings

REPLAY_HEADER = "x-revbench-replay"
SERVICES = ("arxiv", "s2", "openalex", "pdf", "grobid", "llm")


@dataclass(frozen=True)
class Probe:
    """What a probe found: the service answered, and whether it is the local replay server."""

    service: str
    url: str
    status: int
    replay: bool


def probe_target(settings: Settings, service: str) -> tuple[str, str]:
    """(name, URL) a service is probed at."""
    if service == "arxiv":
        return "arXiv API", settings.arxiv.base_url
    if service == "s2":
        return "Semantic Scholar", settings.s2.base_url
    if service == "openalex":
        return "OpenAlex", settings.openalex.base_url
    if service == "pdf":
        return "arXiv PDFs", settings.pdf.base_url
    if service == "grobid":
        return "GROBID", settings.grobid.base_url.rstrip("/") + "/api/isalive"
    if service == "llm":
        if not settings.llm.base_url:
            raise UsageError("no LLM is configured (set REVBENCH_LLM__BASE_URL)")
        return "LLM", settings.llm.base_url.rstrip("/") + "/models"
    raise ValueError(f"unknown service {service!r}; known: {', '.join(SERVICES)}")


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
