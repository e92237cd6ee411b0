"""What every flow shares: the run record, one warehouse session per run, the shape of a stage
(timer, progress, result), curator artifacts, and running the same code with or without the
Prefect engine. Waiting for a curator's decision is ``revbench.flows.curator``.

A flow runs *tracked* (a Prefect flow run with task runs and artifacts, visible in the UI) or
*in-process* (the same function called directly: no server, no engine). Prefect is imported only
by tracked runs, because importing it costs about 1.5 s, more than a one-off evaluation.
Either way the run is a row in the warehouse ``runs`` table.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import subprocess
import sys
import time
import types
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, ParamSpec, TypeVar

import revbench
from revbench.errors import RevbenchError, clear_interrupt, interrupt_noted
from revbench.flows.pieces import ensure_limits, prefect_active, task_runner, workers_report_here
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.warehouse.holder import clear_holder, clear_waiting, drop_stray_decisions, read_holder, read_waiting, write_holder
from revbench.warehouse.lifecycle import held_here

log = logging.getLogger("revbench.flows")
RUN_LOG_ONLY = {"run_log_only": True}
"""``extra`` of a log line its command prints itself (the flow's result carries it): the line goes
to the run's log in the Prefect UI, not a second time to the terminal (``prepare_process``)."""
P = ParamSpec("P")
R = TypeVar("R")


class StageTask(Generic[P, R]):
    """A step of a flow: a Prefect task inside a tracked run, a plain call otherwise."""

    def __init__(self, fn: Callable[P, R], name: str, retries: int = 0, retry_delay_seconds: float = 0):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name
        self.retries = retries
        self.retry_delay_seconds = retry_delay_seconds

    @cached_property
    def task(self) -> Any:
        """The Prefect task (built on first tracked use)."""
        from prefect import task
        from prefect.cache_policies import NO_CACHE

        # The warehouse is the cache: a stage must always look for new work, so Prefect's
        # result caching stays off.
        return task(self.fn, name=self.name, retries=self.retries, retry_delay_seconds=self.retry_delay_seconds,
                    cache_policy=NO_CACHE)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.task(*args, **kwargs) if prefect_active() else self.fn(*args, **kwargs)


def stage_task(name: str, retries: int = 0, retry_delay_seconds: float = 0) -> Callable[[Callable[P, R]], StageTask[P, R]]:
    """Declare a flow step (see ``StageTask``)."""
    return lambda fn: StageTask(fn, name, retries, retry_delay_seconds)


class RevbenchFlow(Generic[P, R]):
    """A flow: called, it runs tracked like a Prefect flow; ``fn`` runs the same code in-process;
    ``flow`` is the Prefect flow itself (for ``serve`` and deployments)."""

    def __init__(self, fn: Callable[P, R], name: str):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name

    @cached_property
    def flow(self) -> Any:
        from prefect import flow
        from prefect.utilities.hashing import file_hash

        quiet_expected_errors()
        # Prefect versions a flow by its function's file: the flow's own, not the wrapper's.
        source = inspect.getsourcefile(self.fn)
        return flow(_with_final_state(self.fn), name=self.name, log_prints=True,
                    version=file_hash(source) if source else None)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        settings = kwargs.get("settings", args[0] if args else None)
        if isinstance(settings, Settings):
            with workers_report_here(settings.runner):
                return self.flow.with_options(
                    task_runner=task_runner(settings.runner, settings.http.probe_timeout_seconds))(*args, **kwargs)
        return self.flow(*args, **kwargs)

    def run(self, *args: P.args, track: bool = True, **kwargs: P.kwargs) -> R:
        """Tracked through Prefect (on the task runner the settings name), or in this process
        without the engine."""
        return self(*args, **kwargs) if track else self.fn(*args, **kwargs)


class _ExpectedErrors(logging.Filter):
    """Drops the traceback Prefect attaches to a failure we raised on purpose: its message says
    everything (the state message in the UI keeps it too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], RevbenchError | KeyboardInterrupt):
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_expected_errors() -> None:
    """Install the filter on Prefect's run loggers (once)."""
    for name in ("prefect.flow_runs", "prefect.task_runs", "prefect.flow_engine", "prefect.task_engine"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _ExpectedErrors) for f in logger.filters):
            logger.addFilter(_ExpectedErrors())


_FINAL_STATES: dict[str, tuple[str, str]] = {}
"""Flow run id -> (state name, message) of a tracked run whose outcome names its final state (``mark_outcome``)."""


def end_in_state(run_id: str, state: str, message: str) -> None:
    """Make the tracked run ``run_id`` end in a Completed state named ``state`` (see ``_with_final_state``)."""
    _FINAL_STATES[run_id] = (state, message)


def _with_final_state(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` as a tracked run calls it: when the run noted an outcome with a state name (a
    rejected release), it ends in a Completed state of that name, not a plain green Completed;
    the caller still gets ``fn``'s result."""
    noted, run_id = _FINAL_STATES, current_run_id

    def tracked(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        finally:
            named = noted.pop(run_id(), None)
        if named is None:
            return result
        from prefect.states import Completed

        return Completed(data=result, name=named[0], message=named[1])

    # Prefect resolves the parameters' annotations (strings: postponed evaluation) in the
    # function's globals, so the wrapper gets the flow module's; its body reads closures only.
    wrapper = types.FunctionType(tracked.__code__, fn.__globals__, fn.__name__, None, tracked.__closure__)
    return functools.wraps(fn)(wrapper)


def revbench_flow(name: str) -> Callable[[Callable[P, R]], RevbenchFlow[P, R]]:
    """Declare a flow (see ``RevbenchFlow``)."""
    return lambda fn: RevbenchFlow(fn, name)


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
    if not (root / ".git").exists():
        return revbench.__version__
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return f"{revbench.__version__}+{sha}" if sha else revbench.__version__


def current_run_id() -> str:
    """The Prefect flow run id in a tracked run, a fresh uuid otherwise."""
    if "prefect" in sys.modules:
        from prefect.context import FlowRunContext

        ctx = FlowRunContext.get()
        if ctx and ctx.flow_run:
            return str(ctx.flow_run.id)
    return str(uuid.uuid4())


@dataclass
class Run:
    """One flow run: its settings, its id, and the warehouse session it holds from start to end."""

    settings: Settings
    flow: str
    run_id: str
    wh: Warehouse
    stages: list[StageResult] = field(default_factory=list)
    started_at: str = ""
    current: str | None = None

    def announce(self, stage: str | None = None, progress: tuple[int, int] | None = None) -> None:
        """Tell readers of the holder file (``revbench status``, a second writer) where the run is."""
        self.current = stage
        write_holder(self.wh.path, {
            "run_id": self.run_id, "flow": self.flow, "started_at": self.started_at, "stage": stage,
            "progress": {"done": progress[0], "total": progress[1]} if progress else None,
            "stages": _rows_without_notes(self.stages),
        })

    @contextmanager
    def released(self, wait_seconds: float) -> Iterator[None]:
        """Let go of the warehouse while the run waits for a person (other flows may write
        meanwhile), then take it back, waiting up to ``wait_seconds`` for whoever holds it."""
        path = self.wh.path
        clear_holder(path, self.run_id)
        self.wh.close()
        try:
            yield
        finally:
            self.wh = open_warehouse(self.settings, max(wait_seconds, self.settings.warehouse.lock_wait_seconds))
            self.announce(self.current)

    def require(self, *services: str) -> None:
        """Probe each service before work that needs it; stop the run, as failed, on the first
        that does not answer (see ``revbench.clients.probe``). A service that turns out to be the
        local replay server gets no API key from this run: a real key is for the real service."""
        from revbench.clients.probe import probe

        for service in services:
            if probe(self.settings, service).replay and service in ("llm", "s2"):
                section = getattr(self.settings, service)
                if section.api_key is not None:
                    log.warning("%s is the local replay server: the configured API key is not sent", service)
                    self.settings = self.settings.with_overrides(**{service: {"api_key": None}})


class PauseExpired(RevbenchError):
    """A tracked run waited for a curator until its timeout; it ends as ``paused-expired``, its
    committed work kept (what waited for the decision stays pending for the next run)."""


def alive_waiting_runs(db: Path) -> frozenset[str]:
    """The runs waiting for a curator whose process still lives; the files of the others are
    removed (their runs are marked crashed with the other leftovers)."""
    alive = set()
    for info in read_waiting(db):
        if info["alive"]:
            alive.add(str(info.get("run_id")))
        else:
            clear_waiting(db, str(info.get("run_id")))
    drop_stray_decisions(db)
    return frozenset(alive)


def open_warehouse(settings: Settings, lock_wait: float | None = None) -> Warehouse:
    """The warehouse for writing, with the settings' memory and thread limits; waits
    ``lock_wait`` (default: the setting) for another process to let go of it."""
    w = settings.warehouse
    return Warehouse(settings.warehouse_path, lock_wait=w.lock_wait_seconds if lock_wait is None else lock_wait,
                     memory_limit=w.memory_limit, threads=w.threads)


@contextmanager
def flow_run(settings: Settings, flow: str, parameters: dict[str, Any]) -> Iterator[Run]:
    """Open the warehouse once for the run (waiting a bounded time for another process to let
    go of it) and record the run in ``runs``: leftovers of crashed runs are marked, the outcome
    (completed, failed, or cancelled on Ctrl-C or SIGTERM) is written at exit.

    A run started while this process holds the warehouse (the evaluation that ends a ratings or
    release run) shares the holder's database: the warehouse is never let go between the two, so
    no other command can slip in and fail the rest of the run; the holder's run is alive, so
    nothing is marked crashed, and the holder file names the holder again when the inner run ends."""
    run_id = current_run_id()
    clear_interrupt()
    nested = held_here(settings.warehouse_path)
    outer = read_holder(settings.warehouse_path) if nested else None
    with contextlib.closing(open_warehouse(settings)) as wh:
        crashed = 0 if nested else wh.runs.mark_crashed_runs(alive_waiting_runs(wh.path))
        if crashed:
            log.warning("%d earlier run(s) never finished; marked crashed", crashed)
        wh.runs.start_run(run_id, flow, parameters, code_version())
        if prefect_active():
            # We hold the warehouse, so no other run on it is alive: slots a crashed one held
            # are free to take back.
            ensure_limits(settings.limits, fresh=bool(crashed))
        run = Run(settings, flow, run_id, wh, started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        run.announce()
        log.debug("%s run %s started (warehouse %s)", flow, run_id, wh.path)
        try:
            yield run
        except KeyboardInterrupt:
            run.wh.runs.finish_run(run_id, "cancelled", "interrupted (Ctrl-C or SIGTERM); committed work is kept")
            raise
        except PauseExpired as exc:
            run.wh.runs.finish_run(run_id, "paused-expired", str(exc))
            raise
        except BaseException as exc:
            if interrupt_noted():  # the interrupt, wrapped by a library on its way out
                run.wh.runs.finish_run(run_id, "cancelled", "interrupted (Ctrl-C or SIGTERM); committed work is kept")
                raise KeyboardInterrupt(f"interrupted ({type(exc).__name__})") from exc
            run.wh.runs.finish_run(run_id, "failed", f"{type(exc).__name__}: {exc}"[:2000])
            raise
        else:
            run.wh.runs.finish_run(run_id, "completed")
        finally:
            if outer is not None and held_here(wh.path, besides=wh):
                # Replaced, never removed: `revbench status` sees the warehouse held throughout.
                write_holder(wh.path, {k: v for k, v in outer.items() if k not in ("alive", "pid", "host", "updated_at")})
            else:
                clear_holder(wh.path, run_id)
            if run.wh is not wh:
                run.wh.close()


class Stage:
    """What a stage works with: the run's settings and warehouse session, its result, progress."""

    def __init__(self, run: Run, name: str):
        self.run = run
        self.wh = run.wh
        self.result = StageResult(name)

    @property
    def settings(self) -> Settings:
        """The run's settings (as ``Run.require`` may have narrowed them)."""
        return self.run.settings

    def progress(self, total: int, description: str) -> StageProgress:
        """A progress bar for ``total`` items (Prefect artifact, terminal, holder file)."""
        return StageProgress(f"{self.result.stage}-progress", description, total,
                             on_update=lambda done: self.run.announce(self.result.stage, (done, total)))


@contextmanager
def stage(run: Run, name: str) -> Iterator[Stage]:
    """Time a stage and record its counts in ``run_stages`` when it ends."""
    st = Stage(run, name)
    previous = run.current
    run.announce(name)
    t0 = time.monotonic()
    yield st
    st.result.seconds = time.monotonic() - t0
    r = st.result
    run.wh.runs.record_stage(run.run_id, r.stage, r.rows_in, r.rows_out, r.rejected, r.seconds)
    run.stages.append(r)
    run.announce(previous)


class StageProgress:
    """Progress of a long step: a Prefect progress artifact (throttled) and a rich bar on a TTY."""

    def __init__(self, key: str, description: str, total: int, min_interval: float = 2.0,
                 on_update: Callable[[int], None] | None = None):
        self.on_update = on_update
        self.total = max(total, 0)
        self.done = 0
        self.min_interval = min_interval
        self._last = 0.0
        self._artifact = None
        if prefect_active() and total:
            from prefect.artifacts import create_progress_artifact

            self._artifact = create_progress_artifact(0.0, key=key, description=description)
        self._rich: Any = None
        if sys.stderr.isatty() and total:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

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
        if now - self._last >= self.min_interval or self.done >= self.total:
            self._last = now
            if self.on_update:
                self.on_update(self.done)
            if self._artifact:
                from prefect.artifacts import update_progress_artifact

                update_progress_artifact(self._artifact, progress=100.0 * self.done / max(self.total, 1))

    def close(self) -> None:
        if self._artifact:
            from prefect.artifacts import update_progress_artifact

            update_progress_artifact(self._artifact, progress=100.0)
        if self._rich:
            self._rich.stop()

    def __enter__(self) -> StageProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


ARTIFACT_MAX_BYTES = 1_000_000
"""A table artifact's rows are kept under this size: Prefect's server refuses an event over
1.5 MB (``Refusing to publish event``), and the curator would see no table at all."""


def bounded_rows(rows: list[dict[str, Any]], description: str,
                 max_bytes: int = ARTIFACT_MAX_BYTES) -> tuple[list[dict[str, Any]], str]:
    """The first rows of ``rows`` whose JSON fits ``max_bytes``, and the description saying how many
    of how many are shown when some are left out (the whole list stays in the warehouse)."""
    import json

    sizes = [len(json.dumps(r, default=str)) + 2 for r in rows]
    if sum(sizes) <= max_bytes:
        return rows, description
    kept, total = 0, 0
    while kept < len(rows) and total + sizes[kept] <= max_bytes:
        total += sizes[kept]
        kept += 1
    return rows[:kept], (f"{description} (the first {kept:,} of {len(rows):,} rows: a table artifact must stay "
                         "small; every row is in the warehouse)")


def publish_table(key: str, rows: list[dict[str, Any]], description: str) -> None:
    """A table artifact in a tracked run (nothing in-process), cut to the rows that fit an artifact."""
    if prefect_active() and rows:
        from prefect.artifacts import create_table_artifact

        shown, description = bounded_rows(rows, description)
        create_table_artifact(shown, key=key, description=description)


def publish_markdown(key: str, markdown: str, description: str) -> None:
    """A markdown artifact in a tracked run (nothing in-process), its tables narrowed to fit the
    Prefect UI's page (:func:`~revbench.flows.artifact_markdown.narrow_tables`)."""
    if prefect_active():
        from prefect.artifacts import create_markdown_artifact

        from revbench.flows.artifact_markdown import narrow_tables

        create_markdown_artifact(narrow_tables(markdown), key=key, description=description)


def _rows_without_notes(results: list[StageResult]) -> list[dict[str, Any]]:
    """Stage results' fields less their notes, which are not copied: ``asdict`` would copy them
    first, and a graph stage's notes name every paper it answered (160k at LR-bench's size)."""
    return [{f.name: getattr(r, f.name) for f in fields(r) if f.name != "notes"} for r in results]


def stage_rows(results: list[StageResult]) -> list[dict[str, Any]]:
    """Stage results as table rows (notes left out)."""
    return [
        {k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}
        for row in _rows_without_notes(results)
    ]
