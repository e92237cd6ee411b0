"""Where a benchmarked run's time goes: named functions of the code under test timed while a block
runs, each call of one added to its step's seconds. The functions still run as they are (each is
wrapped, and put back after the block, however it ends); a step that calls another is not
subtracted from it, so steps are chosen not to nest.

Used by the benchmark's own process only (``bulk_bench --child``): the code under test knows
nothing of it."""

from __future__ import annotations

import contextlib
import functools
import importlib
import time
from collections.abc import Callable, Iterator
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
