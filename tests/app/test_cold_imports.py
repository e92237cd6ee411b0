"""A one-off ``revbench evaluate`` of RATE-format predictions loads only what it uses: the
command's whole run (not just its modules' import) is watched with ``-X importtime`` in its own
process, so a heavy import added anywhere on its path, at load or at run time, fails here.

With the default settings it is the lean lane's (``revbench.app.lean_evaluate``): the standard
library alone. The tests that configure every setting through ``REVBENCH_`` variables (``cli``,
``modules_at_exit``) watch the full path, which the lane leaves such a configuration to."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from revbench.settings import Settings
from tests.support.cli import cli
from tests.support.common import settings_env

NEVER = (
    # The tracked mode, the ML stack, plotting, ranking, templates, HTTP and the servers: other
    # commands (or --track, --plot, ranking splits, scorers) need them, predictions files do not.
    "prefect", "torch", "sentence_transformers", "transformers", "sklearn", "scipy", "matplotlib", "ranx",
    "jinja2", "httpx", "great_expectations", "dask", "distributed", "openai", "faiss", "bm25s", "yake", "nltk",
    "pandas", "uvicorn", "fastapi", "revbench.ml", "revbench.clients", "revbench.replay", "revbench.survey", "revbench.synth",
    # Loaded only where used: the bootstrap's generator (none with --bootstrap 0) and the Prefect
    # profile's parser (none without a profiles.toml).
    "numpy.random", "tomllib",
    # DuckDB's frame reads: the warehouse writes its rows through the Arrow C stream, and this
    # command reads none back as frames.
    "pyarrow",
)
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def write_rate_files(d: Path) -> tuple[Path, Path]:
    """SYNTHETIC predictions in RATE's flat format: 16 paper-centric and 40 reviewer-centric
    tuples (the size of LR-bench's public samples)."""
    rng = random.Random(0)
    out = []
    for kind, n in (("paper_centric", 16), ("reviewer_centric", 40)):
        rows = []
        for i in range(n):
            hi = rng.randint(2, 5)
            rows.append({"anchor_id": f"a{i}", "positive_id": f"p{i}", "negative_id": f"n{i}", "type": kind,
                         "positive_score": rng.random(), "negative_score": rng.random(),
                         "positive_ref_score": hi, "negative_ref_score": rng.randint(1, hi - 1)})
        path = d / f"RATE_{kind[0]}c.json"
        path.write_text(json.dumps(rows))
        out.append(path)
    return out[0], out[1]


def test_a_cold_evaluate_of_rate_predictions_imports_nothing_it_does_not_use(settings: Settings, tmp_path: Path) -> None:
    pc, rc = write_rate_files(tmp_path)
    out = cli(settings, "evaluate", "-p", f"rate_pc={pc}", "-p", f"rate_rc={rc}", "--bootstrap", "0",
              extra={"PYTHONPROFILEIMPORTTIME": "1", "PREFECT_HOME": str(tmp_path / "prefect")})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rate_pc" in out.stdout and "rate_rc" in out.stdout
    loaded = {m[1] for line in out.stderr.splitlines() if (m := IMPORT_LINE.match(line))}
    # The run was watched from its start to its end: the command line, the flow, its libraries.
    assert {"revbench.app.cli", "revbench.flows.evaluate", "polars", "duckdb"} <= loaded
    assert sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in NEVER)) == []


UNTRACKED_NEVER = ("prefect", "torch", "matplotlib", "sklearn", "scipy")
"""What ``--no-track`` on prediction files must not load, whatever else is configured."""
MODULES_AT_EXIT = (
    "import atexit, json, os, runpy, sys\n"
    "atexit.register(lambda: open(os.environ['MODULES_OUT'], 'w').write(json.dumps(sorted(sys.modules))))\n"
    "runpy.run_module('revbench', run_name='__main__', alter_sys=True)\n"
)
"""``python -m revbench`` that writes, as it exits (the command line runs the exit handlers
before it ends the process), every module the process loaded."""


def modules_at_exit(settings: Settings, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``revbench ARGS`` in its own process, configured like a user's, with a Prefect API
    configured (nothing answers there: ``--no-track`` must not even ask), and the modules it
    had loaded when it ended."""
    dump = tmp_path / "modules.json"
    dump.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_"))}
    env.update(settings_env(settings), MODULES_OUT=str(dump), PREFECT_HOME=str(tmp_path / "prefect"),
               PREFECT_API_URL="http://127.0.0.1:9/api")
    out = subprocess.run([sys.executable, "-c", MODULES_AT_EXIT, *args], env=env, capture_output=True, text=True,
                         timeout=600)
    return out, set(json.loads(dump.read_text())) if dump.exists() else set()


def loaded_of(modules: set[str], families: tuple[str, ...]) -> list[str]:
    """The modules of ``families`` (a package and its submodules) among ``modules``."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in families))


def test_an_untracked_evaluate_of_rate_predictions_loads_no_tracking_ml_or_plotting(
        settings: Settings, tmp_path: Path) -> None:
    pc, rc = write_rate_files(tmp_path)
    args = ("evaluate", "-p", f"rate_pc={pc}", "-p", f"rate_rc={rc}", "--bootstrap", "0", "--no-track")
    out, loaded = modules_at_exit(settings, tmp_path, *args)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rate_pc" in out.stdout and "rate_rc" in out.stdout
    # Read as the process ended, after the work: the command line, the flow, its libraries.
    assert {"revbench.app.cli", "revbench.flows.evaluate", "polars", "numpy", "duckdb"} <= loaded
    assert loaded_of(loaded, UNTRACKED_NEVER) == []
    assert loaded_of(loaded, NEVER) == []
    # The same watch sees a library the command does load: asked for the loss plot, it draws
    # with matplotlib, and this test would name it.
    out, planted = modules_at_exit(settings, tmp_path, *args, "--plot")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "matplotlib" in loaded_of(planted, UNTRACKED_NEVER)


LEAN_NEVER = ("polars", "numpy", "duckdb", "pyarrow", "pydantic", "pydantic_settings", "prefect", "typer", "click", "rich",
              "revbench.flows", "revbench.settings", "revbench.warehouse")
"""What the lean lane loads none of: the full path's libraries, its settings and its flow (rich
neither, printing to a log)."""


def test_the_lean_lane_loads_none_of_the_full_paths_libraries(tmp_path: Path) -> None:
    from revbench.app.lean_evaluate import RICH_ENVIRON

    pc, rc = write_rate_files(tmp_path)
    dump = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_")) and k not in RICH_ENVIRON}
    env.update(MODULES_OUT=str(dump), PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_API_URL="http://127.0.0.1:9/api")
    args = ("evaluate", "-p", f"rate_pc={pc}", "-p", f"rate_rc={rc}", "--bootstrap", "0", "--no-track")
    out = subprocess.run([sys.executable, "-c", MODULES_AT_EXIT, *args], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stderr == "", out.stderr[-3000:]
    assert "│ rate_pc │" in out.stdout and "│ rate_rc │" in out.stdout
    loaded = set(json.loads(dump.read_text()))
    assert "revbench.app.lean_evaluate" in loaded
    assert loaded_of(loaded, LEAN_NEVER) == []
    assert (tmp_path / "data" / "reports" / "evaluate" / "report.md").is_file()
    assert not (tmp_path / "data" / "warehouse.duckdb").exists()  # a files-only evaluation stores nothing
    # The same watch sees the full path's libraries where the lane steps aside (a setting it does not read).
    env["REVBENCH_LOG_LEVEL"] = "INFO"
    out = subprocess.run([sys.executable, "-c", MODULES_AT_EXIT, *args], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert {"polars", "typer", "pydantic", "revbench.flows.evaluate"} <= set(json.loads(dump.read_text()))


def test_a_prefect_profile_is_read_only_where_there_is_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from revbench.app.entry import prefect_api_configured

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    assert not prefect_api_configured()  # no profiles.toml
    (tmp_path / "prefect").mkdir()
    profiles = tmp_path / "prefect" / "profiles.toml"
    profiles.write_text('active = "local"\n[profiles.local]\nPREFECT_API_URL = "http://127.0.0.1:4200/api"\n')
    assert prefect_api_configured()
    monkeypatch.setenv("PREFECT_PROFILE", "other")
    assert not prefect_api_configured()
    profiles.write_text("active = [unclosed\n")
    assert not prefect_api_configured()  # a damaged file is no API


def test_a_prefect_api_url_in_the_working_directorys_env_counts_as_prefect_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from revbench.app.entry import prefect_api_url

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    assert prefect_api_url() is None
    (tmp_path / ".env").write_text("REVBENCH_LOG_LEVEL=INFO\nPREFECT_API_URL=http://127.0.0.1:4300/api\n")
    assert prefect_api_url() == "http://127.0.0.1:4300/api"
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")  # the environment wins, as in Prefect
    assert prefect_api_url() == "http://127.0.0.1:4200/api"
