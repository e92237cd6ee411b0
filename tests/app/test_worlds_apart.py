"""The demo's SYNTHETIC world and the real one never share a data folder: a command that would
fetch from real services into a folder the demo marked refuses in one line before any work
(unless --mix-worlds / REVBENCH_MIX_WORLDS says to mix), the refresh refuses it alone too (as
``revbench serve`` schedules it), and the demo refuses a folder whose warehouse holds a real crawl."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.errors import UsageError
from revbench.schemas.tables import PAPERS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.worlds import DEMO_WORLD, check_worlds
from tests.support.cli import one_line_error
from tests.support.common import run_cli

DEAD = "http://revbench-test.invalid"
"""Off this machine (so a real service to the check) and answering nobody: a run past the check
stops at the network, in one line, exit 3."""


@pytest.fixture
def synthetic(data_dir: Path) -> Path:
    """A data folder the demo marked (its world's key, as ``demo_warehouse_for`` writes it)."""
    data_dir.mkdir(parents=True)
    (data_dir / DEMO_WORLD).write_text("demo-300-7-format1")
    return data_dir


def nothing_done(data_dir: Path) -> None:
    """Refused before any work: no warehouse, no Prefect home, no run."""
    assert not (data_dir / "warehouse.duckdb").exists() and not (data_dir / "prefect").exists()


@pytest.mark.parametrize("command", [
    ["refresh"], ["ingest", "--since", "2026-09-01", "--until", "2026-09-02"], ["pools"], ["graph"], ["serve"]])
def test_a_command_that_fetches_refuses_a_synthetic_folder_with_real_services(synthetic: Path, command: list[str]) -> None:
    line = one_line_error(*run_cli(*command), 2, "SYNTHETIC", "_BASE_URL=https://", "a real crawl would mix",
                          "REVBENCH_DATA_DIR=", "REVBENCH_MIX_WORLDS=true")
    # The flag is offered where the command has one.
    assert ("--mix-worlds" in line) == (command[0] in ("refresh", "ingest", "pools")), line
    nothing_done(synthetic)


def test_with_the_flag_a_command_proceeds_past_the_check_to_the_network(synthetic: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVBENCH_ARXIV__BASE_URL", f"{DEAD}/api/query")
    monkeypatch.setenv("REVBENCH_HTTP__MAX_ATTEMPTS", "1")
    window = ["--since", "2026-09-01", "--until", "2026-09-02", "--no-track"]
    one_line_error(*run_cli("ingest", *window), 2, "SYNTHETIC", f"REVBENCH_ARXIV__BASE_URL={DEAD}")
    one_line_error(*run_cli("ingest", *window, "--mix-worlds"), 3, "arXiv API", DEAD, "unreachable")
    one_line_error(*run_cli("refresh", "--stages", "ingest", "--until", "2026-09-02", "--no-track", "--mix-worlds"), 3,
                   "arXiv API", DEAD, "unreachable")
    monkeypatch.setenv("REVBENCH_MIX_WORLDS", "true")
    one_line_error(*run_cli("ingest", *window), 3, "arXiv API", DEAD, "unreachable")


def test_stages_that_fetch_nothing_and_the_replay_on_loopback_pass(synthetic: Path) -> None:
    s = Settings(data_dir=synthetic)
    check_worlds(s, ["disambiguate", "survey", "ratings", "release", "evaluate"])
    base = "http://127.0.0.1:41234"  # the replay server the demo starts, at a port drawn each time
    check_worlds(s.with_overrides(arxiv={"base_url": f"{base}/arxiv/api/query"}, s2={"base_url": f"{base}/s2/graph/v1"},
                                  pdf={"base_url": f"{base}/arxiv"}, openalex={"enabled": True, "base_url": f"{base}/openalex"}),
                 ["ingest", "graph", "pools"])
    with pytest.raises(UsageError, match="REVBENCH_OPENALEX__BASE_URL"):  # OpenAlex counts once it is asked
        check_worlds(s.with_overrides(s2={"base_url": f"{base}/s2"}, openalex={"enabled": True}), ["graph"])
    check_worlds(Settings(data_dir=synthetic.parent / "real"), ["ingest", "graph", "pools"])  # a real folder: real services


def test_the_refresh_refuses_alone_as_serve_schedules_it(synthetic: Path) -> None:
    from revbench.flows.refresh import refresh_flow

    with pytest.raises(UsageError, match="SYNTHETIC world and REVBENCH_ARXIV__BASE_URL"):
        refresh_flow.fn(Settings(data_dir=synthetic))  # as `revbench serve`'s scheduled refresh calls it
    nothing_done(synthetic)
    # A caller that declares its world SYNTHETIC is held to it in any folder.
    with pytest.raises(UsageError, match="SYNTHETIC"):
        refresh_flow.fn(Settings(data_dir=synthetic.parent / "other"), stages=["graph"], synthetic=True)


def _warehouse(data_dir: Path, synthetic: bool) -> None:
    """One paper and the ingest run that loaded it (of a SYNTHETIC world or not)."""
    now = datetime(2026, 9, 20, tzinfo=UTC)
    data_dir.mkdir(parents=True, exist_ok=True)
    with Warehouse.open(data_dir / "warehouse.duckdb") as wh:
        wh.upsert(PAPERS, pl.DataFrame([dict(
            arxiv_id="2609.00001", version=1, title="On things", abstract="We study things.", primary_category="cs.LG",
            categories=["cs.LG"], updated=now, year=2026, pdf_sha256="0" * 64, title_similarity=1.0, n_authors=1,
            input_hash="h", loaded_at=now)]))
        wh.runs.record_run("r1", "ingest", {"since": "2026-09-01", **({"synthetic": True} if synthetic else {})}, "test",
                      now, "completed")


def test_the_demo_refuses_a_folder_whose_warehouse_holds_a_real_crawl(data_dir: Path) -> None:
    _warehouse(data_dir, synthetic=False)
    before = sorted(p.name for p in data_dir.iterdir())
    one_line_error(*run_cli("demo", "--papers", "20"), 2, "holds a real warehouse", "SYNTHETIC",
                   "REVBENCH_DATA_DIR=")
    assert sorted(p.name for p in data_dir.iterdir()) == before  # nothing set aside, no world drawn, no marker


def test_the_demo_s_own_warehouse_is_no_real_one(data_dir: Path) -> None:
    from revbench.worlds import real_warehouse

    _warehouse(data_dir, synthetic=True)
    assert not real_warehouse(Settings(data_dir=data_dir))
    _warehouse(data_dir / "x", synthetic=False)
    assert real_warehouse(Settings(data_dir=data_dir / "x"))
    (data_dir / "x" / DEMO_WORLD).write_text("demo")  # mixed on purpose: the folder stays the demo's
    assert not real_warehouse(Settings(data_dir=data_dir / "x"))
