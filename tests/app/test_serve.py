"""`revbench serve` and prefect.yaml against a real Prefect server with its scheduler: the cron
deployments get scheduled runs, a triggered run completes in a subprocess of the serving process,
Ctrl-C and SIGTERM stop it cleanly (schedules paused, resumed on the next serve), and the worker
route declared in prefect.yaml deploys and runs the same flows. The ratings pull sends reminders
only when unattended sending is configured, and a failed wave never keeps answers from being pulled."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from revbench.app.deployments import BACKUP_FLOW, DEPLOYMENT, RATINGS_FLOW, REFRESH_FLOW, deployments, schedule_of
from revbench.replay.server import free_port
from revbench.settings import ScheduleSettings, Settings
from revbench.warehouse import Warehouse
from tests.support.common import run_cli
from tests.support.processes import clean_env, prefect_server_process, wait_for

ROOT = Path(__file__).resolve().parents[2]
REFRESH = f"{REFRESH_FLOW}/{DEPLOYMENT}"
RATINGS = f"{RATINGS_FLOW}/{DEPLOYMENT}"
BACKUP = f"{BACKUP_FLOW}/{DEPLOYMENT}"


@pytest.fixture(scope="module")
def scheduler_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `prefect server start` of its own: the session's test server runs in ephemeral mode,
    where the scheduler service is off and cron deployments never get runs. The tests of this
    module share it and run in file order."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    env = clean_env(home, PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{home / 'prefect.db'}",
                    PREFECT_SERVER_UI_ENABLED="false",
                    PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="2",
                    PREFECT_SERVER_SERVICES_SCHEDULER_RECENT_DEPLOYMENTS_LOOP_SECONDS="1")
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with prefect_server_process(command, env, home, port) as url:
        yield url


@contextmanager
def client_of(url: str) -> Iterator[Any]:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        yield client


def read_deployment(client: Any, name: str) -> Any:
    from prefect.exceptions import ObjectNotFound

    try:
        return client.read_deployment_by_name(name)
    except ObjectNotFound:
        return None


def auto_scheduled_runs(client: Any, deployment_id: Any) -> list[Any]:
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    runs = client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
        flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED]))))
    return [r for r in runs if r.auto_scheduled]


# The refresh fires every minute, so its scheduled runs are due during the test (and stay offline
# and fast). The ratings pull is triggered by hand: were it due every minute too, a triggered run
# could meet a scheduled one that the runner prefetched (10 s ahead), find the deployment's one
# concurrency slot taken, and wait about 30 s for the next try.
CRONS = {"refresh": "* * * * *", "ratings": "0 0 1 1 *", "backup": "0 0 1 1 *"}


def start_serve(tmp_path: Path, url: str, log: Path) -> subprocess.Popen[Any]:
    env = clean_env(tmp_path / "prefect-home", PREFECT_API_URL=url, REVBENCH_DATA_DIR=str(tmp_path / "data"),
                    REVBENCH_SCHEDULE__REFRESH_CRON=CRONS["refresh"], REVBENCH_SCHEDULE__RATINGS_CRON=CRONS["ratings"],
                    REVBENCH_SCHEDULE__BACKUP_CRON=CRONS["backup"],
                    REVBENCH_REFRESH__STAGES='["ratings"]', PREFECT_RUNNER_POLL_FREQUENCY="2")
    with log.open("a") as out:
        return subprocess.Popen([sys.executable, "-m", "revbench", "serve"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, cwd=tmp_path)


def stop(proc: subprocess.Popen[Any], sig: int, log: Path) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=45)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"`revbench serve` did not stop on signal {sig}:\n{log.read_text()}")


def served(client: Any, since: datetime) -> tuple[Any, Any] | None:
    """The deployments, once active and polled by a runner since ``since`` (a signal that comes
    earlier finds the runner still starting: it would stop it before it could pause anything)."""
    found = read_deployment(client, REFRESH), read_deployment(client, RATINGS), read_deployment(client, BACKUP)
    ok = all(d is not None and not d.paused and d.last_polled and d.last_polled > since for d in found)
    return found if ok else None


@pytest.mark.slow
def test_serve_schedules_runs_and_stops_cleanly(scheduler_api: str, tmp_path: Path) -> None:
    from prefect.deployments import run_deployment

    log = tmp_path / "serve.log"
    started = datetime.now(UTC)
    proc = start_serve(tmp_path, scheduler_api, log)
    try:
        with client_of(scheduler_api) as client:
            refresh, ratings, backup = wait_for("served deployments", lambda: served(client, started), 60, proc, log)
            for d, cron in ((refresh, CRONS["refresh"]), (ratings, CRONS["ratings"]), (backup, CRONS["backup"])):
                assert [(s.schedule.cron, s.schedule.timezone, s.active) for s in d.schedules] == [(cron, "UTC", True)]
                assert d.tags == ["revbench"] and d.work_pool_name is None
            assert refresh.entrypoint == "revbench.app.deployments.scheduled_refresh"
            wait_for("scheduled run of the refresh", lambda: auto_scheduled_runs(client, refresh.id), 30, proc, log)

            run = run_deployment(RATINGS, timeout=120, poll_interval=1)
            assert run.state is not None and run.state.is_completed(), (run.state, log.read_text())
            assert proc.poll() is None, log.read_text()

        # The run was a refresh of this data dir, recorded under the flow run's id and the flow that ran.
        with Warehouse.open(tmp_path / "data" / "warehouse.duckdb", read_only=True, lock_wait=30) as wh:
            runs = {r["run_id"]: r for r in wh.runs.latest_runs(50).to_dicts()}
        assert runs[str(run.id)]["flow"] == RATINGS_FLOW and runs[str(run.id)]["status"] == "completed"

        assert stop(proc, signal.SIGINT, log) == 0, log.read_text()
        out = log.read_text()
        assert f"{REFRESH}  cron '* * * * *' (UTC), next run" in out and f"{RATINGS}  cron '0 0 1 1 *' (UTC)" in out
        assert f"{BACKUP}  cron '0 0 1 1 *' (UTC)" in out
        assert f"prefect deployment run '{RATINGS}'" in out and "Stopped serving" in out
        assert "Traceback" not in out, out
        with client_of(scheduler_api) as client:
            assert all(read_deployment(client, name).paused for name in (REFRESH, RATINGS, BACKUP))

        # Serving again resumes the schedules; SIGTERM (a service manager's stop) ends it like Ctrl-C.
        started = datetime.now(UTC)
        proc = start_serve(tmp_path, scheduler_api, log)
        with client_of(scheduler_api) as client:
            wait_for("resumed deployments", lambda: served(client, started), 60, proc, log)
        assert stop(proc, signal.SIGTERM, log) == 0, log.read_text()
        assert log.read_text().count("Stopped serving") == 2 and "RuntimeWarning" not in log.read_text(), log.read_text()
        with client_of(scheduler_api) as client:
            assert all(read_deployment(client, name).paused for name in (REFRESH, RATINGS, BACKUP))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_without_a_prefect_api_says_how_to_start_one(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "prefect-home", REVBENCH_DATA_DIR=str(tmp_path / "data"))
    out = subprocess.run([sys.executable, "-m", "revbench", "serve"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "prefect server start" in lines[0] and "PREFECT_API_URL" in lines[0], out.stderr

    env["PREFECT_API_URL"] = f"http://127.0.0.1:{free_port()}/api"
    out = subprocess.run([sys.executable, "-m", "revbench", "serve"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 3 and len(lines) == 1 and env["PREFECT_API_URL"] in lines[0], out.stderr


def test_prefect_yaml_declares_the_served_deployments() -> None:
    from prefect.flows import load_flow_from_entrypoint

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    defaults = ScheduleSettings()
    built = {f"{d.flow_name}/{d.name}": d for d in deployments(Settings())}
    declared = {}
    for d in spec["deployments"]:
        path, _, func = d["entrypoint"].partition(":")
        assert (ROOT / path).is_file()
        flow = load_flow_from_entrypoint(f"{ROOT / path}:{func}")
        declared[f"{flow.name}/{d['name']}"] = d
    assert declared.keys() == built.keys() == {REFRESH, RATINGS, BACKUP}
    assert schedule_of(built[REFRESH]) == (defaults.refresh_cron, defaults.timezone)
    for name, d in declared.items():
        assert [(s["cron"], s["timezone"]) for s in d["schedules"]] == [schedule_of(built[name])]
        assert built[name].entrypoint.rsplit(".", 1)[1] == d["entrypoint"].rsplit(":", 1)[1]
        assert d["tags"] == built[name].tags and d["concurrency_limit"] == built[name].concurrency_limit
        assert d["work_pool"]["name"] == "revbench"
    assert spec["pull"] == [{"prefect.deployments.steps.set_working_directory": {"directory": "{{ project.stdout }}"}}]


@pytest.mark.slow
def test_prefect_yaml_deploys_and_a_worker_runs_it(scheduler_api: str, tmp_path: Path) -> None:
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    env = clean_env(tmp_path / "prefect-home", PREFECT_API_URL=scheduler_api, REVBENCH_DATA_DIR=str(tmp_path / "data"),
                    REVBENCH_REFRESH__STAGES='["ratings"]')
    prefect = [sys.executable, "-m", "prefect"]

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([*prefect, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, out.stdout + out.stderr
        return out

    # What `prefect work-pool create revbench --type process` does, without starting a CLI.
    with client_of(scheduler_api) as client:
        client.create_work_pool(WorkPoolCreate(name="revbench", type="process",
                                               base_job_template=ProcessWorker.get_default_base_job_template()),
                                overwrite=True)
    run("--no-prompt", "deploy", "--all")
    with client_of(scheduler_api) as client:
        for name, func in ((REFRESH, "scheduled_refresh"), (RATINGS, "ratings_pull"), (BACKUP, "scheduled_backup")):
            d = read_deployment(client, name)
            assert d.entrypoint == f"revbench/app/deployments.py:{func}" and d.work_pool_name == "revbench"
            assert d.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]
            assert d.schedules and all(s.active for s in d.schedules) and not d.paused
            # The worker below takes every run due within its prefetch window: none but ours.
            client.pause_deployment(d.id)
        triggered = client.create_flow_run_from_deployment(read_deployment(client, RATINGS).id)
    # One polling pass: the worker starts the flow-run process (pull step, then the entrypoint)
    # and waits for it.
    run("worker", "start", "--pool", "revbench", "--run-once", timeout=180)
    with client_of(scheduler_api) as client:
        state = client.read_flow_run(triggered.id).state
    assert state is not None and state.is_completed(), state
    with Warehouse.open(tmp_path / "data" / "warehouse.duckdb", read_only=True) as wh:
        assert str(triggered.id) in wh.runs.latest_runs(50)["run_id"].to_list()


def test_reminders_are_sent_only_when_configured_and_unattended(settings: Settings) -> None:
    from revbench.app.deployments import send_reminders

    assert "REVBENCH_SMTP__HOST" in send_reminders(settings)
    mail = settings.with_overrides(smtp={"host": "127.0.0.1"})
    assert "REVBENCH_SURVEY__SIGNING_KEY" in send_reminders(mail)
    keyed = mail.with_overrides(survey={"signing_key": "k" * 40})
    assert "REVBENCH_SURVEY__AUTO_APPROVE" in send_reminders(keyed)
    unattended = keyed.with_overrides(survey={"auto_approve": True})
    assert send_reminders(unattended) == "skipped: no warehouse yet"
    with Warehouse.open(unattended.warehouse_path):
        pass
    assert send_reminders(unattended) == "skipped: no pools round yet"


def test_failed_reminders_still_pull_the_answers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import revbench.app.deployments as dep
    from revbench.errors import ServiceUnavailable

    def down(settings: Settings) -> None:
        raise ServiceUnavailable("SMTP", "smtp://127.0.0.1:25", "connection refused")

    monkeypatch.setattr(dep, "send_reminders", down)
    with pytest.raises(ServiceUnavailable):
        dep.ratings_pull.fn()  # in this process, without the engine: the same body a served run executes
    with Warehouse.open(tmp_path / "data" / "warehouse.duckdb", read_only=True) as wh:
        runs = wh.runs.latest_runs(5).to_dicts()
    # Recorded, and shown by `revbench status`, as the flow that ran: the ratings pull, not a refresh.
    assert [(r["flow"], r["status"]) for r in runs] == [(RATINGS_FLOW, "completed")]
    code, out, err = run_cli("status", "--json")
    assert code == 0, err
    assert [(r["run_id"], r["flow"]) for r in json.loads(out)["runs"]] == [(runs[0]["run_id"], "ratings-pull")]


def test_the_backup_is_served_unless_its_cron_is_empty() -> None:
    built = {f"{d.flow_name}/{d.name}": d for d in deployments(Settings())}
    assert schedule_of(built[BACKUP]) == (ScheduleSettings().backup_cron, "UTC") == ("30 2 * * *", "UTC")
    assert built[BACKUP].entrypoint == "revbench.app.deployments.scheduled_backup"
    assert built[BACKUP].concurrency_limit == 1  # two backups of one deployment never run at once
    off = Settings().with_overrides(schedule={"backup_cron": ""})
    assert BACKUP not in {f"{d.flow_name}/{d.name}" for d in deployments(off)}


def test_a_scheduled_backup_writes_a_snapshot_and_keeps_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import revbench.app.deployments as dep
    from revbench.backup.manifest import MANIFEST, snapshots

    data = tmp_path / "data"
    with Warehouse.open(data / "warehouse.duckdb"):
        pass
    monkeypatch.setenv("REVBENCH_BACKUP__KEY", "x" * 32)  # no backup is written without one
    monkeypatch.setenv("REVBENCH_BACKUP__KEEP", "2")
    results = [dep.scheduled_backup.fn() for _ in range(3)]  # the body a served run executes, in this process
    kept = snapshots(data / "backups")
    assert [str(p) for p in kept] == [r.path for r in results[1:]] and results[-1].pruned == [results[0].path]
    manifest = json.loads((kept[-1] / MANIFEST).read_text())
    assert manifest["warehouse"]["schema_version"] > 0 and manifest["survey_store"] is None
