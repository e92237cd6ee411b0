"""LoRA training on the packaged MiniLM, on the CPU: a few steps lower the loss, a killed run
resumes from its checkpoint to the weights of an uninterrupted run, and the adapter loads and
scores as ``rate:model=PATH``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.scorers import Context, make_scorer
from revbench.ml.embeddings import EmbeddingCache
from revbench.ml.keywords import profile_text
from revbench.ml.models import DEFAULT_MODEL, is_adapter, load_model, model_key
from revbench.ml.training import TrainConfig, batch_loss, train
from revbench.settings import Settings
from tests.support.evaluation import bench
from tests.support.kill import kill_at_first_checkpoint

pytestmark = pytest.mark.slow

TOPICS = ["graph neural networks for molecules", "dense retrieval of documents", "speech recognition with transformers",
          "reinforcement learning for robots", "image segmentation networks", "causal inference in economics"]


def triplets(n: int = 24) -> pl.DataFrame:
    rows = []
    for i in range(n):
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i + 1 + i // len(TOPICS)) % len(TOPICS)]
        rows.append({"view": "paper_centric", "anchor_id": f"a{i}", "anchor_text": f"A study {i} of {a}",
                     "positive_id": f"r{i % len(TOPICS)}", "positive_text": profile_text(a.split()[:3]),
                     "negative_id": f"r{(i + 1) % len(TOPICS)}-{i}", "negative_text": profile_text(b.split()[:3]),
                     "positive_bm25": 3.0, "negative_bm25": 1.0, "ratio": 1 / 3})
    return pl.DataFrame(rows)


def config(**kw: object) -> TrainConfig:
    base = dict(base_model=DEFAULT_MODEL, max_seq_length=32, learning_rate=1e-3, batch_size=4, epochs=1,
                checkpoint_every=4, seed=7)
    return TrainConfig(**{**base, **kw})  # type: ignore[arg-type]


def adapter_weights(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(folder / "adapter" / "adapter_model.safetensors"))


def test_a_few_steps_lower_the_loss(tmp_path: Path) -> None:
    data = triplets()
    cfg = config(epochs=2, temperature=0.5)
    model = load_model(DEFAULT_MODEL)
    model.max_seq_length = cfg.max_seq_length
    model.eval()
    import torch

    with torch.no_grad():
        before = float(batch_loss(model, data, cfg))
    out = train(data, tmp_path / "m", cfg)
    assert out.steps == 12 and out.resumed_from == 0 and len(out.losses) == 12
    trained = load_model(str(tmp_path / "m" / "adapter"))
    trained.eval()
    with torch.no_grad():
        after = float(batch_loss(trained, data, cfg))
    assert after < 0.8 * before, (before, after)


SCRIPT = """
import sys, polars as pl
from pathlib import Path
from revbench.ml.training import TrainConfig, train
from revbench.ml.models import DEFAULT_MODEL
cfg = TrainConfig(base_model=DEFAULT_MODEL, max_seq_length=32, learning_rate=1e-3, batch_size=4, epochs=4,
                  checkpoint_every=4, seed=7)
train(pl.read_parquet(sys.argv[1]), Path(sys.argv[2]), cfg)
"""


def _training(pairs: Path, out: Path) -> subprocess.Popen[str]:
    """A training run in its own process, as `revbench train` runs it (same environment for
    every run of the test: a run's float sums depend on its thread count)."""
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(pairs), str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _losses(out: Path) -> list[float]:
    last = sorted((out / "checkpoints").glob("step-*"))[-1]
    return json.loads((last / "state.json").read_text())["losses"]


def test_a_killed_training_resumes_to_the_same_weights(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.parquet"
    triplets().write_parquet(pairs)
    whole = _training(pairs, tmp_path / "whole")  # 24 steps, a checkpoint every 4
    _, err = whole.communicate(timeout=600)
    assert whole.returncode == 0, err

    killed = tmp_path / "killed"
    proc = _training(pairs, killed)
    kill_at_first_checkpoint(proc, killed, killed / "adapter")
    stopped_at = int(sorted((killed / "checkpoints").glob("step-*"))[-1].name.split("-")[1])
    assert 0 < stopped_at < 24
    resumed = _training(pairs, killed)
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    a, b = adapter_weights(tmp_path / "whole"), adapter_weights(killed)
    assert a.keys() == b.keys() and len(a) > 0
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert _losses(killed) == _losses(tmp_path / "whole") and len(_losses(killed)) == 24


def test_a_resume_runs_on_the_thread_count_the_run_started_with(tmp_path: Path) -> None:
    import torch

    data = triplets(8)
    before = torch.get_num_threads()
    train(data, tmp_path / "m", config(epochs=1, checkpoint_every=1, max_steps=1))
    saved = tmp_path / "m" / "checkpoints" / "step-0000001" / "state.json"
    state = json.loads(saved.read_text())
    assert state["threads"] == before
    state["threads"] = before + 1
    saved.write_text(json.dumps(state))
    seen: list[int] = []
    train(data, tmp_path / "m", config(epochs=1, checkpoint_every=1, max_steps=2),
          progress=lambda *_: seen.append(torch.get_num_threads()))
    assert seen == [before + 1] and torch.get_num_threads() == before


def test_the_adapter_loads_and_scores_as_a_scorer(tmp_path: Path, settings: Settings) -> None:
    train(triplets(), tmp_path / "m", config(epochs=1))
    path = str(tmp_path / "m" / "adapter")
    assert is_adapter(path)
    card = json.loads((tmp_path / "m" / "adapter" / "revbench_model.json").read_text())
    assert card["base_model"] == DEFAULT_MODEL and card["steps"] == 6 and len(card["data_sha256"]) == 64
    text = ["graph neural networks for molecules"]
    base = load_model(DEFAULT_MODEL).encode(text, normalize_embeddings=True)
    tuned = load_model(path).encode(text, normalize_embeddings=True)
    assert not np.allclose(base, tuned, atol=1e-4), "the adapter changed nothing"
    s = make_scorer(f"rate:model={path}", Context(settings)).score(bench())
    assert s.draws[0].height > 0 and s.draws[0]["score"].is_finite().all()
    # The cache tells the adapter from its base, and from a retrained adapter in the same folder.
    assert model_key(path) != model_key(DEFAULT_MODEL)
    before = model_key(path)
    train(triplets(12), tmp_path / "m2", config(epochs=1, seed=8))
    import shutil

    shutil.rmtree(tmp_path / "m" / "adapter")
    shutil.copytree(tmp_path / "m2" / "adapter", tmp_path / "m" / "adapter")
    assert model_key(path) != before
    assert EmbeddingCache(settings.cache_dir, path).dir.parent.name == model_key(path)
    # In this process too: the retrained adapter gets its own model and cache, not the first one's.
    again = make_scorer(f"rate:model={path}", Context(settings)).score(bench())
    assert not again.draws[0]["score"].equals(s.draws[0]["score"])
