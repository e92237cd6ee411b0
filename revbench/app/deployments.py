"""The scheduled deployments: the refresh, the ratings pull with survey reminders, and the backup.

``revbench serve`` serves them from one process (no work pool); ``prefect.yaml`` declares the same
for Prefect workers. Either way each flow run is an entry point of its own: it builds the
settings from the environment and ``.env`` of the process that runs it (the serving process, or
the worker's flow-run process in the project directory).
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from prefect import flow
from prefect.runner import Runner
from prefect.schedules import Cron
from prefect.types.entrypoint import EntrypointType

from revbench.app.entry import build_settings, prepare_process
from revbench.flows.backup import BackupResult, backup_flow
from revbench.flows.common import quiet_expected_errors
from revbench.flows.refresh import RefreshResult, refresh_flow
from revbench.settings import Settings

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

log = logging.getLogger("revbench.deployments")

REFRESH_FLOW = "refresh"
RATINGS_FLOW = "ratings-pull"
BACKUP_FLOW = "backup"
DEPLOYMENT = "scheduled"
"""Deployment names are ``<flow>/<deployment>``: ``refresh/scheduled``, ``ratings-pull/scheduled`` and
``backup/scheduled``."""
TAGS = ["revbench"]

quiet_expected_errors()


def run_settings() -> Settings:
    """The settings of one flow run, with the process prepared the way the command line prepares it,
    except for signals: inside a flow run Prefect's own SIGTERM handler turns a cancellation from
    the UI into a cancelled run, and ours would turn it into a crash."""
    settings = build_settings()
    main = threading.current_thread() is threading.main_thread()
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        prepare_process(settings)
    finally:
        for sig, handler in kept.items():
            if handler is not None:
                signal.signal(sig, handler)
    return settings


@flow(name=REFRESH_FLOW, log_prints=True)
def scheduled_refresh(stages: list[str] | None = None) -> RefreshResult:
    """The refresh: ``stages`` in order (default REVBENCH_REFRESH__STAGES), each skipped when its
    inputs did not change."""
    return refresh_flow.fn(run_settings(), stages=stages)


@flow(name=RATINGS_FLOW, log_prints=True)
def ratings_pull() -> dict[str, Any]:
    """Reminders for the latest round (when sending is configured and unattended), then the
    refresh's ratings stage: new survey answers become ratings."""
    settings = run_settings()
    try:
        reminders: dict[str, Any] | str = send_reminders(settings)
        failure: Exception | None = None
    except Exception as exc:
        # Answers must still be pulled when the mail server is down; the run fails afterwards so
        # the curator sees it.
        log.warning("reminders failed (%s: %s); pulling the answers all the same", type(exc).__name__, exc)
        reminders, failure = f"failed: {type(exc).__name__}: {exc}", exc
    out = refresh_flow.fn(settings, stages=["ratings"], recorded_as=RATINGS_FLOW)
    if failure is not None:
        raise failure
    return {**asdict(out), "reminders": reminders}


@flow(name=BACKUP_FLOW, log_prints=True)
def scheduled_backup() -> BackupResult:
    """A snapshot of the warehouse and the survey store into REVBENCH_BACKUP__DIR, keeping the
    newest REVBENCH_BACKUP__KEEP."""
    return backup_flow.fn(run_settings())


def send_reminders(settings: Settings) -> dict[str, Any] | str:
    """Run the reminder wave of the latest round (a subflow), or say in words why not."""
    if not settings.smtp.host:
        return "skipped: REVBENCH_SMTP__HOST is not set"
    if settings.survey.signing_key is None:
        return "skipped: REVBENCH_SURVEY__SIGNING_KEY is not set"
    if not settings.survey.auto_approve:
        # A wave waiting for a curator's go would hold its run process for up to a day, and every
        # hourly run would queue another one behind it until the runner's process limit is reached.
        return ("skipped: scheduled reminders need REVBENCH_SURVEY__AUTO_APPROVE=true; otherwise run "
                "`revbench survey remind --round N` and answer in the Prefect UI")
    if not settings.warehouse_path.exists():
        return "skipped: no warehouse yet"
    from revbench.warehouse import Warehouse

    with Warehouse.open(settings.warehouse_path, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        latest = wh.pools.latest_round()
        sent = wh.survey.invitations_sent(latest["round"]) if latest else 0
    if latest is None:
        return "skipped: no pools round yet"
    if not sent:
        return f"skipped: round {latest['round']}'s invitations are not sent yet"
    from revbench.flows.survey import survey_flow

    return survey_flow(settings, round=latest["round"], kind="reminder")


def deployments(settings: Settings) -> list[RunnerDeployment]:
    """The refresh deployment, the ratings pull unless REVBENCH_SCHEDULE__RATINGS_CRON is empty, and
    the backup unless REVBENCH_SCHEDULE__BACKUP_CRON is empty."""
    sch = settings.schedule
    common: dict[str, Any] = {
        "name": DEPLOYMENT, "tags": TAGS,
        # The package is importable wherever revbench is installed; a file path would be relative
        # to the directory `revbench serve` happened to start in.
        "entrypoint_type": EntrypointType.MODULE_PATH,
        # Two runs of one deployment would compete for the warehouse: a late run waits for the other.
        "concurrency_limit": 1,
    }
    out = [scheduled_refresh.to_deployment(
        schedules=[Cron(sch.refresh_cron, timezone=sch.timezone)],
        description=f"Every stage of the refresh (REVBENCH_REFRESH__STAGES), on cron {sch.refresh_cron!r} "
                    f"({sch.timezone}).", **common)]
    if sch.ratings_cron:
        out.append(ratings_pull.to_deployment(
            schedules=[Cron(sch.ratings_cron, timezone=sch.timezone)],
            description=f"Survey reminders (when configured), then new answers into ratings, on cron "
                        f"{sch.ratings_cron!r} ({sch.timezone}).", **common))
    if sch.backup_cron:
        out.append(scheduled_backup.to_deployment(
            schedules=[Cron(sch.backup_cron, timezone=sch.timezone)],
            description=f"A snapshot of the warehouse and the survey store (REVBENCH_BACKUP__DIR, keeping "
                        f"REVBENCH_BACKUP__KEEP), on cron {sch.backup_cron!r} ({sch.timezone}).", **common))
    return out


def next_run(cron: str, timezone: str, after: datetime | None = None) -> datetime:
    """When ``cron`` next fires in ``timezone`` (aware, in that zone)."""
    from cronsim import CronSim

    tz = ZoneInfo(timezone)
    start = (after or datetime.now(tz)).astimezone(tz).replace(second=0, microsecond=0)
    return next(CronSim(cron, start))


def schedule_of(deployment: RunnerDeployment) -> tuple[str, str]:
    """(cron, timezone) of a deployment built by ``deployments``."""
    schedule = deployment.schedules[0].schedule
    return schedule.cron, schedule.timezone or "UTC"


def serve(settings: Settings) -> None:
    """Serve the deployments until Ctrl-C or SIGTERM (``prefect.serve`` with both signals handled
    alike); runs start in subprocesses of this process. The schedules are paused when serving
    stops, so no runs pile up while nothing serves them, and the next serve resumes them."""
    import asyncio

    runner = _GracefulRunner(pause_on_shutdown=True)
    for deployment in deployments(settings):
        runner.add_deployment(deployment)
    main = threading.current_thread() is threading.main_thread()
    # With Python's own SIGINT handler asyncio turns Ctrl-C into a cancellation of the runner, which
    # pauses every schedule on its way out. An interrupt raised wherever the loop happens to be (the
    # command line's handler) cancels every task at once, and can leave a schedule active.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if main else None
    # A SIGTERM that comes before the runner has put in its own handler (while it registers the
    # deployments) stops serving as Ctrl-C does too, not as an interrupted command (exit 130).
    previous_term = signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT)) if main else None
    try:
        asyncio.run(runner.start())
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)


class _GracefulRunner(Runner):
    """A runner that stops on SIGTERM the way it stops on Ctrl-C. Prefect 3.8.8's own handler leaves
    ``Runner.astop`` unawaited and raises SystemExit wherever the loop happens to be, which can
    leave a schedule active."""

    def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
        self._logger.info("SIGTERM received, stopping as on Ctrl-C...")
        signal.raise_signal(signal.SIGINT)
