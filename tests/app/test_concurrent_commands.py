"""Two writing commands at once, as two people at two terminals run them: the second waits for
the warehouse (REVBENCH_WAREHOUSE__LOCK_WAIT_SECONDS) and then runs, after the first has finished
everything it does, or fails in one line naming the run that holds it; the first is never failed
by the second, and the warehouse ends with both results. A run is recorded completed only once
all it does, its closing evaluation included, is done."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import datetime

import pytest

from revbench.errors import ServiceUnavailable
from revbench.flows.ratings import ratings_flow
from revbench.replay.server import free_port
from revbench.schemas.tables import AUTHOR_LINKS, EVAL_RESULTS, PAPERS, POOL_ROUNDS, RATINGS, RUNS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.warehouse.holder import read_holder
from tests.support.cli import cli, error_line
from tests.support.common import WORLD_SINCE, WORLD_UNTIL, on_replay

pytestmark = pytest.mark.slow


def _runs(s: Settings) -> list[dict[str, object]]:
    """Every run in the warehouse, oldest first."""
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return wh.read(RUNS).sort("started_at").to_dicts()


def _hold_on(s: Settings, flow: str, proc: subprocess.Popen[str], timeout: float = 180) -> str:
    """Once ``proc``'s ``flow`` run holds the warehouse: its run id."""
    deadline = time.monotonic() + timeout
    while (holder := read_holder(s.warehouse_path) or {}).get("flow") != flow:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no {flow} run took the warehouse"
        time.sleep(0.02)
    return str(holder["run_id"])


class HolderWatch(threading.Thread):
    """What `revbench status` would say holds the warehouse, looked at every few milliseconds:
    the flows of the holder file in order (None while no run holds it), repeats collapsed."""

    def __init__(self, s: Settings):
        super().__init__(daemon=True)
        self.path, self.seen, self.stop = s.warehouse_path, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            flow = (read_holder(self.path) or {}).get("flow")
            if not self.seen or self.seen[-1] != flow:
                self.seen.append(flow)
            time.sleep(0.005)

    def until_free(self) -> list[str | None]:
        """The holders seen until the warehouse was first free."""
        self.stop.set()
        self.join()
        return self.seen[:self.seen.index(None)] if None in self.seen else self.seen


def _started(row: dict[str, object]) -> datetime:
    value = row["started_at"]
    assert isinstance(value, datetime)
    return value


def _after(first_runs: list[dict[str, object]], second: dict[str, object]) -> None:
    """The second command's run started only once every run of the first had finished."""
    ends = [r["finished_at"] for r in first_runs]
    assert all(isinstance(e, datetime) for e in ends), first_runs
    assert _started(second) >= max(ends), (first_runs, second)  # type: ignore[type-var]


def test_disambiguate_waits_for_a_tracked_ratings_run_and_its_evaluation(prefect_server, answered) -> None:
    """The ratings run lets go of the warehouse nowhere between its ratings and its evaluation:
    a disambiguate started meanwhile runs after both, and neither fails."""
    s, _ = answered
    s = s.with_overrides(ratings={"evaluate_after": True, "evaluate_scorers": ["trivial"], "bootstrap": 20})
    first = cli(s, "ratings", "--decide", "keep", "--track", extra={"PREFECT_API_URL": prefect_server}, wait=False)
    ratings_run = _hold_on(s, "ratings", first)
    watch = HolderWatch(s)
    watch.start()
    # Waits as long as the ratings and their evaluation may take on a loaded machine.
    second = cli(s.with_overrides(warehouse={"lock_wait_seconds": 300}), "disambiguate", "--fallback", "--no-track")
    _out, err = first.communicate(timeout=300)
    # Held from the ratings to the end of their evaluation, never free in between.
    assert set(watch.until_free()) == {"ratings", "evaluate"}, watch.seen
    assert first.returncode == 0, err
    assert second.returncode == 0, second.stderr
    runs = _runs(s)
    by_flow = {f: [r for r in runs if r["flow"] == f] for f in ("ratings", "evaluate", "disambiguate")}
    assert [(r["run_id"], r["status"]) for r in by_flow["ratings"]] == [(ratings_run, "completed")], runs
    assert [r["status"] for r in by_flow["evaluate"]] == ["completed"], runs
    assert by_flow["disambiguate"][-1]["status"] == "completed", runs
    _after(by_flow["ratings"] + by_flow["evaluate"], by_flow["disambiguate"][-1])
    assert not any(r["status"] in ("crashed", "failed") for r in runs), runs
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.count(RATINGS) > 0
        evaluated = wh.read(EVAL_RESULTS)
    assert evaluated.height and set(evaluated["run_id"]) == {by_flow["evaluate"][0]["run_id"]}


def _second_after(s: Settings, first: subprocess.Popen[str], first_run: str, second: list[str],
                  wait: float) -> bool:
    """Run ``revbench SECOND`` (waiting ``wait`` s for the warehouse) while ``first`` holds it, then
    check both outcomes: the first completed; the second ran after it, or gave up in one line
    naming the first's run, and then, run again, ran. Returns whether the second gave up."""
    t0 = time.monotonic()
    res = cli(s.with_overrides(warehouse={"lock_wait_seconds": wait}), *second, "--no-track")
    waited = time.monotonic() - t0
    _out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    gave_up = res.returncode != 0
    if gave_up:
        assert res.returncode == 4, res.stderr
        line = error_line(res)
        assert f"run {first_run} (" in line and f"after waiting {wait:.0f} s" in line, line
        assert waited >= wait
        assert not [r for r in _runs(s) if r["flow"] == second[0]], "the refused command wrote a run"
        res = cli(s, *second, "--no-track")
        assert res.returncode == 0, res.stderr
    runs = _runs(s)
    first_rows = [r for r in runs if r["run_id"] == first_run]
    assert [r["status"] for r in first_rows] == ["completed"], runs
    assert not any(r["status"] in ("crashed", "failed") for r in runs), runs
    last = [r for r in runs if r["flow"] == second[0]][-1]
    assert last["status"] == "completed", runs
    _after(first_rows, last)
    return gave_up


def test_disambiguate_beside_an_ingest_gives_up_in_one_line_then_runs(small_world, replay, settings, tmp_path) -> None:
    """A second writer with a short wait gives up in one line naming the ingest run and writes
    nothing; the ingest finishes untouched, the same command then runs: both results are there."""
    app = replay(world=small_world, timeout_delay_seconds=0.3)
    # Small arXiv pages a pause apart keep the ingest holding the warehouse for several seconds
    # however fast the machine: the second command must meet it, not a warehouse already free.
    s = on_replay(settings, app).with_overrides(data_dir=tmp_path / "pair", ingest={"commit_every": 5},
                                                arxiv={"page_size": 10, "delay_seconds": 0.25},
                                                grobid={"concurrency": 1}, disambiguate={"use_llm": False})
    first = cli(s, "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL), "--no-track", wait=False)
    ingest_run = _hold_on(s, "ingest", first)
    assert _second_after(s, first, ingest_run, ["disambiguate"], wait=2)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.count(PAPERS) > 0 and wh.count(AUTHOR_LINKS) > 0


def test_ingest_beside_pools_runs_after_them(small_world, replay, survey_settings) -> None:
    """An ingest waiting long enough runs once the pools run is over: both rounds' results stay."""
    app = replay(world=small_world)
    s = on_replay(survey_settings, app).with_overrides(disambiguate={"use_llm": False})
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        papers = wh.count(PAPERS)
    first = cli(s, "pools", "--round", "2", "--no-track", wait=False)
    pools_run = _hold_on(s, "pools", first)
    assert not _second_after(s, first, pools_run, ["ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL)],
                             wait=120)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.count(PAPERS) == papers > 0
        assert {1, 2} <= set(wh.read(POOL_ROUNDS)["round"].to_list())


def test_a_ratings_run_whose_evaluation_failed_is_not_recorded_completed(answered) -> None:
    """The evaluation is part of the ratings run: when it fails (here the LLM it scores with is
    unreachable), the run ends failed with that reason, its ratings kept."""
    s, _ = answered
    closed = f"http://127.0.0.1:{free_port()}/v1"
    s = s.with_overrides(ratings={"evaluate_after": True, "evaluate_scorers": ["llm"], "bootstrap": 20},
                         llm={"base_url": closed})
    with pytest.raises(ServiceUnavailable, match="unreachable"):
        ratings_flow.fn(s, decide="keep")
    runs = {r["flow"]: r for r in _runs(s)}
    assert runs["ratings"]["status"] == "failed", runs
    assert "ServiceUnavailable" in str(runs["ratings"]["error"]) and "127.0.0.1" in str(runs["ratings"]["error"])
    assert runs["evaluate"]["status"] == "failed", runs
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.count(RATINGS) > 0 and wh.count(EVAL_RESULTS) == 0


def test_an_evaluation_of_the_warehouse_benchmark_waits_for_the_warehouse(tmp_path) -> None:
    """`revbench evaluate -b warehouse=...` reads the warehouse before its run starts: that read
    waits for another process to let go too, instead of failing at once."""
    path = tmp_path / "data" / "warehouse.duckdb"
    with Warehouse.open(path):  # a warehouse without ratings yet
        pass
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(3)", str(path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    s = Settings(data_dir=tmp_path / "data").with_overrides(warehouse={"lock_wait_seconds": 60})
    res = cli(s, "evaluate", "-b", f"warehouse={path}", "-s", "trivial", "--no-track")
    holder.wait(timeout=60)
    # It waited for the holder (not exit 4), then read the warehouse: no ratings yet, in one line.
    assert res.returncode == 2, res.stderr
    assert "holds no kept ratings yet" in error_line(res)
