"""Independent pieces of a stage (document extraction chunks, embedding batches, LLM block
decisions, scorers): the same flow code runs them on Prefect's thread runner, on a Dask cluster,
or, in-process, on a few threads.

A piece is a module-level function over picklable arguments (settings, frames, lists), so Dask
can ship it to another process; it builds its own clients from the settings it is given and
touches no warehouse: the flow saves what each piece returns, as it completes.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Any, TypeVar

from revbench.errors import PieceFailed, RevbenchError, ServiceUnavailable, interrupt_noted
from revbench.settings import LimitsSettings, RunnerSettings
from revbench.workers import Started

R = TypeVar("R")

SERVICE_TAGS = {name: f"revbench:{name}" for name in LimitsSettings.model_fields}
"""The tag each service's pieces carry; a Prefect concurrency limit on the tag bounds them
across every worker."""


def prefect_active() -> bool:
    """True inside a Prefect flow or task run."""
    if "prefect" not in sys.modules:
        return False
    from prefect.context import FlowRunContext, TaskRunContext

    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def check_scheduler(address: str, timeout: float) -> None:
    """Raise ServiceUnavailable unless a Dask scheduler accepts connections at ``address``:
    checked before the flow starts, where Dask itself would fail after 30 s with a bare OSError."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 8786), timeout=timeout):
            pass
    except OSError as exc:
        raise ServiceUnavailable("Dask scheduler (REVBENCH_RUNNER__DASK_ADDRESS)", address,
                                 exc.strerror or type(exc).__name__) from None


def task_runner(runner: RunnerSettings, probe_timeout: float = 5.0) -> Any:
    """The Prefect task runner the settings ask for (an external Dask scheduler is checked first)."""
    if runner.kind == "dask":
        from prefect_dask import DaskTaskRunner

        no_worker_profiler()
        if runner.dask_address:
            check_scheduler(runner.dask_address, probe_timeout)
            return DaskTaskRunner(address=runner.dask_address)
        return DaskTaskRunner(cluster_kwargs={
            "n_workers": runner.dask_workers, "threads_per_worker": runner.dask_threads_per_worker,
            "processes": True, "dashboard_address": None})
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=runner.max_workers)


@contextlib.contextmanager
def workers_report_here(runner: RunnerSettings) -> Iterator[None]:
    """Make the flow's Prefect API the one every Dask worker reports to, for the block.

    prefect-dask ships the flow's settings context with each task, and the worker builds its
    client from it. A flow without PREFECT_API_URL talks to its temporary server through no URL
    at all, so the context carries none and each worker (which has no URL either) would start a
    temporary server of its own: its task runs missing from the curator's UI, the server left
    behind. Here the temporary server is started first and its URL put in the context, and the
    context forbids temporary servers, so a worker that still finds no URL fails its piece
    instead of starting one. Credentials (PREFECT_API_AUTH_STRING) travel in the same context,
    pickled over the scheduler's connection (tls:// keeps them private on a network)."""
    if runner.kind != "dask":
        yield
        return
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED, temporary_settings

    updates: dict[Any, Any] = {PREFECT_SERVER_EPHEMERAL_ENABLED: False}
    if not PREFECT_API_URL.value():
        from prefect.server.api.server import SubprocessASGIServer

        # The same server Prefect's client would start on its own (one per process; stopped
        # when the process exits, as it is without Dask).
        server = SubprocessASGIServer()
        server.start()
        updates[PREFECT_API_URL] = server.api_url
    with temporary_settings(updates=updates):
        yield


def no_worker_profiler() -> None:
    """Turn off Dask's statistical profiler for the workers of clusters started here.

    It samples ``sys._current_frames()`` while other threads may be collecting garbage, which
    deadlocks a whole worker on Python 3.11 before 3.11.9 (CPython issue 106883, dask/distributed
    issue 8616): seen here on 3.11.7 a few seconds into extracting 2,000 papers. Workers of a
    local cluster inherit the setting; an external cluster needs it in its own config."""
    import dask

    dask.config.set({"distributed.worker.profile.enabled": False})


def ensure_limits(limits: LimitsSettings, fresh: bool = False) -> dict[str, int]:
    """Create (or update) the tag concurrency limits on the Prefect server; a limit of 0 removes
    ours. Returns the limits in force.

    ``fresh`` recreates them with every slot free: the caller knows that a run was killed while
    holding slots. Prefect frees a dead holder's slots only when its lease expires, which a
    temporary or test server (no repossessor service) never notices, and its reset endpoint
    revokes the leases without freeing the slots; without this the next run would wait forever."""
    from prefect.client.orchestration import get_client

    wanted = {SERVICE_TAGS[name]: int(getattr(limits, name)) for name in LimitsSettings.model_fields}
    with get_client(sync_client=True) as client:
        for tag, limit in wanted.items():
            if fresh or not limit:
                try:
                    client.delete_concurrency_limit_by_tag(tag)
                except Exception:  # absent already: nothing to free or remove
                    pass
            if limit:
                client.create_concurrency_limit(tag=tag, concurrency_limit=limit)
    return {t: n for t, n in wanted.items() if n}


@cache
def _piece_task(fn: Callable[..., Any], name: str, service: str | None) -> Any:
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    tags = [SERVICE_TAGS[service]] if service else []
    # Pieces are never cached by Prefect: the warehouse records what is done.
    return task(_unless_interrupted(_naming_the_worker(fn, name)), name=name, tags=tags, cache_policy=NO_CACHE,
                persist_result=False)


def dask_worker() -> str | None:
    """``Dask worker NAME (ADDRESS)`` when called on a Dask worker, else None."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        w = get_worker()
    except ValueError:
        return None
    return f"Dask worker {w.name} ({w.address})"


def _naming_the_worker(fn: Callable[..., R], name: str) -> Callable[..., R]:
    """``fn``, whose failure on a Dask worker names the worker and the piece: what one worker
    lacks (a model, a module, a path that exists only on the flow's host, a service it cannot
    reach) is then one line that says where to look. On threads it fails as it always did."""

    @functools.wraps(fn)
    def piece(*args: Any, **kwargs: Any) -> R:
        try:
            return fn(*args, **kwargs)
        except ServiceUnavailable as exc:
            where = dask_worker()
            if where is None:
                raise
            raise ServiceUnavailable(exc.service, exc.url, f"{exc.detail}; seen by piece {name} on {where}") from None
        except RevbenchError:
            raise
        except Exception as exc:
            where = dask_worker()
            if where is None:
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise PieceFailed(f"piece {name} failed on {where}: {type(exc).__name__}: {first}") from None

    return piece


def _unless_interrupted(fn: Callable[..., R]) -> Callable[..., R]:
    """``fn``, refusing to start once Ctrl-C or SIGTERM arrived. On an interrupt Prefect's
    thread runner cancels the pieces not started yet but waits for the threads already inside a
    task, some of them waiting for a service's concurrency slot; without this each would then
    run a whole piece (GROBID calls, an LLM block) for a run that is stopping."""

    @functools.wraps(fn)
    def piece(*args: Any, **kwargs: Any) -> R:
        if interrupt_noted():
            raise KeyboardInterrupt("interrupted before this piece started")
        return fn(*args, **kwargs)

    return piece


def map_pieces(fn: Callable[..., R], pieces: Sequence[tuple[Any, ...]], name: str, service: str | None = None,
               local_workers: int = 1, in_flight: int = 0) -> Iterator[R]:
    """``fn(*piece)`` for every piece, yielded as each completes. In a tracked run each piece is
    a Prefect task on the flow's task runner (threads or Dask) tagged with its service; in-process
    they run on ``local_workers`` threads. In a tracked run a piece that raises is raised again
    after every other piece has finished and been yielded, so their work can be saved.

    ``in_flight`` (0: all at once) submits at most that many pieces at a time, the next as one
    completes: give it the service's concurrency limit. Pieces submitted beyond the limit would
    only wait for a slot, and Prefect hands a freed slot to a waiting task at its next poll, a
    second or so later, which at 28 pieces of a day-later graph stage was 23 s of 53 s idle. The
    tag's limit still bounds pieces across workers and other runs."""
    with pieces_started(fn, pieces, name, service, local_workers, in_flight) as results:
        yield from results


@contextlib.contextmanager
def pieces_started(fn: Callable[..., R], pieces: Sequence[tuple[Any, ...]], name: str, service: str | None = None,
                   local_workers: int = 1, in_flight: int = 0) -> Iterator[Iterator[R]]:
    """:func:`map_pieces`, the pieces started on entering the block rather than at the first result
    read: the caller's own work (saving what it has) runs while they wait on their service. The
    block gives their results as they complete; leaving it drops the pieces not started."""
    if not pieces:
        yield iter(())
        return
    if not prefect_active():
        started = Started(lambda p: fn(*p), list(pieces), local_workers)
        try:
            yield iter(started)
        finally:
            started.stop()
        return
    t = _piece_task(fn, name, service)
    waiting = list(pieces)
    running: list[Any] = []

    def submit(n: int) -> None:
        for _ in range(min(n, len(waiting))):
            running.append(t.submit(*waiting.pop(0)))

    submit(in_flight if in_flight > 0 else len(waiting))
    try:
        yield _completed(running, submit)
    finally:
        waiting.clear()
        _cancel(running)


def _completed(running: list[Any], submit: Callable[[int], None]) -> Iterator[Any]:
    """The submitted pieces' results as they complete, the next submitted as each does; a failed
    piece raised after the others (an interrupt at once)."""
    from prefect.futures import as_completed

    failure: BaseException | None = None
    while running:
        fut = next(as_completed(running))
        running.remove(fut)
        submit(1)
        try:
            result = fut.result()
        except BaseException as exc:  # noqa: BLE001 - raised below, after the finished pieces
            if isinstance(exc, KeyboardInterrupt) or interrupt_noted():
                raise
            failure = failure or exc
            continue
        yield result
        if interrupt_noted():
            raise KeyboardInterrupt("interrupted between pieces")
    if failure is not None:
        raise failure


def _cancel(futures: list[Any]) -> None:
    """Ctrl-C or SIGTERM (or a consumer that stopped early): drop the pieces not started. Each
    would otherwise still go through the API and a concurrency slot just to refuse (seconds apiece
    on a slow server, slots handed out one wait at a time) before the run can stop."""
    for fut in futures:
        with contextlib.suppress(Exception):
            fut.wrapped_future.cancel()


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in consecutive chunks of at most ``size``."""
    return [items[i:i + size] for i in range(0, len(items), max(size, 1))]
