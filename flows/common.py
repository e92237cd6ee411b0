"""What every flow shares: run bookkeeping, stage counts, progress and curator artifacts."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.context import FlowRunContext, TaskRunContext
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

import revbench
from revbench.settings import Settings
from warehouse import Warehouse

log = logging.getLogger("revbench.flows")


@dataclass
class StageResult:
    """Counts in and out of one stage, as recorded in ``run_stages`` and shown to curators."""

    stage: str
    rows_in: int = 0
    rows_out: int = 0
    rejected: int = 0
    seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


def code_version() -> str:
    """Package version plus the git commit when running from a checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return f"{revbench.__version__}+{sha}" if sha else revbench.__version__


def current_run_id() -> str:
    """The Prefect flow run id, or a fresh uuid outside the engine."""
    ctx = FlowRunContext.get()
    if ctx and ctx.flow_run:
        return str(ctx.flow_run.id)
    return str(uuid.uuid4())


def in_prefect() -> bool:
    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


@contextmanager
def recorded_run(settings: Settings, flow: str, parameters: dict[str, Any]) -> Iterator[str]:
    """Record a run in ``runs``: crashed leftovers are marked, the outcome is written at exit."""
    run_id = current_run_id()
    with Warehouse.open(settings.warehouse_path) as wh:
        crashed = wh.mark_crashed_runs()
        if crashed:
            log.warning("%d earlier run(s) never finished; marked crashed", crashed)
        wh.start_run(run_id, flow, parameters, code_version())
    try:
        yield run_id
    except BaseException as exc:
        with Warehouse.open(settings.warehouse_path) as wh:
            wh.finish_run(run_id, "failed", f"{type(exc).__name__}: {exc}"[:2000])
        raise
    else:
        with Warehouse.open(settings.warehouse_path) as wh:
            wh.finish_run(run_id, "completed")


def record_stage(settings: Settings, run_id: str, result: StageResult) -> None:
    with Warehouse.open(settings.warehouse_path) as wh:
        wh.record_stage(run_id, result.stage, result.rows_in, result.rows_out, result.rejected, result.seconds)


class StageProgress:
    """Progress of a long step: a Prefect progress artifact (throttled) and a rich bar on a TTY."""

    def __init__(self, key: str, description: str, total: int, min_interval: float = 2.0):
        self.total = max(total, 0)
        self.done = 0
        self.min_interval = min_interval
        self._last = 0.0
        self._artifact = None
        if in_prefect() and total:
            self._artifact = create_progress_artifact(0.0, key=key, description=description)
        self._rich: Progress | None = None
        if sys.stderr.isatty() and total:
            self._rich = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                transient=True,
            )
            self._rich.start()
            self._task = self._rich.add_task(description, total=total)

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._rich:
            self._rich.update(self._task, completed=self.done)
        now = time.monotonic()
        if self._artifact and (now - self._last >= self.min_interval or self.done >= self.total):
            self._last = now
            update_progress_artifact(self._artifact, progress=100.0 * self.done / max(self.total, 1))

    def close(self) -> None:
        if self._artifact:
            update_progress_artifact(self._artifact, progress=100.0)
        if self._rich:
            self._rich.stop()


def publish_table(key: str, rows: list[dict[str, Any]], description: str) -> None:
    """A table artifact when running under Prefect (a no-op when called outside a run)."""
    if in_prefect() and rows:
        create_table_artifact(rows, key=key, description=description)


def publish_markdown(key: str, markdown: str, description: str) -> None:
    if in_prefect():
        create_markdown_artifact(markdown, key=key, description=description)


def stage_rows(results: list[StageResult]) -> list[dict[str, Any]]:
    return [
        {k: (round(v, 2) if isinstance(v, float) else v) for k, v in asdict(r).items() if k != "notes"}
        for r in results
    ]
