"""The deploy group's fixtures: Debian's caddy running deploy/Caddyfile on 127.0.0.1 with Caddy's
internal CA, its state (CA, certificates, autosaved config) under the test's tmp_path."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from revbench.replay.server import free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CADDYFILE = DEPLOY / "Caddyfile"


def required_tool(name: str, install: str) -> str:
    """The path of ``name``; the test skips without it, except under ``CI=true``, where `make test`
    installs it first (the Makefile's ``browser`` target) and a skip would hide a missing install."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is missing ({install}; `make test` installs it as root)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the deploy test cannot be skipped under CI: {message}")
        pytest.skip(message)
    return path


@pytest.fixture
def caddy_bin() -> str:
    return required_tool("caddy", "apt-get install -y caddy")


@pytest.fixture
def certutil_bin() -> str:
    """NSS's certutil, which writes the certificate database chromium reads its trusted roots from."""
    return required_tool("certutil", "apt-get install -y libnss3-tools, which Debian's caddy depends on")


@pytest.fixture
def caddy_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a caddy process that keeps everything under tmp_path: its CA and
    certificates (XDG_DATA_HOME), its autosaved config (XDG_CONFIG_HOME), and a HOME of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "SURVEY_", "CADDY_"))}
    for name in ("data", "config", "home"):
        (tmp_path / "caddy" / name).mkdir(parents=True, exist_ok=True)
    env.update(XDG_DATA_HOME=str(tmp_path / "caddy" / "data"), XDG_CONFIG_HOME=str(tmp_path / "caddy" / "config"),
               HOME=str(tmp_path / "caddy" / "home"))
    return env


@dataclass
class Front:
    """Caddy in front of an upstream: its HTTPS base URL, the root certificate of its internal CA
    (the only thing that makes its certificate trusted) and its own log."""

    base: str
    root: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def trust(self) -> ssl.SSLContext:
        """An SSL context that trusts Caddy's root and nothing else."""
        return ssl.create_default_context(cafile=str(self.root))


@pytest.fixture
def caddy_front(caddy_bin: str, caddy_env: dict[str, str], tmp_path: Path) -> Callable[..., object]:
    """``caddy_front(port, upstream)``: a context manager running deploy/Caddyfile as a test host
    would (SURVEY_TLS=internal) for https://127.0.0.1:PORT, proxying to ``upstream`` (host:port);
    it yields a ``Front`` once Caddy answers over TLS that verifies against its root, and stops it."""

    @contextmanager
    def start(port: int, upstream: str) -> Iterator[Front]:
        env = {**caddy_env, "SURVEY_DOMAIN": f"https://127.0.0.1:{port}", "SURVEY_TLS": "internal",
               "SURVEY_UPSTREAM": upstream, "CADDY_ADMIN": "off",
               # The redirect server would take port 80 (this test may run as root).
               "CADDY_HTTP_PORT": str(free_port()), "CADDY_HTTPS_PORT": str(port)}
        log_path = tmp_path / "caddy" / "caddy.log"
        root = Path(env["XDG_DATA_HOME"]) / "caddy" / "pki" / "authorities" / "local" / "root.crt"
        with log_path.open("wb") as log:
            proc = subprocess.Popen([caddy_bin, "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
                                    env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        front = Front(f"https://127.0.0.1:{port}", root, log_path, proc)
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, f"caddy stopped (exit {proc.returncode}):\n{front.log()}"
                assert time.monotonic() < deadline, f"caddy did not answer over TLS in 60 s:\n{front.log()}"
                if root.exists():
                    try:
                        if httpx.get(f"{front.base}/healthz", verify=front.trust(), timeout=2).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass  # the certificate is issued just after start, and the upstream may lag
                time.sleep(0.2)
            yield front
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    return start
