"""A demo data folder belongs to one world: when the world changes (another seed, or a rebuild of
other benchmark files), the warehouse and the survey store are set aside together, never mixed."""

from __future__ import annotations

from pathlib import Path

from revbench.app.demo import demo_warehouse_for
from revbench.settings import Settings


def test_a_new_world_sets_the_warehouse_and_the_survey_store_aside_together(settings: Settings) -> None:
    data = settings.data_dir
    data.mkdir(parents=True, exist_ok=True)
    demo_warehouse_for(settings, {"base_key": "world-a", "spec_key": "world-a", "format": 1})
    for name in ("warehouse.duckdb", "warehouse.duckdb.wal", "survey.sqlite", "survey.sqlite-wal"):
        (data / name).write_text(name)
    demo_warehouse_for(settings, {"base_key": "world-a", "spec_key": "world-a", "format": 1})  # the same world: nothing moves
    assert (data / "warehouse.duckdb").exists() and (data / "survey.sqlite").exists()
    demo_warehouse_for(settings, {"base_key": "world-b", "spec_key": "world-b", "format": 1})
    aside = [p for p in data.iterdir() if p.name.startswith("previous-demo-")]
    assert len(aside) == 1
    assert sorted(p.name for p in aside[0].iterdir()) == [
        "survey.sqlite", "survey.sqlite-wal", "warehouse.duckdb", "warehouse.duckdb.wal"]
    assert not list(data.glob("warehouse.duckdb*")) and not list(data.glob("survey.sqlite*"))
    assert (data / ".demo-world").read_text() == "world-b-format1"


def test_a_scanner_passes_over_a_link_it_cannot_reach(tmp_path: Path) -> None:
    from email.message import EmailMessage

    from revbench.synth.respondents import scan

    msg = EmailMessage()
    msg["To"] = "ada@lab.example"
    # A real LR-bench title carries a web address; offline the scanner cannot reach it.
    msg.set_content("1. Graph agents (https://unreachable.invalid/x)\nhttp://127.0.0.1:9/i/abc\n")
    assert scan(msg, seed=0) == 4  # two links, HEAD and GET each, none reachable, none fatal
