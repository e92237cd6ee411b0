"""Reviewer attention: the pooling's arithmetic at its limits (max and mean), training on the
graph's weak labels of unrated papers lowers the loss and never sees a rated paper, a killed run
resumes to the weights of an uninterrupted one, and the result scores as
``embedding:pooling=attention:DIR`` beside max, mean and top-3 mean."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from revbench.errors import InputError
from revbench.evaluation.scorers import Context, make_scorer
from revbench.flows.train_attention import attention_flow
from revbench.ml.attention import AttentionPool, attention_scores, load_attention
from revbench.settings import Settings
from tests.support.cli import cli, one_line_error
from tests.support.kill import kill_at_first_checkpoint
from tests.support.common import run_cli, settings_env
from tests.support.topics_warehouse import topics_warehouse

TRAIN = {"base_model": "hashing", "attention_experts": 0, "attention_negatives": 6, "epochs": 20,
         "checkpoint_every": 5, "attention_batch_size": 8, "attention_learning_rate": 0.01}


def test_identity_attention_is_max_when_cold_and_mean_when_hot() -> None:
    rng = np.random.default_rng(0)
    q = rng.normal(size=(5, 16)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    p = rng.normal(size=(1, 16)).astype(np.float32)
    p /= np.linalg.norm(p)
    cos = (q @ p.T).ravel()
    for tau, want in [(1e-4, cos.max()), (1e4, cos.mean())]:
        pool = AttentionPool(16, tau)
        got = attention_scores(pool, p, q, [np.arange(5)], np.array([0]))
        assert got[0] == pytest.approx(float(want), abs=1e-4)
    # A masked (absent) paper takes no attention.
    pool = AttentionPool(16, 1e4)
    padded = torch.from_numpy(np.stack([np.vstack([q[:2], np.zeros((3, 16), np.float32)])]))
    mask = torch.tensor([[True, True, False, False, False]])
    with torch.no_grad():
        got_masked = float(pool(torch.from_numpy(p), padded, mask)[0])
    assert got_masked == pytest.approx(float(cos[:2].mean()), abs=1e-4)


@pytest.fixture
def world(settings: Settings) -> tuple[Settings, dict[str, list[str]]]:
    made = topics_warehouse(settings)
    return settings.with_overrides(train=TRAIN), made


def test_training_learns_from_unrated_papers_and_scores_as_a_pooling(world: tuple[Settings, dict[str, list[str]]]) -> None:
    s, made = world
    out = attention_flow.fn(s, name="att")
    folder = Path(out.folder)
    assert out.status == "trained" and out.submissions > 0 and out.steps > 0
    assert out.last_loss < out.first_loss
    trained_on = set(pl.read_parquet(folder / "submissions.parquet")["paper_id"])
    in_profiles = set(pl.read_parquet(folder / "profiles.parquet")["paper_id"])
    assert trained_on <= set(made["citing"]) and not (trained_on | in_profiles) & set(made["queries"])
    card = json.loads((folder / "revbench_attention.json").read_text())
    assert card["base_model"] == "hashing" and card["labels"] == "citations"
    assert (folder / "loss.png").stat().st_size > 0
    # Again with the same settings: nothing to do.
    again = attention_flow.fn(s, name="att")
    assert again.status == "skipped" and again.scorer == out.scorer
    # The pooling, on the warehouse's own (rated, held-out) benchmark, beside max and mean.
    from revbench.flows.evaluate import evaluate_flow

    specs = ["embedding:model=hashing,pooling=max", "embedding:model=hashing,pooling=mean", out.scorer]
    result = evaluate_flow.fn(s, benchmarks=["warehouse"], scorers=specs, bootstrap=0, plot=False)
    scored = {r["scorer"] for r in result.rows}
    assert scored == {"embedding:model=hashing", "embedding:model=hashing,pooling=mean", out.scorer}, scored
    att = [r for r in result.rows if r["scorer"] == out.scorer]
    assert att and all(r["coverage"] == 1.0 for r in att if r["coverage"] is not None)  # every rated pair scored
    assert any(r["value"] is not None for r in att)


def test_a_killed_attention_training_resumes_to_the_same_weights(world: tuple[Settings, dict[str, list[str]]],
                                                                 tmp_path: Path) -> None:
    s, _ = world
    s = s.with_overrides(train={**TRAIN, "epochs": 120})
    whole = s.with_overrides(data_dir=tmp_path / "whole")
    whole.data_dir.mkdir(parents=True)
    shutil.copy(s.warehouse_path, whole.warehouse_path)
    done = cli(whole, "train", "--objective", "attention", "--no-track")
    assert done.returncode == 0, done.stderr
    proc = cli(s, "train", "--objective", "attention", "--no-track", wait=False)
    folder = s.data_dir / "models" / "attention"
    kill_at_first_checkpoint(proc, folder, folder / "revbench_attention.json")
    resumed = cli(s, "train", "--objective", "attention", "--no-track")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed at step" in resumed.stdout
    a, _ = load_attention(whole.data_dir / "models" / "attention")
    b, _ = load_attention(folder)
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k


def test_refusals_are_one_line(world: tuple[Settings, dict[str, list[str]]], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    s, _ = world
    with pytest.raises(InputError, match="ATTENTION_EXPERTS"):
        attention_flow.fn(s.with_overrides(train={**TRAIN, "attention_experts": 50}), name="none")
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    one_line_error(*run_cli("train", "--objective", "nope"), 2, "--objective 'nope'")
    one_line_error(*run_cli("evaluate", "-b", "warehouse", "-s", f"embedding:pooling=attention:{tmp_path}"), 2,
                   "no trained attention module there")
    out = attention_flow.fn(s, name="att2")
    one_line_error(*run_cli("evaluate", "-b", "warehouse", "-s", f"embedding:pooling=attention:{out.folder}"), 2,
                   "trained on hashing's vectors", "model=hashing")
    scorer = make_scorer(out.scorer, Context(s))
    assert scorer.params.pooling.startswith("attention:")  # type: ignore[attr-defined]
