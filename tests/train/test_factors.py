"""UniPR's factor-aware encoding: the pairs are what each factor says (a citation, a shared
topic, the BM25 nearest) and never touch a query paper; the instruction goes before the
submission only; training lowers the loss; ``cof:encoder=PATH`` scores every factor with the
encoder, with no graph needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.scorers import Context, make_scorer
from revbench.flows.train_contrastive import factors_flow
from revbench.ml.recipes import instruction_prefix
from revbench.settings import Settings
from revbench.tasks.factor_pairs import factor_pairs
from revbench.warehouse import Warehouse
from tests.support.evaluation import bench
from tests.support.models import tiny_bert
from tests.support.topics_warehouse import topics_warehouse

pytestmark = pytest.mark.slow


@pytest.fixture
def world(settings: Settings, tmp_path: Path) -> tuple[Settings, dict[str, list[str]]]:
    made = topics_warehouse(settings, citing=24)
    base = tiny_bert(tmp_path / "tiny-bert", seed=9)
    return settings.with_overrides(train={"base_model": str(base), "batch_size": 6, "epochs": 6, "max_seq_length": 48,
                                          "learning_rate": 1e-2, "checkpoint_every": 5, "temperature": 0.1,
                                          "anchors": 90}), made


def test_each_factor_pairs_what_it_says_and_no_query_paper(world: tuple[Settings, dict[str, list[str]]]) -> None:
    s, made = world
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        frames, topics = wh.labels.weak_label_frames(), wh.labels.topic_frame()
    pairs = factor_pairs(frames, topics, 30, seed=0)
    by = {f: pairs.filter(pl.col("factor") == f) for f in ("citation", "topic", "semantic")}
    assert all(0 < g.height <= 30 for g in by.values()), {f: g.height for f, g in by.items()}
    cites = set(frames["cites"].select("citing_id", "cited_id").iter_rows())
    assert set(by["citation"].select("query_id", "doc_id").iter_rows()) <= cites
    topic_of = dict(topics.iter_rows())
    assert all(topic_of[q] == topic_of[d] and q != d for q, d in by["topic"].select("query_id", "doc_id").iter_rows())
    assert all(q != d for q, d in by["semantic"].select("query_id", "doc_id").iter_rows())
    assert not (set(pairs["query_id"]) | set(pairs["doc_id"])) & set(made["queries"])
    assert factor_pairs(frames, topics, 30, seed=0).equals(pairs)  # seeded


def test_the_instruction_goes_before_the_submission_only(settings: Settings) -> None:
    prefix, version = instruction_prefix("citation")
    assert prefix == "Instruct: Retrieve a scientific paper that is cited by the query.\nQuery: " and version.startswith("1-")
    b = bench()
    plain = make_scorer("embedding:model=hashing", Context(settings)).score(b).draws[0]
    scorer = make_scorer("embedding:model=hashing,instruction=topic", Context(settings))
    assert scorer.spec.endswith(f"instruction_template=prompts/factor_instruction.j2@{version}")  # recorded with the scores
    told = scorer.score(b).draws[0]
    assert plain.height == told.height == 4 and not np.allclose(plain["score"], told["score"])
    with pytest.raises(ValueError, match="instruction"):
        make_scorer("embedding:instruction=venue", Context(settings))


def test_factors_train_and_cof_uses_the_encoder_for_every_factor(world: tuple[Settings, dict[str, list[str]]]) -> None:
    s, _ = world
    out = factors_flow.fn(s, name="fac")
    assert out.status == "trained" and out.objective == "factors"
    assert np.mean(out.losses[-5:]) < np.mean(out.losses[:5]), out.losses
    pairs = pl.read_parquet(s.data_dir / "models" / "fac" / "pairs.parquet")
    assert set(pairs["factor"]) == {"citation", "topic", "semantic"} and pairs["query_text"].null_count() == 0
    b = bench()  # no graph: cof with an encoder needs none
    scores = make_scorer(out.scorer, Context(s)).score(b)
    labels = {c.scorer for c in scores.companions}
    assert scores.draws[0].height == 4 and len(labels) == 6, labels
    with pytest.raises(ValueError, match="not both"):
        make_scorer(f"{out.scorer},semantic=bm25", Context(s))
    again = factors_flow.fn(s, name="fac")
    assert again.status == "skipped"
