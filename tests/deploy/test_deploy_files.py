"""What a user runs from deploy/, checked without running it: the compose file names pinned images
and the services' commands, healthchecks and ports; the image installs the pinned project; the
production settings template holds only real settings, with placeholders where secrets go; the
Caddyfile validates with Debian's caddy and keeps no client address; the systemd units agree with
the rest and pass ``systemd-analyze verify`` where it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from dotenv import dotenv_values
from pydantic import BaseModel, SecretStr

from revbench.settings import Settings, check_environment, env_names

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CADDYFILE = DEPLOY / "Caddyfile"
TEMPLATE = DEPLOY / "revbench.env.example"
SURVEY_TEMPLATE = DEPLOY / "survey.env.example"
PREFECT_TEMPLATE = DEPLOY / "prefect-server.env.example"
SYSTEMD = DEPLOY / "systemd"
# A tag naming one release (x.y.z, with a variant such as -crf or -python3.11), never latest or a
# floating major version: the deployment a user runs is the one these files describe.
PINNED = re.compile(r"^[a-z0-9./-]+:\d+\.\d+\.\d+(-[a-z0-9.]+)?$")
# What a live run cannot do without: the services, the survey's links and mail, releases.
LIVE_RUN_NEEDS = {
    "REVBENCH_DATA_DIR", "PREFECT_API_URL", "REVBENCH_GROBID__BASE_URL", "REVBENCH_S2__API_KEY",
    "REVBENCH_LLM__BASE_URL", "REVBENCH_LLM__API_KEY", "REVBENCH_SURVEY__SIGNING_KEY", "REVBENCH_SURVEY__BASE_URL",
    "REVBENCH_SURVEY__SENDER_EMAIL", "REVBENCH_SMTP__HOST", "REVBENCH_SMTP__USERNAME", "REVBENCH_SMTP__PASSWORD",
    "REVBENCH_RELEASE__ID_KEY", "REVBENCH_BACKUP__DIR", "SURVEY_DOMAIN", "SURVEY_TLS", "PREFECT_API_AUTH_STRING",
}
# The placeholders `revbench doctor` refuses: secrets, and hosts of the reserved example domain.
SECRET_PLACEHOLDER = "change-me"
PLACEHOLDER_DOMAIN = "example.org"


def pinned_versions() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep:
            out[name.strip().lower()] = version.strip()
    return out


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def template(path: Path = TEMPLATE) -> dict[str, str | None]:
    return dotenv_values(path)


def templates() -> dict[str, str | None]:
    """The flows' settings: revbench.env and survey.env together, as revbench-serve.service and
    compose's worker read them (the two never set one variable twice, a test checks)."""
    return {**template(), **template(SURVEY_TEMPLATE)}


def unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file as {section: {key: [values in order]}} (keys may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in (SYSTEMD / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def secret_names(model: type[BaseModel] = Settings, prefix: str = "REVBENCH_") -> set[str]:
    """The variables of SecretStr settings."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= secret_names(ann, f"{prefix}{name.upper()}__")
        elif ann is SecretStr or SecretStr in getattr(ann, "__args__", ()):
            out.add(f"{prefix}{name.upper()}")
    return out


def test_compose_runs_pinned_images() -> None:
    services = compose()["services"]
    assert set(services) == {"grobid", "prefect", "worker", "survey", "caddy"}
    images = {name: svc["image"] for name, svc in services.items()}
    for name in ("grobid", "prefect", "caddy"):
        assert PINNED.match(images[name]), f"{name}: {images[name]} is not pinned to a release"
    assert images["grobid"].startswith("grobid/grobid:0.8.")
    # The Prefect server speaks the API of the client revbench installs.
    assert images["prefect"] == f"prefecthq/prefect:{pinned_versions()['prefect']}-python3.11"
    assert images["caddy"].startswith("caddy:2.")
    for name in ("worker", "survey"):
        assert services[name]["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert services["worker"]["env_file"] == [".env", "survey.env"]
    assert services["survey"]["env_file"] == ["survey.env"]


def test_compose_services_restart_answer_and_stay_private() -> None:
    services = compose()["services"]
    for name, svc in services.items():
        assert svc["restart"] == "unless-stopped", name
    health = {name: " ".join(svc["healthcheck"]["test"]) for name, svc in services.items() if "healthcheck" in svc}
    assert set(health) == {"grobid", "prefect", "survey"}
    assert "/api/isalive" in health["grobid"] and "/api/health" in health["prefect"] and "/healthz" in health["survey"]
    assert services["prefect"]["command"] == ["prefect", "server", "start", "--host", "0.0.0.0", "--port", "4200"]
    assert services["worker"]["command"] == ["revbench", "serve"]
    assert services["worker"]["environment"]["PREFECT_API_URL"] == "http://prefect:4200/api"
    assert services["survey"]["command"] == ["revbench", "survey", "serve", "--host", "0.0.0.0", "--port", "8765"]
    assert services["caddy"]["environment"]["SURVEY_UPSTREAM"] == "survey:8765"
    # Only Caddy is reachable from outside; GROBID and the Prefect UI on the host's loopback.
    for name, svc in services.items():
        for port in svc.get("ports", []):
            assert name == "caddy" or port.startswith("127.0.0.1:"), f"{name} publishes {port}"
    assert "survey" not in {n for n, svc in services.items() if svc.get("ports")}
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in services["caddy"]["volumes"]
    assert {"revbench-data", "survey-store", "prefect-server", "caddy-data", "caddy-config"} <= set(compose()["volumes"])
    # Worker and survey server share the survey store alone; the worker also writes the data and the backups.
    assert services["survey"]["volumes"] == ["survey-store:/var/lib/revbench/survey"]
    assert set(services["worker"]["volumes"]) == {"revbench-data:/var/lib/revbench", "survey-store:/var/lib/revbench/survey",
                                                  "./backups:/var/backups/revbench"}


def test_the_image_installs_the_pinned_project() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert f"torch=={pinned_versions()['torch']}" in dockerfile
    assert "--index-url https://download.pytorch.org/whl/cpu" in dockerfile
    assert re.search(r'pip install -c constraints\.txt "\.\[ml\]"', dockerfile)
    assert re.search(r"^USER revbench$", dockerfile, re.M)
    # Every package directory is copied in, and let through the build context's ignore file.
    package_dirs = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values())
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.M))
    assert package_dirs <= copied, package_dirs - copied
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert "**" in ignore and all(f"!{d}/" in ignore for d in package_dirs)
    assert {"!pyproject.toml", "!constraints.txt"} <= set(ignore)


def test_the_settings_template_holds_real_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import prefect.settings

    values = templates()
    keys = set(values)
    # The survey server's file and the flows' never set one variable twice: no order decides.
    assert set(template()) & set(template(SURVEY_TEMPLATE)) == set()
    assert set(template(PREFECT_TEMPLATE)) == {"PREFECT_SERVER_API_AUTH_STRING"}
    revbench_keys = {k for k in keys if k.startswith("REVBENCH_")}
    assert revbench_keys <= set(env_names()), revbench_keys - set(env_names())
    for key in {k for k in keys if k.startswith("PREFECT_")}:
        assert hasattr(prefect.settings, key), f"{key} is not a Prefect setting"
    others = keys - revbench_keys - {k for k in keys if k.startswith("PREFECT_")}
    assert others == {"SURVEY_DOMAIN", "SURVEY_TLS"}
    for key in others:  # read by Caddy, handed over by compose
        assert f"{{${key}}}" in CADDYFILE.read_text() and f"${{{key}:?" in (DEPLOY / "compose.yaml").read_text()
    assert LIVE_RUN_NEEDS <= keys, LIVE_RUN_NEEDS - keys

    # The command line's own check of a settings file, and every value valid as it stands.
    check_environment({}, TEMPLATE)
    check_environment({}, SURVEY_TEMPLATE)
    monkeypatch.delenv("REVBENCH_DATA_DIR")
    s = Settings(_env_file=(TEMPLATE, SURVEY_TEMPLATE))  # type: ignore[call-arg]
    assert s.survey.base_url == f"https://{values['SURVEY_DOMAIN']}"
    assert s.arxiv.categories == ["cs.AI", "cs.CL", "cs.CV", "cs.IR", "cs.LG"]
    assert s.schedule.refresh_cron == "0 3 * * *" and s.smtp.security == "starttls"
    # Data and the Prefect client's home sit in the directory compose's volume and systemd's
    # ReadWritePaths give the revbench user.
    assert s.data_dir.parent == Path("/var/lib/revbench") == Path(values["PREFECT_HOME"]).parent  # type: ignore[arg-type]
    # The survey store in its own folder there: compose's survey-store volume, systemd's StateDirectory.
    assert s.survey_store_path == Path("/var/lib/revbench/survey/survey.sqlite")
    assert f"survey-store:{s.survey.store_dir}" in compose()["services"]["survey"]["volumes"]
    assert unit("revbench-survey.service")["Service"]["StateDirectory"] == [
        str(s.survey.store_dir.relative_to("/var/lib"))]  # type: ignore[union-attr]
    # Backups go where compose mounts a host folder and the serving unit may write.
    assert s.backup.dir == Path("/var/backups/revbench")
    assert f"./backups:{s.backup.dir}" in compose()["services"]["worker"]["volumes"]
    assert str(s.backup.dir) in unit("revbench-serve.service")["Service"]["ReadWritePaths"][0].split()


@pytest.mark.parametrize("path", [TEMPLATE, SURVEY_TEMPLATE, PREFECT_TEMPLATE], ids=lambda p: p.name)
def test_the_settings_template_reads_the_same_in_a_shell(path: Path) -> None:
    # `set -a; . revbench.env` is how the guide runs `revbench doctor` on a systemd host: the shell
    # must read every value as revbench's own reader does (quotes, JSON lists, cron fields).
    script = f'set -a; . "{path}"; env -0'
    done = subprocess.run(["sh", "-c", script], env={"PATH": "/usr/bin:/bin"}, capture_output=True, check=True)
    shell = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    assert {k: shell.get(k) for k in template(path)} == template(path)


def test_the_settings_template_ships_placeholders_only() -> None:
    values = {**templates(), **template(PREFECT_TEMPLATE)}
    secrets = (secret_names() | {"PREFECT_API_AUTH_STRING", "PREFECT_SERVER_API_AUTH_STRING"}) & set(values)
    assert secrets >= {"REVBENCH_S2__API_KEY", "REVBENCH_LLM__API_KEY", "REVBENCH_SURVEY__SIGNING_KEY",
                       "REVBENCH_SMTP__PASSWORD", "REVBENCH_RELEASE__ID_KEY", "PREFECT_API_AUTH_STRING",
                       "PREFECT_SERVER_API_AUTH_STRING"}
    for key in secrets:
        assert values[key] == SECRET_PLACEHOLDER, key
    for key, value in values.items():
        assert value is not None, key
        for url in re.findall(r"https?://[^\s)]+", value):
            host = urlsplit(url).hostname or ""
            assert host in {"127.0.0.1", "localhost"} or host.endswith(PLACEHOLDER_DOMAIN), f"{key}: {url}"
        for address in re.findall(r"[\w.+-]+@([\w.-]+)", value):
            assert address == PLACEHOLDER_DOMAIN, f"{key}: {value}"
    assert values["SURVEY_DOMAIN"].endswith(PLACEHOLDER_DOMAIN)  # type: ignore[union-attr]


def test_the_caddyfile_keeps_no_client_address() -> None:
    text = CADDYFILE.read_text()
    code = "\n".join(ln.split("#", 1)[0] for ln in text.splitlines())
    # No access log anywhere (a `log` directive inside the site block would start one); Caddy's
    # own log drops the client's address and the link of a failed request.
    assert re.findall(r"^[ \t]*log\b.*$", code, re.M) == ["\tlog default {"]
    for field in ("remote_ip", "client_ip", "remote_port", "uri", "headers"):
        assert re.search(rf"request>{field} delete", code), field
    assert 'Strict-Transport-Security "max-age=31536000"' in code
    assert "skip_install_trust" in code and "tls {$SURVEY_TLS}" in code
    # Its default upstream is where `revbench survey serve` listens by default; the systemd drop-in
    # points it at the unix socket the unit serves on.
    upstream = re.search(r"reverse_proxy \{\$SURVEY_UPSTREAM:([\d.]+:\d+)\}", code).group(1)  # type: ignore[union-attr]
    assert upstream == "127.0.0.1:8765"
    exec_start = unit("revbench-survey.service")["Service"]["ExecStart"][0]
    env = dict(v.split("=", 1) for v in unit("caddy.service.d/revbench.conf")["Service"]["Environment"])
    socket = env["SURVEY_UPSTREAM"].removeprefix("unix/")
    assert env["SURVEY_UPSTREAM"].startswith("unix//") and exec_start.endswith(f"revbench survey serve --socket {socket}")


@pytest.mark.parametrize("tls", ["change-me@example.org", "internal"], ids=["acme", "internal-ca"])
def test_the_caddyfile_validates(caddy_bin: str, caddy_env: dict[str, str], tls: str, tmp_path: Path) -> None:
    env = {**caddy_env, "SURVEY_DOMAIN": "survey.example.org", "SURVEY_TLS": tls}
    done = subprocess.run([caddy_bin, "validate", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Valid configuration" in done.stdout + done.stderr, done.stdout + done.stderr
    # Without the domain Caddy refuses to start rather than serve something else.
    bare = subprocess.run([caddy_bin, "validate", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
                          env=caddy_env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bare.returncode != 0


HARDENED = ["revbench-survey.service", "revbench-serve.service", "prefect-server.service"]


def test_the_systemd_units_agree_with_the_rest() -> None:
    for name in HARDENED:
        svc = unit(name)["Service"]
        assert svc["User"] == ["revbench"] and svc["Restart"] == ["on-failure"], name
        assert svc["NoNewPrivileges"] == ["yes"] and svc["ProtectSystem"] == ["strict"], name
        assert svc["ReadWritePaths"][0].split()[0].startswith("/var/lib/revbench"), name
        assert unit(name)["Install"]["WantedBy"] == ["multi-user.target"], name
    assert unit("revbench-serve.service")["Service"]["EnvironmentFile"] == ["/etc/revbench/revbench.env",
                                                                             "/etc/revbench/survey.env"]
    assert unit("revbench-survey.service")["Service"]["EnvironmentFile"] == ["/etc/revbench/survey.env"]
    assert unit("revbench-serve.service")["Service"]["ExecStart"] == ["/opt/revbench/venv/bin/revbench serve"]
    assert "/var/backups/revbench" in unit("revbench-serve.service")["Service"]["ReadWritePaths"][0].split()
    assert unit("prefect-server.service")["Service"]["ExecStart"] == [
        "/opt/revbench/venv/bin/prefect server start --host 127.0.0.1 --port 4200"]
    # GROBID runs the compose file's image.
    grobid = unit("grobid.service")["Service"]
    assert grobid["Restart"] == ["on-failure"]
    assert grobid["ExecStart"][0].endswith(f"docker.io/{compose()['services']['grobid']['image']}")
    assert "-p 127.0.0.1:8070:8070" in grobid["ExecStart"][0]
    # Caddy's drop-in gives Debian's caddy.service the values the template documents, nothing else.
    env = dict(v.split("=", 1) for v in unit("caddy.service.d/revbench.conf")["Service"]["Environment"])
    assert set(env) == {"SURVEY_DOMAIN", "SURVEY_TLS", "SURVEY_UPSTREAM"}
    assert env["SURVEY_DOMAIN"] == template()["SURVEY_DOMAIN"]
    assert env["SURVEY_UPSTREAM"] == "unix//run/revbench-survey/survey.sock"
    assert "EnvironmentFile" not in unit("caddy.service.d/revbench.conf")["Service"]


def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is missing (apt-get install -y systemd); the units' keys are checked above")
    units = sorted(str(p) for p in SYSTEMD.glob("*.service"))
    done = subprocess.run([tool, "verify", *units], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    # This machine has no /opt/revbench install and no podman: those two complaints are expected,
    # anything else (an unknown key, a bad value, a missing section) is a mistake in a unit.
    expected = re.compile(r"^[\w.-]+\.service: Command (/opt/revbench/venv/bin/(revbench|prefect)|/usr/bin/podman) "
                          r"is not executable: No such file or directory$")
    problems = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip() and not expected.match(ln)]
    assert problems == [], "\n".join(problems)
