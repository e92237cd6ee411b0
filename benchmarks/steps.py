"""Where a benchmarked run's time goes: named functions of the code under test timed while a block
runs, each call of one added to its step's seconds. The functions still run as they are (each is
wrapped, and put back after the block, however it ends); a step that calls another is not
subtracted from it, so steps are chosen not to nest.

:func:`timed_statements` does the same for SQL: every statement the warehouse and the bulk readers
run, timed and sorted by what it stands on (:data:`STORES`).

Used by the benchmark's own process only (``bulk_bench --child``): the code under test knows
nothing of it."""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@contextlib.contextmanager
def timed_steps(steps: dict[str, tuple[str, str]]) -> Iterator[dict[str, float]]:
    """While the block runs, time each ``step -> (module, function)``; yields ``step -> seconds``
    (a step never called: 0.0). An attribute a module lacks is an error before anything runs."""
    seconds = dict.fromkeys(steps, 0.0)
    found = []
    for step, (module, name) in steps.items():
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            raise AttributeError(f"{module} has no {name} to time (step {step!r})")
        found.append((step, mod, name, getattr(mod, name)))

    def timing(step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                seconds[step] += time.perf_counter() - t
        return timed

    try:
        for step, mod, name, fn in found:
            setattr(mod, name, timing(step, fn))
        yield seconds
    finally:
        for _, mod, name, fn in found:
            setattr(mod, name, fn)


STORES = ("commits", "references table", "other warehouse tables", "S2AG release kept", "OpenAlex snapshot")
"""What a run's SQL stands on, as :func:`timed_statements` sorts it: the warehouse's commits
(DuckDB checkpoints once the log outgrows its threshold, so a commit's time is mostly writing
the tables' changed blocks and indexes), its statements reading or writing ``citations`` (the
references: millions of rows at a year of arXiv), its other statements, and the bulk readers'
statements over the parquet folder kept of S2AG's release and over the OpenAlex snapshot's files."""

_CITATIONS = re.compile(r"\bcitations\b", re.IGNORECASE)


def statement_store(query: str, store: str = "warehouse") -> str:
    """Which of :data:`STORES` a statement stands on: ``store`` is ``warehouse`` for the
    warehouse's connection, else the bulk reader's kind (``s2ag``, ``openalex``)."""
    if store == "s2ag":
        return STORES[3]
    if store == "openalex":
        return STORES[4]
    if store != "warehouse":
        raise ValueError(f"unknown store {store!r} (warehouse, s2ag, openalex)")
    if query.lstrip().upper().startswith("COMMIT"):
        return STORES[0]
    return STORES[1] if _CITATIONS.search(query) else STORES[2]


@dataclass
class Statements:
    """Seconds of SQL per store (:data:`STORES`, summed over the threads that ran them, so they
    may add up to more than the wall time), and per statement (its first words) with its count."""

    by_store: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STORES, 0.0))
    each: dict[str, list[Any]] = field(default_factory=dict)  # head -> [seconds, runs, store]
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, query: str, store: str, seconds: float) -> None:
        head, where = " ".join(query.split())[:_HEAD], statement_store(query, store)
        with self.lock:
            self.by_store[where] += seconds
            got = self.each.setdefault(head, [0.0, 0, where])
            got[0] += seconds
            got[1] += 1

    def top(self, n: int = 8) -> list[dict[str, Any]]:
        """The ``n`` statements that took longest in all, each with its store and count."""
        rows = sorted(self.each.items(), key=lambda kv: -kv[1][0])[:n]
        return [{"seconds": round(s, 3), "runs": c, "store": where, "statement": head} for head, (s, c, where) in rows]


_HEAD = 90

READERS = ("revbench.warehouse.bulk_state", "revbench.warehouse.bulk_diffs", "revbench.warehouse.bulk_answers",
           "revbench.warehouse.bulk_openalex")
"""The bulk readers whose DuckDB connections :func:`timed_statements` times."""


class _TimedRelation:
    """A DuckDB relation whose fetching calls are timed: ``con.sql`` is lazy, the work runs when
    its rows are fetched."""

    def __init__(self, rel: Any, query: str, store: str, into: Statements) -> None:
        self._rel, self._query, self._store, self._into = rel, query, store, into

    def __getattr__(self, name: str) -> Any:
        got = getattr(self._rel, name)
        if not callable(got):
            return got

        def timed(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return got(*args, **kw)
            finally:
                self._into.add(self._query, self._store, time.perf_counter() - t)
        return timed


class _TimedConnection:
    """A bulk reader's DuckDB connection whose ``execute`` and ``sql`` are timed."""

    def __init__(self, con: Any, store: str, into: Statements) -> None:
        self._con, self._store, self._into = con, store, into

    def execute(self, query: str, *args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return self._con.execute(query, *args, **kw)
        finally:
            self._into.add(query, self._store, time.perf_counter() - t)

    def sql(self, query: str, *args: Any, **kw: Any) -> _TimedRelation:
        t = time.perf_counter()
        try:
            return _TimedRelation(self._con.sql(query, *args, **kw), query, self._store, self._into)
        finally:
            self._into.add(query, self._store, time.perf_counter() - t)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


@contextlib.contextmanager
def timed_statements() -> Iterator[Statements]:
    """While the block runs, time every statement the warehouse runs (``WarehouseBase._exec`` and
    ``_frame``) and every one the bulk readers run on their DuckDB connections
    (``revbench.warehouse.bulk``'s ``piece_connection`` and ``_connect`` where the readers bound
    them), sorted by :func:`statement_store`; everything is put back after the block."""
    from revbench.warehouse import bulk
    from revbench.warehouse.core import WarehouseBase

    for reader in READERS:  # imported now, so their bindings are there to replace
        importlib.import_module(reader)
    into = Statements()
    exec_, frame = WarehouseBase._exec, WarehouseBase._frame
    pieces, connect = bulk.piece_connection, bulk._connect

    def timing(method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(self: Any, query: str, params: Any = None) -> Any:
            t = time.perf_counter()
            try:
                return method(self, query, params)
            finally:
                into.add(query, "warehouse", time.perf_counter() - t)
        return timed

    def piece(kind: str, *args: Any, **kw: Any) -> _TimedConnection:
        return _TimedConnection(pieces(kind, *args, **kw), kind, into)

    def connector(kind: str) -> Callable[[], _TimedConnection]:
        return lambda: _TimedConnection(connect(), kind, into)

    # The readers import these by name: each module's binding is replaced (bulk's own _connect is
    # left, so the databases piece_connection keeps are plain ones).
    swapped: list[tuple[Any, str, Any]] = []
    for name, mod in list(sys.modules.items()):
        if not name.startswith("revbench.warehouse.bulk") or mod is None:
            continue
        if getattr(mod, "piece_connection", None) is pieces:
            swapped.append((mod, "piece_connection", piece))
        if mod is not bulk and getattr(mod, "_connect", None) is connect:
            swapped.append((mod, "_connect", connector("openalex" if "openalex" in name else "s2ag")))
    try:
        WarehouseBase._exec, WarehouseBase._frame = timing(exec_), timing(frame)  # type: ignore[method-assign]
        for mod, attr, fn in swapped:
            setattr(mod, attr, fn)
        yield into
    finally:
        WarehouseBase._exec, WarehouseBase._frame = exec_, frame  # type: ignore[method-assign]
        for mod, attr, _ in swapped:
            setattr(mod, attr, pieces if attr == "piece_connection" else connect)
