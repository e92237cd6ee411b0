"""The doctor's isolation probe (``revbench doctor --only isolation``), run from the survey
server's side: in its container (``docker compose run --rm survey revbench doctor --only
isolation``) or its network namespace on a systemd host. The survey server faces the internet;
from where it runs, no surface of the curator's plane (the Prefect API where waves are sent and
releases approved, GROBID, a Dask scheduler) may accept a connection.

It tries where the curator's plane actually listens, not only where it listens by default: the
addresses our deployments give it (``SHIPPED_SURFACES``, kept equal to what ``deploy/``'s compose
file and systemd units publish, and those files themselves where a source checkout carries them),
the Prefect server's configured host and port (``PREFECT_SERVER_API_HOST``/``PORT``, default
127.0.0.1:4200) and the API and UI addresses Prefect's settings give (``PREFECT_API_URL``,
``PREFECT_UI_API_URL``, ``PREFECT_UI_URL``: the environment, a ``.env`` here, or the active
profile, as the doctor reads ``PREFECT_API_URL``), GROBID's and the Dask scheduler's configured
addresses. Its answer lists every address it tried, and why.
"""

from __future__ import annotations

import os
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from revbench.health import Probe, ProbeContext

if TYPE_CHECKING:
    from revbench.settings import Settings


class Surface(NamedTuple):
    """One address of the curator's plane: what listens there, and why it is tried."""

    what: str
    host: str
    port: int
    why: str


PREFECT_PORT, GROBID_PORT = 4200, 8070
SHIPPED_SURFACES: tuple[Surface, ...] = (
    Surface("Prefect API", "prefect", PREFECT_PORT, "compose"), Surface("GROBID", "grobid", GROBID_PORT, "compose"),
    Surface("Prefect API", "127.0.0.1", PREFECT_PORT, "systemd units, compose ports"),
    Surface("GROBID", "127.0.0.1", GROBID_PORT, "systemd units, compose ports"))
"""Where the deployments we ship put the curator's surfaces: compose's service names and the
loopback ports its ``ports:`` and the systemd units publish (``deploy/``; a test keeps them equal)."""
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
"""A source checkout's deployment files (an installed package carries none: ``SHIPPED_SURFACES`` stands in)."""
PUBLIC_PLANE = ("survey", "caddy", "revbench-survey")
"""The compose services and systemd units of the public plane: the survey server and its TLS front."""
PREFECT_SETTINGS = ("PREFECT_API_URL", "PREFECT_UI_API_URL", "PREFECT_UI_URL")
"""Prefect's settings that name an address of its server."""
_LABELS = {"prefect": "Prefect API", "prefect-server": "Prefect API", "grobid": "GROBID"}
_EVERYWHERE = ("", "0.0.0.0", "::", "[::]", "*")
CONNECT_SECONDS = 2.0


def _near(host: str | None) -> str:
    """A listening host as it is reached from here: a wildcard address listens on loopback too."""
    return "127.0.0.1" if host is None or host.strip("[]") in _EVERYWHERE else host.strip("[]")


def _compose(path: Path) -> list[Surface]:
    import yaml  # only where a checkout's compose file is there to read

    try:
        services = (yaml.safe_load(path.read_text()) or {}).get("services") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return []
    out: list[Surface] = []
    for name, svc in services.items():
        if name in PUBLIC_PLANE or not isinstance(svc, dict):
            continue
        what = _LABELS.get(name, f"compose service {name}")
        command = " ".join(map(str, svc.get("command") or [])) if isinstance(svc.get("command"), list) else str(svc.get("command") or "")
        inside = [int(p) for p in re.findall(r"--port[ =](\d+)", command)]
        inside += [int(str(e).split("/")[0]) for e in svc.get("expose") or [] if str(e).split("/")[0].isdigit()]
        for mapping in svc.get("ports") or []:
            parts = str(mapping).split("/")[0].rsplit(":", 2)
            if len(parts) >= 2 and parts[-1].isdigit() and parts[-2].isdigit():
                inside.append(int(parts[-1]))
                out.append(Surface(what, _near(parts[0] if len(parts) == 3 else None), int(parts[-2]), "compose ports"))
        out += [Surface(what, name, port, "compose") for port in dict.fromkeys(inside)]
    return out


def _units(folder: Path) -> list[Surface]:
    out: list[Surface] = []
    for unit in sorted(folder.glob("*.service")):
        name = unit.name.removesuffix(".service")
        if name in PUBLIC_PLANE or not unit.is_file():
            continue
        what = _LABELS.get(name, f"systemd unit {unit.name}")
        for line in re.findall(r"^ExecStart=(.*)$", unit.read_text(), re.M):
            host = re.search(r"--host[ =](\S+)", line)
            out += [Surface(what, _near(host.group(1) if host else None), int(p), "systemd units")
                    for p in re.findall(r"--port[ =](\d+)", line)]
            out += [Surface(what, _near(ip or None), int(p), "systemd units")
                    for ip, p in re.findall(r"-p\s+(?:(\S+?):)?(\d+):\d+", line)]
    return out


def deploy_surfaces(folder: Path) -> list[Surface]:
    """Where ``folder``'s compose file and systemd units put the curator's plane: each port a
    service or unit publishes (compose ``ports:``, ``podman run -p``, ``--host``/``--port``) at
    the address it binds, and each port a compose service listens on by its service name. The
    public plane (``PUBLIC_PLANE``) is left out; none when the folder is not there."""
    out: list[Surface] = []
    if (folder / "compose.yaml").is_file():
        out += _compose(folder / "compose.yaml")
    if (folder / "systemd").is_dir():
        out += _units(folder / "systemd")
    return out


def _url(what: str, url: str | None, default: int, why: str) -> list[Surface]:
    parts = urlsplit(url or "")
    try:
        port = parts.port
    except ValueError:  # a port that is no number: the settings' own checks say so
        return []
    if not parts.hostname:
        return []
    return [Surface(what, _near(parts.hostname), port or (443 if parts.scheme in ("https", "tls") else default), why)]


def prefect_settings(settings: Settings) -> dict[str, str | None]:
    """Prefect's settings that say where its server listens (``PREFECT_SETTINGS`` and
    ``PREFECT_SERVER_API_HOST``/``PORT``), read as the doctor reads ``PREFECT_API_URL``: the
    environment, a ``.env`` here, else the active profile under ``PREFECT_HOME`` (default the data
    folder's ``prefect``)."""
    from revbench.app.entry import prefect_setting

    home = Path(os.environ.get("PREFECT_HOME") or settings.data_dir / "prefect").expanduser()
    names = (*PREFECT_SETTINGS, "PREFECT_SERVER_API_HOST", "PREFECT_SERVER_API_PORT")
    return {name: prefect_setting(name, home) for name in names}


def configured_surfaces(settings: Settings, prefect_api_url: str | None) -> list[Surface]:
    """Where this configuration puts the curator's plane: the Prefect server's host and port
    (their defaults 127.0.0.1 and 4200 where unset), Prefect's API and UI addresses, GROBID's
    and the Dask scheduler's."""
    given = prefect_settings(settings)
    port = given["PREFECT_SERVER_API_PORT"]
    port_ok = bool(port and port.isdigit() and 0 < int(port) < 65536)
    why = " and ".join(n for n, ok in (("PREFECT_SERVER_API_HOST", given["PREFECT_SERVER_API_HOST"]),
                                        ("PREFECT_SERVER_API_PORT", port_ok)) if ok) or "Prefect's default"
    out = [Surface("Prefect API", _near(given["PREFECT_SERVER_API_HOST"] or "127.0.0.1"),
                   int(port) if port and port_ok else PREFECT_PORT, why)]
    urls = {"PREFECT_API_URL": prefect_api_url or given["PREFECT_API_URL"],
            **{n: given[n] for n in PREFECT_SETTINGS if n != "PREFECT_API_URL"}}
    for name, url in urls.items():
        out += _url("Prefect API", url, PREFECT_PORT, name)
    out += _url("GROBID", settings.grobid.base_url, GROBID_PORT, "REVBENCH_GROBID__BASE_URL")
    out += _url("Dask scheduler", settings.runner.dask_address, 8786, "REVBENCH_RUNNER__DASK_ADDRESS")
    return out


def surfaces(settings: Settings, prefect_api_url: str | None, deploy: Path | None = None) -> list[Surface]:
    """Every address to try, once each (the reasons of one address joined): the shipped ones, a
    checkout's ``deploy/`` files (``deploy``, default ``DEPLOY``), and the configured ones."""
    merged: dict[tuple[str, int], Surface] = {}
    found = deploy_surfaces(deploy or DEPLOY)
    for s in (*SHIPPED_SURFACES, *found, *configured_surfaces(settings, prefect_api_url)):
        seen = merged.get((s.host, s.port))
        if seen is None:
            merged[(s.host, s.port)] = s
        elif s.why not in seen.why.split(", "):
            merged[(s.host, s.port)] = seen._replace(why=f"{seen.why}, {s.why}")
    return list(merged.values())


def reachable(host: str, port: int, seconds: float) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted (a name that does not resolve, a
    refusal or silence within ``seconds`` all say no)."""
    try:
        with socket.create_connection((host, port), timeout=seconds):
            return True
    except OSError:
        return False


def probe_isolation(ctx: ProbeContext) -> Probe:
    """Fail when any curator surface accepts a connection from here; say which were tried."""
    checked = surfaces(ctx.settings, ctx.prefect_api_url)
    # At once: a silent address costs one connect timeout, not one for each address behind it.
    with ThreadPoolExecutor(max_workers=min(16, len(checked)), thread_name_prefix="isolation") as pool:
        answers = list(pool.map(lambda s: reachable(s.host, s.port, min(CONNECT_SECONDS, ctx.clock.left())), checked))
    open_ = [f"{s.what} at {s.host}:{s.port} ({s.why})" for s, yes in zip(checked, answers, strict=True) if yes]
    where = ", ".join(f"{s.host}:{s.port}" for s in checked)
    if open_:
        return Probe("isolation", where, "fail", f"reachable from here: {'; '.join(open_)}",
                     fix="run the survey server where the curator's plane cannot be reached: compose's edge network "
                         "alone, or PrivateNetwork=yes in its systemd unit (docs/going-live.md)")
    tried = "; ".join(f"{s.what} at {s.host}:{s.port} ({s.why})" for s in checked)
    return Probe("isolation", where, "ok", f"none of {len(checked)} curator surfaces accepts a connection from here "
                                           f"(tried {tried})")
