"""Dead services, interrupts, destructive re-runs, concurrent commands and secrets, through the
command line a user runs: each ends in one line, a non-zero exit where it failed, and a
warehouse that lost nothing."""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.pools import pools_flow
from revbench.replay.server import free_port
from revbench.schemas.tables import ASSIGNMENTS, DOCUMENTS, INVITATIONS, POOL_ROUNDS, REJECTS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.warehouse.holder import read_holder
from tests.support.cli import cli, error_line
from tests.support.common import WORLD_SINCE, WORLD_UNTIL, on_replay
from tests.support.ingest import assert_same, reference_run, snapshot

pytestmark = pytest.mark.slow


def _runs(s: Settings) -> list[str]:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return wh.runs.latest_runs(20)["status"].to_list()[::-1]


CLOSED = {
    "arxiv": ("arxiv", "/arxiv/api/query", "arXiv API"),
    "s2": ("s2", "/s2/graph/v1", "Semantic Scholar"),
    "pdf": ("pdf", "/arxiv", "arXiv PDFs"),
    "grobid": ("grobid", "/grobid", "GROBID"),
}


@pytest.mark.parametrize("service", list(CLOSED))
def test_an_unreachable_service_stops_ingest_at_once_and_rejects_nothing(small_world, replay, settings, service) -> None:
    section, path, name = CLOSED[service]
    url = f"http://127.0.0.1:{free_port()}{path}"
    s = on_replay(settings, replay(world=small_world)).with_overrides(**{section: {"base_url": url}})
    t0 = time.monotonic()
    res = cli(s, "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL), "--no-track")
    assert time.monotonic() - t0 < 30 and res.returncode == 3, res.stderr
    line = error_line(res)
    assert name in line and url.split(path)[0] in line and "unreachable" in line
    assert _runs(s)[-1] == "failed"
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.count(REJECTS) == 0 and wh.count(DOCUMENTS) == 0


def test_a_service_that_dies_mid_run_trips_the_breaker_and_rejects_nothing(small_world, replay, settings) -> None:
    healthy: dict[str, tuple[str, ...]] = {"arxiv": (), "s2": (), "pdf": (), "llm": ()}  # no kind: never faulted
    app = replay(world=small_world, fault_rate=1.0, max_consecutive_faults=1000, fault_kinds={**healthy, "grobid": ("500",)})
    s = on_replay(settings, app).with_overrides(http={"max_attempts": 2})
    res = cli(s, "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL), "--no-track")
    assert res.returncode == 3, res.stderr
    assert "GROBID" in error_line(res) and "5 calls in a row failed" in res.stderr
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        docs = wh.read(DOCUMENTS)
        assert wh.count(REJECTS) == 0
    assert set(docs["status"]) <= {"fetch_failed"}  # pending for the next run, never a reject
    assert app.faults.stats()["served"]["grobid"] <= 2 * (s.http.breaker_failures + 2 * s.grobid.concurrency)


def test_an_unreachable_llm_stops_disambiguation(small_world, replay, settings) -> None:
    s = on_replay(settings, replay(world=small_world))
    ingest_flow.fn(s, WORLD_SINCE, date(2026, 9, 8))
    closed = f"http://127.0.0.1:{free_port()}/llm/v1"
    t0 = time.monotonic()
    res = cli(s.with_overrides(llm={"base_url": closed}), "disambiguate", "--no-track")
    assert time.monotonic() - t0 < 30 and res.returncode == 3
    assert "LLM at " + closed in error_line(res)
    assert _runs(s)[-1] == "failed"


@pytest.mark.parametrize(("sig", "tracked"), [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_an_interrupt_stops_within_seconds_and_the_next_run_resumes(prefect_server, small_world, replay, settings, tmp_path,
                                                                   sig, tracked) -> None:
    ref = reference_run(small_world, replay, settings)
    app = replay(world=small_world, timeout_delay_seconds=0.3)
    s = on_replay(settings, app).with_overrides(data_dir=tmp_path / "interrupted", ingest={"commit_every": 5},
                                                grobid={"concurrency": 2})
    extra = {"PREFECT_API_URL": prefect_server} if tracked else {}
    proc = cli(s, "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL), *([] if tracked else ["--no-track"]),
               extra=extra, wait=False)
    deadline = time.monotonic() + 240
    while app.faults.stats()["served"].get("grobid", 0) < 30:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        _out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # the command prints every thread's stack: where it is stuck
        time.sleep(2)
        proc.kill()
        raise AssertionError("no exit 30 s after the interrupt; stacks:\n" + proc.communicate()[1][-20000:]) from None
    assert time.monotonic() - t0 < 10, "the interrupt took too long"
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert _runs(s)[-1] == "cancelled"
    assert read_holder(s.warehouse_path) is None
    ingest_flow.fn(s, WORLD_SINCE, WORLD_UNTIL, synthetic=True)
    assert_same(snapshot(s), ref)
    assert _runs(s)[-2:] == ["cancelled", "completed"]


def _pools_state(s: Settings) -> tuple[dict[str, pl.DataFrame], dict[str, bytes]]:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        tables = {t.name: wh.read(t) for t in (ASSIGNMENTS, INVITATIONS, POOL_ROUNDS)}
    files = {str(p.relative_to(s.data_dir)): p.read_bytes() for p in (s.data_dir / "pools").rglob("*.csv")}
    return tables, files


def _same_state(a: tuple[dict[str, pl.DataFrame], dict[str, bytes]], b: tuple[dict[str, pl.DataFrame], dict[str, bytes]]) -> bool:
    return a[0].keys() == b[0].keys() and all(a[0][k].equals(b[0][k]) for k in a[0]) and a[1] == b[1]


def test_a_finished_round_is_never_replaced_by_accident(small_world, replay, settings) -> None:
    s = on_replay(settings, replay(world=small_world)).with_overrides(
        pools={"tau": 0.5, "min_recent_papers": 1, "candidates_per_query": 4, "max_queries_per_candidate": 2,
               "queries_per_category": 4})
    ingest_flow.fn(s, date(2026, 9, 1), date(2026, 9, 15))
    disambiguate_flow.fn(s)
    pools_flow.fn(s, round=1)
    before = _pools_state(s)
    for tau, needle in (("2", "--tau=2.0: Input should be less than or equal to 1"), ("-1", "--tau=-1.0: Input should be greater than 0"),
                        ("nan", "--tau=nan: Input should be a finite number"),
                        ("0.55", "round 1 already has")):
        res = cli(s, "pools", "--round", "1", "--tau", tau, "--no-track")
        assert res.returncode == 2, res.stderr
        line = error_line(res)
        assert needle in line, line
        if tau == "0.55":
            assert "tau 0.5 -> 0.55" in line and "--replace" in line
        assert _same_state(_pools_state(s), before)
    res = cli(s, "pools", "--round", "1", "--tau", "0.55", "--replace", "--no-track")
    assert res.returncode == 0, res.stderr
    tables, files = _pools_state(s)
    rounds = tables["pool_rounds"].sort("revision")
    assert rounds.select("revision", "status").rows() == [(1, "superseded"), (2, "current")]
    old = before[0]["assignments"]
    kept = tables["assignments"].filter(pl.col("revision") == 1)
    assert kept.equals(old.filter(pl.col("revision") == 1))
    for name, data in before[1].items():
        assert files[name.replace("round-1/", "round-1/revision-1/")] == data
    again = cli(s, "pools", "--round", "1", "--tau", "0.55", "--no-track")  # the same settings: reproduced, no new version
    assert again.returncode == 0, again.stderr
    assert _pools_state(s)[0]["pool_rounds"].height == 2


def test_status_never_disturbs_a_running_ingest(small_world, replay, settings, tmp_path) -> None:
    ref = reference_run(small_world, replay, settings)
    app = replay(world=small_world, timeout_delay_seconds=0.3)
    s = on_replay(settings, app).with_overrides(data_dir=tmp_path / "polled", ingest={"commit_every": 5},
                                                grobid={"concurrency": 1})
    proc = cli(s, "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL), "--no-track", wait=False)
    while not s.warehouse_path.exists() and proc.poll() is None:
        time.sleep(0.02)
    seen_running = 0
    polls = 0
    while proc.poll() is None:
        st = cli(s, "status")
        polls += 1
        assert st.returncode == 0, st.stdout + st.stderr
        seen_running += "A run is in progress" in st.stdout
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert polls >= 3 and seen_running >= 1
    assert_same(snapshot(s), ref)
    assert _runs(s) == ["completed"]


def test_a_second_writer_is_told_which_run_holds_the_warehouse(small_world, replay, settings, tmp_path) -> None:
    app = replay(world=small_world, timeout_delay_seconds=0.3)
    s = on_replay(settings, app).with_overrides(data_dir=tmp_path / "busy", ingest={"commit_every": 5},
                                                grobid={"concurrency": 1})
    first = cli(s, "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL), "--no-track", wait=False)
    deadline = time.monotonic() + 120
    while app.faults.stats()["served"].get("grobid", 0) < 5:
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    holder = read_holder(s.warehouse_path)
    assert holder is not None and holder["flow"] == "ingest"
    second = cli(s.with_overrides(warehouse={"lock_wait_seconds": 1}), "ingest", "--since", str(WORLD_SINCE),
                 "--until", str(WORLD_UNTIL), "--no-track")
    assert second.returncode == 4
    line = error_line(second)
    assert f"run {holder['run_id']} (ingest" in line and "after waiting 1 s" in line
    _out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert _runs(s) == ["completed"]


def test_api_keys_never_reach_the_replay_server_logs_or_the_warehouse(prefect_server, small_world, replay, settings) -> None:
    app = replay(world=small_world)
    planted = {"llm": "sk-planted-llm-7f3a", "s2": "s2-planted-key-91c2"}
    s = on_replay(settings, app).with_overrides(llm={"api_key": planted["llm"]}, s2={"api_key": planted["s2"]})
    outputs: list[bytes] = []
    for args in (["ingest", "--since", str(WORLD_SINCE), "--until", "2026-09-08"], ["disambiguate"]):
        res = cli(s, *args, "--debug", extra={"PREFECT_API_URL": prefect_server, "REVBENCH_LOG_LEVEL": "DEBUG"})
        assert res.returncode == 0, res.stderr
        outputs += [res.stdout.encode(), res.stderr.encode()]
    seen = " ".join(app.credentials_seen)
    assert app.credentials_seen and not any(k in seen for k in planted.values())
    outputs += [p.read_bytes() for p in s.data_dir.rglob("*") if p.is_file()]
    from prefect.settings import get_current_settings

    db_url = str(get_current_settings().server.database.connection_url.get_secret_value())
    db = Path(db_url.split(":///")[-1])
    assert "sqlite" in db_url and db.exists()  # the Prefect database holds the runs' parameters and logs
    outputs.append(db.read_bytes())
    for key in planted.values():
        assert not any(key.encode() in blob for blob in outputs), key


def test_an_interrupt_a_library_swallowed_is_delivered_again(capsys) -> None:
    """A signal handler's KeyboardInterrupt raised inside a C library's callback cannot propagate;
    Python would print 'Exception ignored' and go on. The hook delivers it again instead."""
    import signal
    import types

    from revbench.app import entry
    from revbench.errors import clear_interrupt, note_interrupt

    previous = signal.signal(signal.SIGINT, entry._terminate)
    try:
        note_interrupt()
        with pytest.raises(KeyboardInterrupt):
            entry._unraisable(types.SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt("signal 15"),
                                                    exc_traceback=None, err_msg=None, object=None))
            for _ in range(200):
                time.sleep(0.01)
        assert "Traceback" not in capsys.readouterr().err
    finally:
        signal.signal(signal.SIGINT, previous)
        clear_interrupt()
