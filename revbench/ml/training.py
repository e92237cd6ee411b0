"""LoRA fine-tuning of a sentence-transformers model on weak preference triplets (RATE style).

Loss per batch of B triplets (anchor a, positive p, negative n), with cosine similarity s and
temperature t:

    pairwise = mean_i softplus(-(s(a_i, p_i) - s(a_i, n_i)) / t)         (pairwise logistic)
    infonce  = mean_i -log softmax_j(s(a_i, c_j) / t)[j = p_i]           (c: every p and n of the batch)
    loss     = pairwise_weight * pairwise + ce_weight * infonce

In-batch candidates that are the same item as a row's positive (two triplets of one anchor share
it) are masked out of that row's softmax, so a duplicate is never pushed away as a negative.

Training is seeded and checkpointed by every objective's loop (:mod:`revbench.ml.loop`): every
``checkpoint_every`` steps the LoRA weights, the optimizer, the RNG states and the step are
written atomically (safetensors and JSON, never a pickle: :mod:`revbench.ml.checkpoint`); a run
started again on the same folder resumes from the newest good checkpoint and ends with the
weights an uninterrupted run has.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.ml.loop import Progress, run_loop
from revbench.ml.loop import TrainingDiverged as TrainingDiverged  # re-exported: callers caught it from here first
from revbench.ml.models import CARD_FILE, load_model, quiet_peft

ADAPTER_DIR = "adapter"


class Epochs:
    """Steps of a training over ``n`` rows, for a config with ``batch_size``, ``epochs`` and
    ``max_steps`` (every objective's config)."""

    batch_size: int
    epochs: int
    max_steps: int

    def steps_per_epoch(self, n: int) -> int:
        return -(-n // self.batch_size)

    def total_steps(self, n: int) -> int:
        total = self.epochs * self.steps_per_epoch(n)
        return min(total, self.max_steps) if self.max_steps else total


@dataclass(frozen=True)
class TrainConfig(Epochs):
    """Everything that decides the trained weights (``TRAIN__*`` settings)."""

    base_model: str
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.1
    target_modules: tuple[str, ...] = ("query", "value")
    learning_rate: float = 2.3e-5
    temperature: float = 0.0634
    ce_weight: float = 0.915
    pairwise_weight: float = 1.0
    batch_size: int = 4
    epochs: int = 15
    max_steps: int = 0
    checkpoint_every: int = 50
    max_seq_length: int = 256
    seed: int = 0


@dataclass(frozen=True)
class TrainResult:
    """What a training run did: steps, losses, speed, where the adapter is (the one record of
    it: whoever reports a training extends this, never copies its fields)."""

    adapter: Path
    steps: int
    resumed_from: int
    pairs: int
    seconds: float
    pairs_per_second: float
    first_loss: float | None
    last_loss: float | None
    losses: list[float] = field(default_factory=list)
    resume_note: str = ""
    """What was wrong with the checkpoints set aside before resuming (empty when nothing was)."""


def data_digest(pairs: pl.DataFrame) -> str:
    """sha256 of the training rows' texts in order (a triplet's three texts, a paper's title and
    abstract): the identity of the training data."""
    h = hashlib.sha256()
    cols = [c for c in ("anchor_text", "positive_text", "negative_text") if c in pairs.columns] or \
        [c for c in ("paper_id", "title", "abstract") if c in pairs.columns]
    for row in pairs.select(cols).iter_rows():
        h.update(("\x1f".join("" if v is None else str(v) for v in row) + "\x1e").encode())
    return h.hexdigest()


def seed_all(seed: int) -> None:
    """Seed Python's, numpy's and torch's generators."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _encode(model: Any, texts: list[str]) -> Any:
    import torch

    prep = getattr(model, "preprocess", None) or model.tokenize  # tokenize before sentence-transformers 6
    features = prep(texts)
    features = {k: v.to(model.device) if hasattr(v, "to") else v for k, v in features.items()}
    return torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)


def batch_loss(model: Any, batch: pl.DataFrame, cfg: TrainConfig) -> Any:
    """The loss above for one batch of triplets."""
    import torch

    a = _encode(model, batch["anchor_text"].to_list())
    p = _encode(model, batch["positive_text"].to_list())
    n = _encode(model, batch["negative_text"].to_list())
    t = cfg.temperature
    pairwise = torch.nn.functional.softplus(-((a * p).sum(-1) - (a * n).sum(-1)) / t).mean()
    logits = a @ torch.cat([p, n]).T / t
    logits = logits.masked_fill(infonce_mask(batch).to(logits.device), float("-inf"))
    b = batch.height
    infonce = torch.nn.functional.cross_entropy(logits, torch.arange(b, device=logits.device))
    return cfg.pairwise_weight * pairwise + cfg.ce_weight * infonce


def infonce_mask(batch: pl.DataFrame) -> Any:
    """Which in-batch candidates (every positive, then every negative) leave row i's softmax:
    its own positive seen again in another row, an item of the other kind (a paper-centric row
    ranks profiles, a reviewer-centric row papers), and the row's own anchor."""
    import torch

    pos, neg = batch["positive_id"].to_list(), batch["negative_id"].to_list()
    view, anchor = batch["view"].to_list(), batch["anchor_id"].to_list()
    cand, kind = pos + neg, view + view
    b = len(pos)
    return torch.tensor([[j != i and (cand[j] == pos[i] or kind[j] != view[i] or cand[j] == anchor[i])
                          for j in range(2 * b)] for i in range(b)], dtype=torch.bool)


def _lora(model: Any, cfg: TrainConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    hf = model[0].auto_model
    missing = [m for m in cfg.target_modules if not any(name.endswith(m) for name, _ in hf.named_modules())]
    if missing:
        raise ValueError(f"TRAIN__TARGET_MODULES: {missing} name no layer of {cfg.base_model} "
                         "(BERT-style models call them query/value, Qwen-style q_proj/v_proj)")
    # get_peft_model swaps LoRA layers into ``hf`` in place, so the sentence-transformers
    # pipeline around it trains them without being rebuilt.
    return get_peft_model(hf, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                                         target_modules=list(cfg.target_modules), bias="none"))


def batches(n: int, cfg: Any, step: int) -> np.ndarray:
    """Row indices of the batch at ``step`` (``cfg``: an :class:`Epochs` with a ``seed``): each
    epoch is its own seeded permutation."""
    per = cfg.steps_per_epoch(n)
    epoch, k = divmod(step, per)
    order = np.random.default_rng([cfg.seed, epoch]).permutation(n)
    return order[k * cfg.batch_size:(k + 1) * cfg.batch_size]


LossFn = Callable[[Any, pl.DataFrame, TrainConfig, int], Any]
"""A training objective: the loss of one batch of rows at a step (the step seeds what it draws)."""


def triplet_loss(model: Any, batch: pl.DataFrame, cfg: TrainConfig, step: int) -> Any:
    """:func:`batch_loss` as a :data:`LossFn` (RATE's objective)."""
    return batch_loss(model, batch, cfg)


def train(pairs: pl.DataFrame, out: Path, cfg: TrainConfig, card: dict[str, Any] | None = None,
          progress: Progress | None = None, loss_fn: LossFn = triplet_loss) -> TrainResult:
    """Train LoRA adapters on ``pairs`` (weak-supervision triplets, or the rows ``loss_fn``
    reads) into ``out``; resume from ``out/checkpoints`` when a run left one there. The adapter
    and its card land in ``out/adapter``."""
    import torch

    if pairs.height == 0:
        raise ValueError("no training triplets: the weak-supervision set is empty")
    quiet_peft()
    threads = torch.get_num_threads()
    try:
        return _train(pairs, out, cfg, card, progress, loss_fn)
    finally:
        torch.set_num_threads(threads)  # a resume may have pinned another count for the run


def _train(pairs: pl.DataFrame, out: Path, cfg: TrainConfig, card: dict[str, Any] | None,
           progress: Progress | None, loss_fn: LossFn) -> TrainResult:
    import torch

    seed_all(cfg.seed)
    model = load_model(cfg.base_model, half=False)  # full precision for training, also where inference runs in half
    model.max_seq_length = cfg.max_seq_length
    peft_model = _lora(model, cfg)
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=cfg.learning_rate)
    trainable = {k: v for k, v in peft_model.named_parameters() if v.requires_grad}
    total = cfg.total_steps(pairs.height)
    model.train()

    def step_loss(step: int) -> Any:
        return loss_fn(model, pairs[batches(pairs.height, cfg, step).tolist()], cfg, step)

    run = run_loop(step_loss, optimizer, trainable, out / "checkpoints", total, cfg.checkpoint_every,
                   "lower TRAIN__LEARNING_RATE or raise TRAIN__TEMPERATURE", progress)
    seconds, losses, resumed_from = run.seconds, run.losses, run.resumed_from
    done_pairs = sum(len(batches(pairs.height, cfg, s)) for s in range(resumed_from, total))
    adapter = out / ADAPTER_DIR
    tmp = out / ".adapter-tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    peft_model.save_pretrained(str(tmp))
    (tmp / "README.md").unlink(missing_ok=True)  # peft's stub card; the flow writes ours last, as the completion mark
    result = TrainResult(adapter, total, resumed_from, pairs.height, round(seconds, 2),
                         round(done_pairs / seconds, 2) if seconds > 0 else 0.0,
                         losses[0] if losses else None, losses[-1] if losses else None, losses, run.resume_note)
    (tmp / CARD_FILE).write_text(json.dumps({
        "base_model": cfg.base_model, "config": asdict(cfg), "data_sha256": data_digest(pairs), "pairs": pairs.height,
        "steps": total, "first_loss": result.first_loss, "last_loss": result.last_loss, **(card or {}),
    }, indent=2, default=str) + "\n")
    shutil.rmtree(adapter, ignore_errors=True)
    tmp.rename(adapter)
    return result


def training_ids(adapter: str) -> set[str]:
    """Every paper and reviewer id in the triplets an adapter was trained on (``pairs.parquet``
    beside its folder; empty when that file is gone)."""
    pairs = Path(adapter).parent / "pairs.parquet"
    if not pairs.exists():
        return set()
    df = pl.read_parquet(pairs, columns=["anchor_id", "positive_id", "negative_id"])
    return set(df["anchor_id"].to_list()) | set(df["positive_id"].to_list()) | set(df["negative_id"].to_list())
