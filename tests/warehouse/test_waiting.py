"""Runs waiting for a curator, as ``revbench status`` lists them: one record per run beside the
warehouse (the run lets go of the warehouse while it waits), gone once it stops waiting."""

from __future__ import annotations

import os
from pathlib import Path

from revbench.app.commands.operate import print_status
from revbench.app.console import console
from revbench.warehouse.holder import clear_waiting, describe_waiting, read_waiting, write_waiting
from revbench.warehouse.status import WarehouseStatus


def _info(run_id: str, since: str) -> dict[str, object]:
    return {"run_id": run_id, "flow": "release", "what": "a curator's go to publish release v3",
            "url": f"http://127.0.0.1:4200/runs/flow-run/{run_id}", "command": "revbench release --version v3 --approve yes|no",
            "timeout_seconds": 86400, "since": since, "until": "2026-01-02T00:00:00+00:00"}


def test_each_waiting_run_is_listed_with_its_block_until_it_stops_waiting(tmp_path: Path) -> None:
    db = tmp_path / "warehouse.duckdb"
    assert read_waiting(db) == []
    write_waiting(db, _info("b", "2026-01-01T00:00:02+00:00"))
    write_waiting(db, _info("a", "2026-01-01T00:00:01+00:00"))
    listed = read_waiting(db)
    assert [w["run_id"] for w in listed] == ["a", "b"] and all(w["alive"] and w["pid"] == os.getpid() for w in listed)
    block = describe_waiting(listed[0])
    assert block.splitlines() == [
        "release run a waits for a curator's go to publish release v3",
        "  answer in the Prefect UI:",
        "  http://127.0.0.1:4200/runs/flow-run/a",
        "  or decide on the command line: revbench release --version v3 --approve yes|no",
        "  waits until 2026-01-02T00:00:00+00:00 (86400 s), then ends as paused-expired"]
    with console.capture() as out:
        print_status(WarehouseStatus(db, busy=True, waiting=listed))
    assert block in out.get() and "release run b waits for" in out.get()
    clear_waiting(db, "a")
    assert [w["run_id"] for w in read_waiting(db)] == ["b"]
    clear_waiting(db, "b")
    assert not (tmp_path / "warehouse.duckdb.waiting").exists()  # nothing left beside the warehouse
    assert "process is gone" in describe_waiting({**listed[1], "alive": False})


def test_a_run_whose_process_died_while_waiting_is_marked_crashed_and_its_record_removed(tmp_path: Path) -> None:
    import contextlib
    import json
    import subprocess
    import sys

    from revbench.flows.common import alive_waiting_runs
    from revbench.warehouse import Warehouse

    db = tmp_path / "warehouse.duckdb"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with contextlib.closing(Warehouse(db)) as wh:
        for run_id in ("alive", "dead", "busy"):
            wh.runs.start_run(run_id, "release", {}, "test")
        for run_id in ("alive", "dead"):
            wh.runs.set_run_status(run_id, "waiting")
            write_waiting(db, _info(run_id, "2026-01-01T00:00:01+00:00"))
        record = tmp_path / "warehouse.duckdb.waiting" / "dead.json"
        record.write_text(json.dumps({**json.loads(record.read_text()), "pid": int(gone.stdout)}))
        assert wh.runs.mark_crashed_runs(alive_waiting_runs(db)) == 2
        status = dict(wh.runs.latest_runs(5).select("run_id", "status").iter_rows())
    assert status == {"alive": "waiting", "dead": "crashed", "busy": "crashed"}
    assert [w["run_id"] for w in read_waiting(db)] == ["alive"]


def test_a_decision_made_elsewhere_is_noted_for_its_waiting_run_and_status_stops_saying_it_waits(tmp_path: Path) -> None:
    from revbench.warehouse.holder import drop_stray_decisions, read_decision, write_decision

    db = tmp_path / "warehouse.duckdb"
    write_waiting(db, _info("a", "2026-01-01T00:00:01+00:00"))
    write_waiting(db, _info("b", "2026-01-01T00:00:02+00:00"))
    note = {"by": "curator ada", "run_id": "c", "what": "release v3 rejected by curator ada", "run_input": {}}
    assert write_decision(db, "a", note) and not write_decision(db, "gone", note)  # only a run that waits is told
    assert read_decision(db, "a") is not None and read_decision(db, "b") is None
    a, b = read_waiting(db)
    # Who decided is said once ("rejected by curator ada", not "... by curator ada (by curator ada").
    assert describe_waiting(a) == ("release run a no longer waits: release v3 rejected by curator ada "
                                   f"(run c, at {a['decided']['at']}); it finishes with that decision")
    assert "waits for" not in describe_waiting(a) and "waits for" in describe_waiting(b)
    clear_waiting(db, "a")  # the run read its note and stopped waiting: both files go
    assert [w["run_id"] for w in read_waiting(db)] == ["b"] and read_decision(db, "a") is None
    # A note that crossed the end of a wait is swept away, and nothing stays beside the warehouse.
    (tmp_path / "warehouse.duckdb.waiting" / "x.decided").write_text("{}")
    clear_waiting(db, "b")
    drop_stray_decisions(db)
    assert not (tmp_path / "warehouse.duckdb.waiting").exists()


def test_runs_that_began_to_wait_in_the_same_second_are_listed_in_the_order_they_began(tmp_path: Path) -> None:
    db = tmp_path / "warehouse.duckdb"
    same = "2026-01-01T00:00:01+00:00"  # the record's time is to the second
    for i, run_id in enumerate(["z-first", "m-second", "a-third"]):  # names sort the other way
        write_waiting(db, _info(run_id, same))
        path = tmp_path / "warehouse.duckdb.waiting" / f"{run_id}.json"
        os.utime(path, ns=(1_000_000_000 + i, 1_000_000_000 + i))  # written one nanosecond apart
    assert [w["run_id"] for w in read_waiting(db)] == ["z-first", "m-second", "a-third"]
