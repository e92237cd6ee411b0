"""The isolation probe tries where the curator's plane listens: the Prefect server's configured
host and port (the environment or the active profile), Prefect's API and UI addresses, GROBID's
and the Dask scheduler's, and every address deploy/'s compose file and systemd units publish; it
fails naming the address that answers and, when none does, says every address it tried. Only
loopback listeners stand in for the curator's services."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from revbench.app import isolation_probe
from revbench.app.doctor import run_probes
from revbench.app.isolation_probe import SHIPPED_SURFACES, deploy_surfaces, surfaces
from revbench.health import Probe
from revbench.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PREFECT_VARS = ("PREFECT_API_URL", "PREFECT_UI_URL", "PREFECT_UI_API_URL", "PREFECT_SERVER_API_HOST",
                "PREFECT_SERVER_API_PORT", "PREFECT_PROFILE")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on a free loopback port, standing in for a Prefect API."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock
    sock.close()


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Prefect setting anywhere but where a test puts one; the shipped addresses left out, so
    that a service of this machine on 4200 or 8070 decides nothing here (they are checked apart)."""
    for name in PREFECT_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "prefect-home"
    home.mkdir()
    monkeypatch.setenv("PREFECT_HOME", str(home))
    monkeypatch.chdir(tmp_path)  # no .env of the checkout's
    monkeypatch.setattr(isolation_probe, "SHIPPED_SURFACES", ())
    monkeypatch.setattr(isolation_probe, "DEPLOY", tmp_path / "no-deploy")
    return home


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _isolation(settings: Settings, prefect: str | None = None) -> Probe:
    [p] = run_probes(settings, prefect, {"isolation"}, 5)
    return p


def _closed(settings: Settings) -> Settings:
    """GROBID pointed at a port nothing listens on."""
    return settings.with_overrides(grobid={"base_url": f"http://127.0.0.1:{_free_port()}"})


def test_the_prefect_server_s_configured_port_is_tried(settings: Settings, bare: Path, listener: socket.socket,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    port = listener.getsockname()[1]
    s = _closed(settings)
    monkeypatch.setenv("PREFECT_SERVER_API_PORT", str(port))
    got = _isolation(s)
    assert got.status == "fail", got
    assert f"reachable from here: Prefect API at 127.0.0.1:{port} (PREFECT_SERVER_API_PORT)" in got.detail
    assert "\n" not in got.detail and "PrivateNetwork=yes" in got.fix
    listener.close()  # the same configuration, nothing listening there: ok, and says what it tried
    ok = _isolation(s)
    assert ok.status == "ok", ok
    assert ok.detail.startswith("none of 2 curator surfaces accepts a connection from here (tried ")
    assert f"Prefect API at 127.0.0.1:{port} (PREFECT_SERVER_API_PORT)" in ok.detail
    assert f"GROBID at 127.0.0.1:{s.grobid.base_url.rsplit(':', 1)[1]} (REVBENCH_GROBID__BASE_URL)" in ok.detail
    assert f"127.0.0.1:{port}" in ok.url


def test_the_active_profile_s_server_host_and_port_are_tried(settings: Settings, bare: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    (bare / "profiles.toml").write_text(f'active = "live"\n\n[profiles.live]\nPREFECT_SERVER_API_HOST = "0.0.0.0"\n'
                                        f'PREFECT_SERVER_API_PORT = "{port}"\n')
    got = _isolation(_closed(settings))
    # Listening on every address is listening on loopback too: that is where it is tried.
    assert got.status == "fail" and f"Prefect API at 127.0.0.1:{port} (PREFECT_SERVER_API_HOST and " \
                                    "PREFECT_SERVER_API_PORT)" in got.detail, got


def test_prefect_s_ui_address_and_a_dask_scheduler_are_tried(settings: Settings, bare: Path, listener: socket.socket,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    port = listener.getsockname()[1]
    monkeypatch.setenv("PREFECT_UI_API_URL", f"http://127.0.0.1:{port}/api")
    got = _isolation(_closed(settings))
    assert got.status == "fail" and f"Prefect API at 127.0.0.1:{port} (PREFECT_UI_API_URL)" in got.detail, got
    monkeypatch.delenv("PREFECT_UI_API_URL")
    dask = _closed(settings).with_overrides(runner={"dask_address": f"tcp://127.0.0.1:{port}"})
    got = _isolation(dask)
    assert got.status == "fail" and f"Dask scheduler at 127.0.0.1:{port} (REVBENCH_RUNNER__DASK_ADDRESS)" in got.detail
    # Without any Prefect setting, its default is tried all the same.
    tried = {(x.host, x.port): x.why for x in surfaces(_closed(settings), None)}
    assert tried[("127.0.0.1", 4200)] == "Prefect's default"


def test_the_shipped_addresses_are_what_deploy_publishes(settings: Settings, tmp_path: Path) -> None:
    """Every address deploy/'s compose file and units give the curator's plane is shipped (an
    installed package has no deploy/ to read), and the public plane's are not tried."""
    found = deploy_surfaces(DEPLOY)
    assert {(s.host, s.port) for s in found} == {(s.host, s.port) for s in SHIPPED_SURFACES}
    assert {s.what for s in found} == {"Prefect API", "GROBID"}
    assert not {80, 443, 8765} & {s.port for s in found}
    # Read, not assumed: a deployment that moves the Prefect server is tried where it moved.
    moved = tmp_path / "deploy"
    shutil.copytree(DEPLOY, moved)
    for name in ("compose.yaml", "systemd/prefect-server.service"):
        path = moved / name
        path.write_text(path.read_text().replace("4200", "4300"))
    there = {(s.host, s.port, s.why) for s in deploy_surfaces(moved)}
    assert {("127.0.0.1", 4300, "compose ports"), ("prefect", 4300, "compose"), ("127.0.0.1", 4300, "systemd units")} <= there
    assert ("127.0.0.1", 4300) in {(s.host, s.port) for s in surfaces(settings, None, moved)}
