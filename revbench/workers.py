"""Bounded concurrency for I/O-bound calls that a user can interrupt at once.

``concurrent.futures.ThreadPoolExecutor`` joins its worker threads when the interpreter exits,
so after Ctrl-C a command would wait for every in-flight request to finish or time out (up to
the GROBID timeout of minutes). Here the workers are daemon threads that stop taking new items
as soon as the consumer stops (an exception, an interrupt, or simply not reading further);
a call already in flight finishes in the background and its result is dropped.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Started(Generic[R]):
    """``fn`` over ``items`` on ``workers`` threads, started when made: iterate (once) for the
    results as they complete, an exception raised by ``fn`` raised there, in the consumer;
    :meth:`stop` (called when the iteration ends, however it ends) lets the workers take no more."""

    def __init__(self, fn: Callable[[T], R], items: Iterable[T], workers: int):
        todo: queue.Queue[T] = queue.Queue()
        self._n = 0
        for item in items:
            todo.put(item)
            self._n += 1
        self._done: queue.Queue[tuple[bool, object]] = queue.Queue()
        self._stop = threading.Event()

        def work() -> None:
            while not self._stop.is_set():
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    self._done.put((True, fn(item)))
                except BaseException as exc:  # handed to the consumer, which decides
                    self._done.put((False, exc))

        for i in range(max(1, min(workers, self._n))):
            threading.Thread(target=work, name=f"revbench-worker-{i}", daemon=True).start()

    def __iter__(self) -> Iterator[R]:
        try:
            for _ in range(self._n):
                ok, value = self._done.get()
                if not ok:
                    raise value  # type: ignore[misc]
                yield value  # type: ignore[misc]
        finally:
            self.stop()

    def stop(self) -> None:
        """Let the workers take no more items (a call in flight finishes, its result dropped)."""
        self._stop.set()


def map_unordered(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """``fn`` over ``items`` on ``workers`` threads, started at the first result asked, yielding
    results as they complete; an exception raised by ``fn`` is raised here, in the consumer."""
    yield from Started(fn, items, workers)


def stop_group(proc: subprocess.Popen[bytes], grace: float = 20) -> None:
    """SIGTERM to the process group ``proc`` leads (a server started in its own session, with the
    workers it spawned), SIGKILL after ``grace`` seconds."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
