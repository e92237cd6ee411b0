"""The internet-facing survey server holds the least, in every deployment we ship: in compose it
shares no network with the curator's plane (Prefect, GROBID, the worker) and its edge network has
no way out; in systemd it has no network at all and reaches Caddy through a unix socket; in both it
reads its own settings file, which holds no secret but its signing keys, and writes its store's
folder alone. And `revbench survey serve` refuses to start holding a secret that is not its own."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from dotenv import dotenv_values

from revbench.settings import Settings
from revbench.survey.privilege import OWN_SECRETS, PREFECT_SECRETS, secret_settings, variable
from tests.support.cli import cli, one_line_error
from tests.support.common import run_cli
from tests.support.survey import KEY

from tests.deploy.test_deploy_files import DEPLOY, PREFECT_TEMPLATE, SURVEY_TEMPLATE, TEMPLATE, compose, unit

CURATOR = {"prefect", "grobid", "worker"}
PUBLIC = {"survey", "caddy"}
# Every secret of the flows and of the curator's plane: the survey server holds none of them.
FOREIGN = sorted({variable(d) for d in secret_settings() if d not in OWN_SECRETS} | set(PREFECT_SECRETS))
STORE = Path("/var/lib/revbench/survey")


def networks(service: dict) -> set[str]:
    """The networks a compose service joins (none named: compose's `default`)."""
    nets = service.get("networks", ["default"])
    return set(nets if isinstance(nets, list) else nets)


def env_file_values(service: dict) -> dict[str, str | None]:
    """What a compose service's env_file hands it, read from the templates those files are made from."""
    files = service.get("env_file", [])
    out: dict[str, str | None] = {}
    for name in [files] if isinstance(files, str) else files:
        out.update(dotenv_values(DEPLOY / {".env": "revbench.env.example"}.get(name, f"{name}.example")))
    return out


def test_foreign_secrets_cover_every_secret_setting_but_the_signing_keys() -> None:
    # A secret setting added later (the backup key) is foreign unless it is the survey's own.
    assert {"REVBENCH_SMTP__PASSWORD", "REVBENCH_S2__API_KEY", "REVBENCH_LLM__API_KEY", "REVBENCH_RELEASE__ID_KEY",
            "PREFECT_API_AUTH_STRING", "PREFECT_SERVER_API_AUTH_STRING"} <= set(FOREIGN)
    assert not {"REVBENCH_SURVEY__SIGNING_KEY", "REVBENCH_SURVEY__OLD_SIGNING_KEYS"} & set(FOREIGN)
    assert all(variable(d) in FOREIGN for d in secret_settings() if not d.startswith("survey."))


# --- compose ---------------------------------------------------------------------------------------

def test_compose_keeps_the_survey_and_caddy_off_the_curator_plane() -> None:
    doc = compose()
    services = doc["services"]
    assert set(services) == CURATOR | PUBLIC
    for public in PUBLIC:
        for curator in CURATOR:
            shared = networks(services[public]) & networks(services[curator])
            assert not shared, f"{public} and {curator} share {shared}"
    # The survey server's only network is internal (no way out) and shared with Caddy alone.
    [edge] = networks(services["survey"])
    assert doc["networks"][edge]["internal"] is True
    assert {name for name, svc in services.items() if edge in networks(svc)} == PUBLIC
    # Caddy's other network, for its published ports, holds nobody else.
    for net in networks(services["caddy"]) - {edge}:
        assert {name for name, svc in services.items() if net in networks(svc)} == {"caddy"}
        assert not doc["networks"].get(net, {}).get("internal"), net
    # The worker reaches the internet (arXiv, S2, SMTP): its network is not internal.
    assert not any(doc["networks"].get(n, {}).get("internal") for n in networks(services["worker"]))


def test_compose_hands_the_survey_server_only_its_own_settings_and_store() -> None:
    survey = compose()["services"]["survey"]
    given = {**env_file_values(survey), **survey.get("environment", {})}
    assert given, "the survey server's settings were not found"
    held = sorted(set(given) & set(FOREIGN))
    assert held == [], f"the survey server's environment holds {held}"
    assert not [k for k in given if k.startswith("PREFECT_")]
    # Its settings are complete (a signing key) and put the store where its one volume is.
    s = Settings(_env_file=SURVEY_TEMPLATE)  # type: ignore[call-arg]
    assert s.survey.signing_key is not None and s.survey_store_path.parent == STORE
    assert survey["volumes"] == [f"survey-store:{STORE}"]
    text = " ".join(str(v) for v in [*given.values(), *survey["volumes"], survey.get("working_dir", "")])
    for curator_path in ("warehouse", "prefect", "revbench-data", "backups", "/var/lib/revbench/data"):
        assert curator_path not in text, curator_path
    assert survey["read_only"] is True and survey["cap_drop"] == ["ALL"]


def test_compose_puts_prefect_behind_its_auth_string() -> None:
    services = compose()["services"]
    # The server's string is the worker's PREFECT_API_AUTH_STRING from deploy/.env (compose refuses to
    # start without it), and nobody else gets it.
    assert services["prefect"]["environment"]["PREFECT_SERVER_API_AUTH_STRING"] == (
        "${PREFECT_API_AUTH_STRING:?set PREFECT_API_AUTH_STRING in deploy/.env}")
    assert "PREFECT_API_AUTH_STRING" in env_file_values(services["worker"])
    for name in ("survey", "caddy", "grobid"):
        svc = services[name]
        assert "PREFECT_API_AUTH_STRING" not in {**env_file_values(svc), **svc.get("environment", {})}, name
        assert "PREFECT" not in str(svc.get("environment", {})), name


# --- systemd ---------------------------------------------------------------------------------------

def test_the_survey_unit_has_no_network_and_its_own_folder_alone() -> None:
    svc = unit("revbench-survey.service")["Service"]
    assert svc["PrivateNetwork"] == ["yes"] and svc["RestrictAddressFamilies"] == ["AF_UNIX"]
    assert svc["EnvironmentFile"] == ["/etc/revbench/survey.env"]
    assert not [e for e in svc.get("Environment", []) if e.split("=", 1)[0] in FOREIGN or e.startswith("PREFECT_")]
    held = sorted(set(dotenv_values(SURVEY_TEMPLATE)) & set(FOREIGN))
    assert held == [], f"survey.env holds {held}"
    # It writes its store's folder and nothing else, and sees nothing else of /var/lib/revbench.
    store = Settings(_env_file=SURVEY_TEMPLATE).survey.store_dir  # type: ignore[call-arg]
    assert store == STORE
    assert svc["ReadWritePaths"] == [str(store)] and svc["BindPaths"] == [str(store)]
    assert svc["StateDirectory"] == [str(store.relative_to("/var/lib"))] and svc["WorkingDirectory"] == [str(store)]
    assert svc["TemporaryFileSystem"] == ["/var/lib/revbench:ro"]
    hidden = svc["InaccessiblePaths"][0].split()
    assert {"-/etc/revbench/revbench.env", "-/etc/revbench/prefect-server.env", "-/var/backups/revbench"} <= set(hidden)
    # It listens on a socket in its runtime folder, which Caddy's drop-in joins the group of.
    socket = re.fullmatch(r"/opt/revbench/venv/bin/revbench survey serve --socket (\S+)", svc["ExecStart"][0])
    assert socket is not None, svc["ExecStart"]
    assert Path(socket.group(1)).parent == Path("/run") / svc["RuntimeDirectory"][0]
    assert svc["RuntimeDirectoryMode"] == ["0750"] and svc["Group"] != ["revbench"]
    caddy = unit("caddy.service.d/revbench.conf")["Service"]
    assert f"SURVEY_UPSTREAM=unix/{socket.group(1)}" in caddy["Environment"]
    assert caddy["SupplementaryGroups"] == svc["Group"]


def test_the_prefect_unit_reads_its_auth_string_alone() -> None:
    svc = unit("prefect-server.service")["Service"]
    assert svc["EnvironmentFile"] == ["/etc/revbench/prefect-server.env"]
    assert set(dotenv_values(PREFECT_TEMPLATE)) == {"PREFECT_SERVER_API_AUTH_STRING"}
    # The flows send the same value under the client's name; the survey server has neither.
    assert "PREFECT_API_AUTH_STRING" in dotenv_values(TEMPLATE)
    assert "/etc/revbench/revbench.env" in unit("revbench-serve.service")["Service"]["EnvironmentFile"]
    assert svc["ExecStart"][0].endswith("--host 127.0.0.1 --port 4200")


# --- the refusal -----------------------------------------------------------------------------------
# These run the command in this process: the socket's folder does not exist, so a refusal that went
# missing ends in another one-line error (and a store written) rather than a server that never stops.

@pytest.mark.parametrize("name", FOREIGN)
def test_survey_serve_refuses_a_foreign_secret(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REVBENCH_SURVEY__SIGNING_KEY", KEY)
    monkeypatch.setenv("REVBENCH_SURVEY__STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv(name, "some-secret-value")
    code, out, err = run_cli("survey", "serve", "--socket", str(tmp_path / "missing" / "s.sock"))
    line = one_line_error(code, out, err, 2, name, "survey.env")
    assert "some-secret-value" not in line
    assert not (tmp_path / "store").exists()


def test_survey_serve_refuses_a_secret_in_its_dotenv_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    Path(".env").write_text(f"REVBENCH_SURVEY__SIGNING_KEY={KEY}\nREVBENCH_RELEASE__ID_KEY=r\nPREFECT_API_AUTH_STRING=a:b\n")
    code, out, err = run_cli("survey", "serve", "--socket", str(tmp_path / "missing" / "s.sock"))
    one_line_error(code, out, err, 2, "REVBENCH_RELEASE__ID_KEY, PREFECT_API_AUTH_STRING")


def test_survey_serve_refuses_in_its_own_process(settings: Settings, tmp_path: Path) -> None:
    s = settings.with_overrides(survey={"signing_key": KEY}, smtp={"password": "pw"})
    done = cli(s, "survey", "serve", "--socket", str(tmp_path / "missing" / "s.sock"),
               extra={"PREFECT_SERVER_API_AUTH_STRING": "curator:x"})
    line = one_line_error(done.returncode, done.stdout, done.stderr, 2, "REVBENCH_SMTP__PASSWORD",
                          "PREFECT_SERVER_API_AUTH_STRING")
    assert "Traceback" not in done.stderr and "curator:x" not in line


def test_survey_serve_takes_a_socket_or_an_address(tmp_path: Path) -> None:
    for flag in ("--host", "--port"):
        code, out, err = run_cli("survey", "serve", "--socket", str(tmp_path / "missing" / "s.sock"), flag, "8000")
        one_line_error(code, out, err, 2, "--socket", flag)


def test_a_demo_s_own_keys_are_dropped_not_refused(tmp_path: Path) -> None:
    # `make demo` keeps its keys beside its data, and every command on that data reads them: the
    # survey server serves that data, without the release key it has no use for.
    from revbench.app.entry import save_demo_settings
    from revbench.survey.privilege import foreign_secrets, without_foreign_secrets

    s = Settings(data_dir=tmp_path / "data", survey={"signing_key": KEY}, release={"id_key": "r" * 32},
                 smtp={"password": "pw"})
    dropped = without_foreign_secrets(s)
    assert dropped.survey.signing_key is not None and dropped.survey.signing_key.get_secret_value() == KEY
    assert dropped.release.id_key is None and dropped.smtp.password is None and foreign_secrets(dropped, {}) == []

    data = tmp_path / "data"
    save_demo_settings(data, {}, {"survey.signing_key": ".survey-demo-key", "release.id_key": ".release-demo-key"})
    (data / ".survey-demo-key").write_text(KEY)
    (data / ".release-demo-key").write_text("r" * 32)
    sock = tmp_path / "s.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
    env["REVBENCH_DATA_DIR"] = str(data)
    proc = subprocess.Popen([sys.executable, "-m", "revbench", "survey", "serve", "--socket", str(sock)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://survey", timeout=5) as http:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                try:
                    if http.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)  # not bound yet, or bound and not yet listening
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "holds secrets" not in err, err
