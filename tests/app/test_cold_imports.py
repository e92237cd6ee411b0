"""A one-off ``revbench evaluate`` of RATE-format predictions loads only what it uses: the
command's whole run (not just its modules' import) is watched with ``-X importtime`` in its own
process, so a heavy import added anywhere on its path, at load or at run time, fails here."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from revbench.settings import Settings
from tests.support.cli import cli

NEVER = (
    # The tracked mode, the ML stack, plotting, ranking, templates, HTTP and the servers: other
    # commands (or --track, --plot, ranking splits, scorers) need them, predictions files do not.
    "prefect", "torch", "sentence_transformers", "transformers", "sklearn", "scipy", "matplotlib", "ranx",
    "jinja2", "httpx", "great_expectations", "dask", "distributed", "openai", "faiss", "bm25s", "yake", "nltk",
    "pandas", "uvicorn", "fastapi", "revbench.ml", "revbench.clients", "revbench.replay", "revbench.survey", "revbench.synth",
    # Loaded only where used: the bootstrap's generator (none with --bootstrap 0) and the Prefect
    # profile's parser (none without a profiles.toml).
    "numpy.random", "tomllib",
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
