"""One-off commands run in-process without Prefect; ``--track`` (or a configured API) makes them
Prefect flow runs; either way the run is in the warehouse (but for an untracked evaluation of
prediction files alone, stored only with ``--record``), and settings are passed, not read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from revbench.flows.evaluate import evaluate_flow
from revbench.schemas.tables import EVAL_RESULTS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.support.evaluation import write_openreview

ROOT = Path(__file__).resolve().parents[2]


def _cli(args: list[str], data_dir: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
    env.update({"REVBENCH_DATA_DIR": str(data_dir), **(extra_env or {})})
    return subprocess.run([sys.executable, "-m", "revbench", *args], capture_output=True, text=True, env=env,
                          cwd=data_dir.parent, timeout=300)


def test_evaluate_runs_in_process_and_records_its_run(tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    out = _cli(["evaluate", "-b", f"openreview={data}", "--bootstrap", "50", "--json-out", str(tmp_path / "rows.json")],
               tmp_path / "data")
    assert out.returncode == 0, out.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert {r["scorer"] for r in rows} == {"trivial", "tpms"}
    with Warehouse.open(tmp_path / "data" / "warehouse.duckdb", read_only=True) as wh:
        runs = wh.runs.latest_runs(5).to_dicts()
    assert [(r["flow"], r["status"]) for r in runs] == [("evaluate", "completed")]
    assert not (tmp_path / "data" / "prefect").exists() or not any((tmp_path / "data" / "prefect").iterdir())


def test_in_process_evaluation_never_imports_prefect(tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    code = ("import sys; from revbench.app.cli import app;"
            f"app(['evaluate', '-b', 'openreview={data}', '--bootstrap', '0'], standalone_mode=False);"
            "print('PREFECT_LOADED' if 'prefect' in sys.modules else 'PREFECT_ABSENT')")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**env, "REVBENCH_DATA_DIR": str(tmp_path / "data")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("PREFECT_ABSENT")


def test_only_predictions_runs_only_them_and_a_name_clash_stops_before_work(tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "tpms.json").write_text(json.dumps({"ir": {"s1": 0.9, "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}}))
    clash = _cli(["evaluate", "-b", f"openreview={data}", "-s", "tpms", "-p", f"tpms={tmp_path / 'tpms.json'}"],
                 tmp_path / "data")
    assert clash.returncode == 2
    message = [line for line in clash.stderr.splitlines() if line.strip()]
    assert len(message) == 1 and "--predictions tpms=" in message[0] and "--scorer 'tpms'" in message[0]
    assert not (tmp_path / "data" / "warehouse.duckdb").exists()
    ok = _cli(["evaluate", "-b", f"openreview={data}", "-p", f"tpms={tmp_path / 'tpms.json'}", "--bootstrap", "0",
               "--json-out", str(tmp_path / "rows.json")], tmp_path / "data")
    assert ok.returncode == 0, ok.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert {r["scorer"] for r in rows} == {"tpms"} and {r["spec"] for r in rows} == {"predictions:tpms.json"}


def test_prediction_files_alone_are_stored_only_with_record(tmp_path: Path) -> None:
    from tests.app.test_cold_imports import write_rate_files

    pc, _ = write_rate_files(tmp_path)
    args = ["evaluate", "-p", f"rate_pc={pc}", "--bootstrap", "0", "--no-track", "--json-out", str(tmp_path / "rows.json")]
    wh_path = tmp_path / "data" / "warehouse.duckdb"
    # The lean lane, then the full path (a flag the lane leaves to it): neither opens the warehouse.
    for extra in ([], ["--allow-partial"]):
        out = _cli([*args, *extra], tmp_path / "data")
        assert out.returncode == 0, out.stderr
        assert (tmp_path / "data" / "reports" / "evaluate" / "results.json").is_file() and not wh_path.exists()
    out = _cli([*args, "--record"], tmp_path / "data")
    assert out.returncode == 0, out.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())
    with Warehouse.open(wh_path, read_only=True) as wh:
        runs = wh.runs.latest_runs(5).to_dicts()
        stored = wh.read(EVAL_RESULTS)
    assert [(r["flow"], r["status"], r["run_id"]) for r in runs] == [("evaluate", "completed", rows[0]["run_id"])]
    assert stored.height == len(rows) == 4 and set(stored["run_id"]) == {rows[0]["run_id"]}


@pytest.mark.slow
def test_track_makes_a_prefect_flow_run(prefect_server, tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client

    data = write_openreview(tmp_path / "or")
    out = _cli(["evaluate", "-b", f"openreview={data}", "--bootstrap", "0", "--track"], tmp_path / "data",
               {"PREFECT_API_URL": prefect_server})
    assert out.returncode == 0, out.stderr
    with Warehouse.open(tmp_path / "data" / "warehouse.duckdb", read_only=True) as wh:
        run_id = wh.runs.latest_runs(1)["run_id"][0]
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(run_id)
    assert flow_run.state is not None and flow_run.state.is_completed()


def test_two_configurations_in_one_process(tmp_path: Path) -> None:
    """Settings are objects handed to flows: two data dirs, one process, no environment."""
    data = write_openreview(tmp_path / "or")
    a = Settings(data_dir=tmp_path / "a")
    b = a.with_overrides(data_dir=tmp_path / "b")
    for s in (a, b):
        evaluate_flow.fn(s, benchmarks=[f"openreview={data}"], scorers=["trivial"], bootstrap=0,
                         report_dir=str(s.data_dir / "report"))
    for s in (a, b):
        with Warehouse.open(s.warehouse_path, read_only=True) as wh:
            assert wh.runs.latest_runs(5)["status"].to_list() == ["completed"]
        assert (s.data_dir / "report" / "report.md").exists()


def test_with_overrides_validates_and_leaves_the_original(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path)
    t = s.with_overrides(http={"timeout_seconds": 2}, llm={"api_key": "sk-x"})
    assert t.http.timeout_seconds == 2 and t.http.max_attempts == s.http.max_attempts
    assert s.llm.api_key is None and t.llm.api_key is not None and t.llm.api_key.get_secret_value() == "sk-x"
    with pytest.raises(ValueError):
        s.with_overrides(http={"max_attempts": 0})
    with pytest.raises(ValueError, match="no setting"):
        s.with_overrides(htp={"timeout_seconds": 2})


def test_a_command_named_first_is_built_alone_with_the_same_help_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """``revbench CMD ...`` builds CMD alone (``revbench.app.cli.command_line``): for every command
    its help and its refusals (an unknown flag, a flag without its value) are the whole
    application's; ``--help``, a sub-app and a name that is no command get the whole application."""
    import typer.main

    from revbench.app import cli
    from tests.support.common import run_cli

    names = [c.name or typer.main.get_command_name(c.callback.__name__) for c in cli.app.registered_commands]
    assert "evaluate" in names and len(names) == len(set(names)) > 15
    for name in names:
        for args in ([name, "--help"], [name, "--no-such-flag"], [name, "-b"]):
            lean = run_cli(*args)
            with monkeypatch.context() as m:
                m.setattr(cli, "command_line", lambda _args: cli.app)
                whole = run_cli(*args)
            assert lean == whole, args
            assert f"revbench {name}" in lean[1] + lean[2] or f" {name} [OPTIONS]" in lean[1], args
    assert cli.command_line(["evaluate", "--help"]) is not cli.app
    for args in ([], ["--help"], ["release", "--help"], ["survey", "send"], ["evaluat"]):
        assert cli.command_line(args) is cli.app, args
