"""The doctor's isolation probe (``revbench doctor --only isolation``), run from the survey
server's side: in its container (``docker compose run --rm survey revbench doctor --only
isolation``) or its network namespace on a systemd host. The survey server faces the internet;
from where it runs, no surface of the curator's plane (the Prefect API where waves are sent and
releases approved, GROBID) may accept a connection.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from revbench.health import Probe, ProbeContext

if TYPE_CHECKING:
    from revbench.settings import Settings

SHIPPED_SURFACES: tuple[tuple[str, str, int], ...] = (
    ("Prefect API", "prefect", 4200), ("GROBID", "grobid", 8070), ("Prefect API", "127.0.0.1", 4200),
    ("GROBID", "127.0.0.1", 8070))
"""Where the deployments we ship put the curator's surfaces: compose's service names and the
systemd units' loopback ports (deploy/)."""
CONNECT_SECONDS = 2.0


def surfaces(settings: Settings, prefect_api_url: str | None) -> list[tuple[str, str, int]]:
    """The shipped surfaces and the configured ones (PREFECT_API_URL, REVBENCH_GROBID__BASE_URL), once each."""
    out = list(SHIPPED_SURFACES)
    for what, url, default in (("Prefect API", prefect_api_url, 4200), ("GROBID", settings.grobid.base_url, 8070)):
        if url:
            parts = urlsplit(url)
            if parts.hostname:
                out.append((what, parts.hostname, parts.port or (443 if parts.scheme == "https" else default)))
    seen: set[tuple[str, int]] = set()
    return [s for s in out if (s[1], s[2]) not in seen and not seen.add((s[1], s[2]))]


def reachable(host: str, port: int, seconds: float) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted (a name that does not resolve, a
    refusal or silence within ``seconds`` all say no)."""
    try:
        with socket.create_connection((host, port), timeout=seconds):
            return True
    except OSError:
        return False


def probe_isolation(ctx: ProbeContext) -> Probe:
    """Fail when any curator surface accepts a connection from here."""
    checked = surfaces(ctx.settings, ctx.prefect_api_url)
    open_ = [f"{what} at {host}:{port}" for what, host, port in checked
             if reachable(host, port, min(CONNECT_SECONDS, ctx.clock.left()))]
    where = ", ".join(f"{h}:{p}" for _, h, p in checked)
    if open_:
        return Probe("isolation", where, "fail", f"reachable from here: {'; '.join(open_)}",
                     fix="run the survey server where the curator's plane cannot be reached: compose's edge network "
                         "alone, or PrivateNetwork=yes in its systemd unit (docs/going-live.md)")
    return Probe("isolation", where, "ok", f"none of {len(checked)} curator surfaces accepts a connection from here")
