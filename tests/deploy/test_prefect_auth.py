"""The curator's plane is closed: a real `prefect server start`, configured the way the shipped
deployment configures it (the systemd unit's environment and EnvironmentFile, the compose service's
variable), refuses every API request without the auth string and answers with it; Prefect's client
and `revbench serve`, given the string under the name revbench.env.example uses, keep working, and
`revbench serve` without it stops in one line."""

from __future__ import annotations

import base64
import re
import secrets
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from dotenv import dotenv_values

from revbench.replay.server import free_port
from tests.support.processes import clean_env, prefect_server_process, wait_for
from tests.deploy.test_deploy_files import PREFECT_TEMPLATE, TEMPLATE, compose, unit

pytestmark = pytest.mark.slow

PLACEHOLDER = "change-me"


@dataclass
class Curator:
    """The Prefect server as deployed: its API URL, the auth string, and the variables a revbench
    process gets from revbench.env.example (with the string filled in)."""

    api: str
    auth: str
    client_env: dict[str, str]


def filled(path: Path, value: str) -> dict[str, str]:
    """A shipped template's variables, each change-me replaced by ``value`` (as the guide says)."""
    return {k: value if v == PLACEHOLDER else (v or "") for k, v in dotenv_values(path).items()}


def interpolate(text: str, values: dict[str, str]) -> str:
    """compose's ${NAME} and ${NAME:?message}, from .env."""
    def one(m: re.Match[str]) -> str:
        assert m.group(1) in values, f"compose needs {m.group(1)} from .env"
        return values[m.group(1)]
    return re.sub(r"\$\{(\w+)(?::\?[^}]*)?\}", one, text)


@pytest.fixture(scope="module")
def curator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Curator]:
    auth = "curator:" + secrets.token_urlsafe(32)
    home = tmp_path_factory.mktemp("prefect-server")
    svc = unit("prefect-server.service")["Service"]
    # The unit's own environment (its homes moved under tmp_path) and its EnvironmentFile, made
    # from the shipped template as the guide says.
    env = dict(e.split("=", 1) for e in svc["Environment"])
    assert svc["EnvironmentFile"] == ["/etc/revbench/prefect-server.env"]
    env.update(filled(PREFECT_TEMPLATE, auth))
    # compose hands its server the same variable, from the client's name in deploy/.env.
    dotenv = filled(TEMPLATE, auth)
    composed = {k: interpolate(str(v), dotenv) for k, v in compose()["services"]["prefect"]["environment"].items()}
    assert composed["PREFECT_SERVER_API_AUTH_STRING"] == env["PREFECT_SERVER_API_AUTH_STRING"] == auth
    env.update(HOME=str(home), PREFECT_HOME=str(home / "prefect-server"))
    env = clean_env(home / "prefect-server", **{k: v for k, v in env.items() if k != "PREFECT_HOME"})
    port = free_port()
    command = shlex.split(svc["ExecStart"][0])
    assert command[0] == "/opt/revbench/venv/bin/prefect" and command[-2:] == ["--port", "4200"]
    command = [str(Path(sys.executable).parent / "prefect"), *command[1:-1], str(port)]
    # Its health stays open (compose's healthcheck and the doctor's first probe use it).
    with prefect_server_process(command, env, home, port, "authenticated Prefect server") as api:
        client_env = {**dotenv, "PREFECT_API_URL": api}
        yield Curator(api, auth, {k: v for k, v in client_env.items() if k.startswith("PREFECT_API_")})


def basic(value: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(value.encode()).decode()}


def test_the_api_refuses_requests_without_the_auth_string(curator: Curator) -> None:
    with httpx.Client(timeout=10) as http:
        for headers in ({}, basic("curator:wrong"), basic(curator.auth + "x"), {"Authorization": "Bearer " + curator.auth}):
            assert http.post(f"{curator.api}/flows/filter", json={}, headers=headers).status_code == 401, headers
            assert http.get(f"{curator.api}/admin/version", headers=headers).status_code == 401, headers
            assert http.post(f"{curator.api}/deployments/filter", json={}, headers=headers).status_code == 401, headers
        ok = http.post(f"{curator.api}/flows/filter", json={}, headers=basic(curator.auth))
        assert ok.status_code == 200 and ok.json() == [], ok.text
        assert http.get(f"{curator.api}/admin/version", headers=basic(curator.auth)).status_code == 200


CLIENT = "from prefect.client.orchestration import get_client\nwith get_client(sync_client=True) as c: print(len(c.read_flows()))"


def test_prefect_s_client_signs_in_with_the_template_s_variable(curator: Curator, tmp_path: Path) -> None:
    assert set(curator.client_env) == {"PREFECT_API_URL", "PREFECT_API_AUTH_STRING"}
    env = clean_env(tmp_path / "prefect-home", **curator.client_env)
    done = subprocess.run([sys.executable, "-c", CLIENT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr
    env.pop("PREFECT_API_AUTH_STRING")
    done = subprocess.run([sys.executable, "-c", CLIENT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "401" in done.stderr, done.stderr


def test_revbench_serve_serves_with_the_string_and_says_so_without(curator: Curator, tmp_path: Path) -> None:
    env = clean_env(tmp_path / "prefect-home", **curator.client_env, REVBENCH_DATA_DIR=str(tmp_path / "data"),
                    REVBENCH_SCHEDULE__REFRESH_CRON="0 0 1 1 *", REVBENCH_SCHEDULE__RATINGS_CRON="0 0 1 1 *",
                    REVBENCH_SCHEDULE__BACKUP_CRON="0 0 1 1 *")
    cmd = [sys.executable, "-m", "revbench", "serve"]
    without = subprocess.run(cmd, env={k: v for k, v in env.items() if k != "PREFECT_API_AUTH_STRING"}, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    lines = without.stderr.strip().splitlines()
    assert without.returncode == 2 and len(lines) == 1, without.stderr
    assert "PREFECT_API_AUTH_STRING is not set" in lines[0] and curator.api in lines[0], lines[0]

    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        def deployments() -> list[str]:
            got = httpx.post(f"{curator.api}/deployments/filter", json={}, headers=basic(curator.auth), timeout=10)
            return sorted(d["name"] for d in got.json()) if got.status_code == 200 else []

        names = wait_for("deployments served", lambda: len(deployments()) == 3 and deployments(), 90, proc, log)
        assert names == ["scheduled"] * 3 and "Serving on the Prefect API" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
        # A 401 as a status, not as digits of the server's port (127.0.0.1:40107 failed a run).
        assert "Traceback" not in log.read_text() and not re.search(r"\b401\b|Unauthorized", log.read_text()), log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

