"""The benchmark's step timer (``benchmarks.steps``): the timed functions still run and answer as
before, each call adds to its step, a step never called reads 0, the originals are back after the
block however it ends, and a step naming nothing is refused before anything is wrapped. The bulk
benchmark's steps name functions the graph flow calls by those names, and its report says them."""

from __future__ import annotations

import sys
import time
import types

import pytest

from benchmarks.steps import timed_steps


@pytest.fixture
def mod() -> types.ModuleType:
    m = types.ModuleType("_steps_probe")
    m.slow = lambda x: (time.sleep(0.02), x * 2)[1]  # type: ignore[attr-defined]
    m.never = lambda: None  # type: ignore[attr-defined]
    sys.modules[m.__name__] = m
    yield m
    del sys.modules[m.__name__]


def test_each_call_adds_to_its_step_and_the_originals_come_back(mod: types.ModuleType) -> None:
    slow, never = mod.slow, mod.never
    with timed_steps({"s": ("_steps_probe", "slow"), "n": ("_steps_probe", "never")}) as seconds:
        assert mod.slow(2) == 4 and mod.slow(3) == 6
        assert mod.slow is not slow
    assert 0.04 <= seconds["s"] < 5 and seconds["n"] == 0.0
    assert mod.slow is slow and mod.never is never
    with pytest.raises(RuntimeError), timed_steps({"s": ("_steps_probe", "slow")}):
        raise RuntimeError("the run failed")
    assert mod.slow is slow


def test_a_step_naming_nothing_is_refused_before_anything_is_wrapped(mod: types.ModuleType) -> None:
    slow = mod.slow
    with pytest.raises(AttributeError, match="no missing"), \
            timed_steps({"s": ("_steps_probe", "slow"), "x": ("_steps_probe", "missing")}):
        pass
    assert mod.slow is slow


def test_the_bulk_benchmarks_steps_are_the_flows_names_and_its_report_says_them() -> None:
    from benchmarks.bulk_bench import STEPS
    from benchmarks.bulk_report import STEP_NAMES, _steps

    with timed_steps(STEPS):  # every one found where the flow looks it up
        pass
    assert set(STEP_NAMES) == set(STEPS)
    line = _steps("the day later", {"seconds": 9.5, "steps_s": dict.fromkeys(STEPS, 1.0)})
    assert line is not None and "S2AG's release brought up to date 1.00" in line and "the rest (3.5 s)" in line
    assert _steps("x", {"seconds": 1.0}) is None and _steps("x", {"seconds": 1.0, "exit_code": -9, "steps_s": {}}) is None


def test_the_day_laters_work_in_rows_is_set_beside_the_first_runs() -> None:
    from benchmarks.bulk_report import _work_share

    first = {"seconds": 50.0, "references_saved": 900, "re_checked": 100, "re_resolved": 0}
    later = {"seconds": 5.0, "references_saved": 30, "re_checked": 20, "re_resolved": 7}
    (line,) = _work_share(first, later)
    assert "30 references saved" in line and "20 older references checked again, 7 of them" in line
    assert "together 5.0% of the first run's 1,000" in line and "10.0% of the first run's" in line
    assert _work_share({"seconds": 1.0}, later) == []  # a run measured before the counts were recorded
