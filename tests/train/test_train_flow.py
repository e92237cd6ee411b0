"""The train flow on the small world's warehouse: keyword profiles (YAKE, or the LLM with strict
JSON and every answer kept), a weak-supervision set that holds rated papers out, an adapter with
its card; a second run does nothing, other settings need --replace (which keeps the old model)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.errors import UsageError
from revbench.evaluation.plan import PlanError, plan_evaluation
from revbench.flows.train import train_flow
from revbench.schemas.tables import KEYWORD_PROFILES, PAPER_KEYWORDS, RATINGS
from revbench.settings import Settings
from revbench.templates import render
from revbench.warehouse import Warehouse
from tests.support.common import FAST, on_replay

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
TRAIN = {"keywords": "yake", "anchors": 24, "candidates": 8, "max_steps": 4, "checkpoint_every": 2,
         "max_seq_length": 32, "learning_rate": 1e-3, "batch_size": 4}


@pytest.fixture
def train_settings(round_warehouse: Path, tmp_path: Path) -> Settings:
    data = tmp_path / "data"
    shutil.copytree(round_warehouse, data, ignore=shutil.ignore_patterns("*.run.json", "prefect"))
    return Settings(data_dir=data).with_overrides(**FAST, train=TRAIN)


def _rate(s: Settings, n: int) -> list[str]:
    """Mark ``n`` papers as rated (as the ratings flow would); returns their ids."""
    with Warehouse.open(s.warehouse_path) as wh:
        papers = wh.ingest.corpus_papers()["arxiv_id"].to_list()[:n]
        reviewer = wh.pools.pool_inputs()["authors"]["author_id"][0]
        rows = [{"reviewer_id": reviewer, "paper_id": p, "rating": 4, "invitation_id": "i1", "round": 1, "category": "cs.LG",
                 "event_id": k, "rated_at": datetime(2026, 10, 1, tzinfo=UTC), "n_events": 1, "status": "kept", "flags": []}
                for k, p in enumerate(papers)]
        wh.upsert(RATINGS, pl.DataFrame(rows, schema=RATINGS.polars_schema))
    return papers


def test_train_flow_end_to_end(train_settings: Settings) -> None:
    s = train_settings
    rated = _rate(s, 5)
    with pytest.raises(PlanError, match="revbench train"):
        plan_evaluation(s, ["warehouse"], ["trained"], [])
    out = train_flow.fn(s, name="demo")
    assert out.status == "trained" and out.steps == 4
    folder = s.data_dir / "models" / "demo"
    pairs = pl.read_parquet(folder / "pairs.parquet")
    prov = json.loads((folder / "provenance.json").read_text())
    assert prov["triplets"] == pairs.height > 0 and sum(prov["by_view"].values()) == pairs.height
    assert set(pairs["view"]) == {"paper_centric", "reviewer_centric"}
    used = set(pairs["anchor_id"]) | set(pairs["positive_id"]) | set(pairs["negative_id"])
    assert not used & set(rated), "a rated paper leaked into training"
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        corpus = wh.ingest.corpus_papers().height
    assert prov["papers"] == corpus - len(rated) and prov["held_out"]["papers"] == len(rated)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        kw = wh.read(PAPER_KEYWORDS)
        profiles = wh.read(KEYWORD_PROFILES)
    assert set(kw["extractor"]) == {"yake"} and not set(kw["arxiv_id"]) & set(rated)
    assert profiles.height == prov["reviewers"] and profiles["profile"].str.starts_with("The reviewer's").all()
    adapter = folder / "adapter"
    assert (adapter / "README.md").read_text().count("rate:model=") == 1 and (adapter / "loss.png").stat().st_size > 0
    assert out.scorer == f"rate:model={adapter}"
    assert plan_evaluation(s, ["warehouse"], ["tpms", "trained"], []).scorers == ["tpms", out.scorer]

    again = train_flow.fn(s, name="demo")
    assert again.status == "skipped" and "already" in (again.reason or "")

    other = s.with_overrides(train={"seed": 1})
    with pytest.raises(UsageError, match="--replace"):
        train_flow.fn(other, name="demo")
    replaced = train_flow.fn(other, name="demo", replace=True)
    assert replaced.status == "trained"
    kept = list((s.data_dir / "models" / ".replaced").glob("demo-*"))
    assert len(kept) == 1 and (kept[0] / "adapter" / "adapter_model.safetensors").exists()
    with pytest.raises(UsageError, match="--name"):
        train_flow.fn(s, name="../escape")
    _rate(s, 8)  # papers rated since: the model may have trained on them
    with pytest.raises(UsageError, match="rated papers held out now, 5 then"):
        train_flow.fn(other, name="demo")
    with pytest.raises(UsageError, match="TRAIN__BASE_MODEL '/no/such': cannot load"):
        train_flow.fn(other.with_overrides(train={"base_model": "/no/such"}), name="fresh")
    assert not (s.data_dir / "models" / "fresh").exists()


def test_keywords_from_the_llm_are_strict_json_and_recorded(train_settings: Settings, replay, small_world: Path) -> None:
    s = on_replay(train_settings, replay(world=small_world)).with_overrides(train={"keywords": "llm"})
    train_flow.fn(s, name="llm")
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        kw = wh.read(PAPER_KEYWORDS)
        profiles = wh.read(KEYWORD_PROFILES)
    version = render("prompts/keywords.j2", paper={"title": "", "abstract": ""})[1]
    assert set(kw["extractor"]) == {"llm"} and set(kw["template_version"]) == {version} and version.startswith("2-")
    assert set(kw["model"]) == {s.llm.model} and (kw["keywords"].list.len() >= 3).all()
    assert set(profiles["extractor"]) == {"llm"} and set(profiles["template_version"]) == {version}
    recorded = [json.loads(line) for f in (s.cache_dir / "llm").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(recorded) == kw.height and {r["template"] for r in recorded} == {"prompts/keywords.j2"}


def test_keyword_answers_that_are_not_json_fall_back_to_yake(train_settings: Settings, replay) -> None:
    app = replay(fixtures=HERE / "fixtures" / "keywords_prose")
    s = on_replay(train_settings, app).with_overrides(train={"keywords": "llm"})
    out = train_flow.fn(s, name="prose")
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        kw = wh.read(PAPER_KEYWORDS)
        stages = wh.runs.run_stages(out.provenance.run_id)  # type: ignore[union-attr]
    assert set(kw["extractor"]) == {"yake"}  # every answer was rejected
    rejected = stages.filter(pl.col("stage") == "profiles")["rejected"].item()
    assert rejected == kw.height > 0
    assert app.faults.stats()["served"]["llm"] == 2 * kw.height  # the cached ask and one fresh retry each
