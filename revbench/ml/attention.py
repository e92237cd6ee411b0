"""Reviewer attention (Neural Architectures for Reviewer Expertise Modelling): a submission
attends over the reviewer's papers instead of taking their max or mean.

For a submission vector ``p`` and the reviewer's paper vectors ``q_1..q_k`` (unit vectors from a
frozen encoder), with a learned projection ``W`` (d x d, starting as the identity) and a learned
temperature ``tau`` (starting at ``temperature``)::

    a_i   = softmax_i( (W p) . q_i / tau )
    score = sum_i a_i * cos(p, q_i)

With ``W = I`` a small ``tau`` gives the max over the papers and a large one the mean; training
learns which of the reviewer's papers a submission should listen to. The loss, per training
submission with candidate reviewers ``C`` of which ``P`` are positive (weak labels), is the
listwise ``-log sum_{r in P} softmax_{r in C}(score_r / LIST_TEMPERATURE)``.

Training is seeded and checkpointed by every objective's loop (:mod:`revbench.ml.loop`): every
``checkpoint_every`` steps the module, the optimizer, the RNG states and the step are written
atomically; a run started again on the same folder resumes from the newest good checkpoint to the
weights of an uninterrupted run. The trained module is read with ``torch.load(weights_only=True)``,
which unpickles tensors and plain containers only, so a planted pickle runs nothing and is refused
in one line.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from revbench.errors import InputError, UsageError
from revbench.files import write_atomic
from revbench.ml.checkpoint import load_weights
from revbench.ml.loop import Progress, run_loop
from revbench.ml.recipes import ATTENTION_CARD_FILE as CARD_FILE
from revbench.ml.recipes import ATTENTION_WEIGHTS_FILE as WEIGHTS_FILE
from revbench.ml.training import Epochs, batches, seed_all

LIST_TEMPERATURE = 0.05
"""The listwise loss's temperature over candidate scores (cosines, so differences are small)."""


@dataclass(frozen=True)
class AttentionConfig(Epochs):
    """Everything that decides the trained module."""

    base_model: str
    dim: int
    learning_rate: float = 1e-3
    temperature: float = 0.1
    batch_size: int = 16
    epochs: int = 15
    max_steps: int = 0
    checkpoint_every: int = 50
    seed: int = 0


@dataclass(frozen=True)
class AttentionExamples:
    """Training data as arrays: ``papers`` (submission vectors, n x d), ``profiles`` (each
    reviewer's paper vectors padded to k: r x k x d, with ``mask`` r x k true where a paper is),
    and per submission its candidate reviewers (indices into ``profiles``) and labels (1/0)."""

    papers: np.ndarray
    profiles: np.ndarray
    mask: np.ndarray
    candidates: list[np.ndarray]
    labels: list[np.ndarray]

    @property
    def n(self) -> int:
        return len(self.candidates)


@dataclass(frozen=True)
class AttentionResult:
    """What a training run did."""

    folder: Path
    steps: int
    resumed_from: int
    submissions: int
    seconds: float
    first_loss: float | None
    last_loss: float | None
    temperature: float
    losses: list[float] = field(default_factory=list, repr=False)
    resume_note: str = ""
    """What was wrong with the checkpoints set aside before resuming (empty when nothing was)."""


class AttentionPool(torch.nn.Module):
    """The learned projection and temperature (see the module's docstring)."""

    def __init__(self, dim: int, temperature: float = 0.1):
        super().__init__()
        self.W = torch.nn.Parameter(torch.eye(dim))
        self.log_tau = torch.nn.Parameter(torch.tensor(float(np.log(temperature))))

    def forward(self, p: torch.Tensor, q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Scores of ``p`` (b x d) against the reviewers ``q`` (b x k x d, ``mask`` b x k)."""
        logits = torch.einsum("bd,bkd->bk", p @ self.W.T, q) / self.log_tau.exp()
        weights = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=1)
        return (weights * torch.einsum("bd,bkd->bk", p, q)).sum(dim=1)


def pad_profiles(vectors: list[np.ndarray], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Each reviewer's paper vectors (a list of k_i x d arrays) as one r x k x d array and its mask."""
    k = max((len(v) for v in vectors), default=1) or 1
    out = np.zeros((len(vectors), k, dim), dtype=np.float32)
    mask = np.zeros((len(vectors), k), dtype=bool)
    for i, v in enumerate(vectors):
        out[i, :len(v)] = v
        mask[i, :len(v)] = True
    return out, mask


def batch_loss(pool: AttentionPool, ex: AttentionExamples, rows: np.ndarray, profiles: torch.Tensor,
               mask: torch.Tensor, papers: torch.Tensor) -> torch.Tensor:
    """The mean listwise loss over the submissions ``rows``."""
    losses = []
    for i in rows.tolist():
        cand = torch.from_numpy(ex.candidates[i])
        lab = torch.from_numpy(ex.labels[i].astype(bool))
        p = papers[i].expand(len(cand), -1)
        s = pool(p, profiles[cand], mask[cand]) / LIST_TEMPERATURE
        losses.append(torch.logsumexp(s, 0) - torch.logsumexp(s[lab], 0))
    return torch.stack(losses).mean()


def train_attention(ex: AttentionExamples, out: Path, cfg: AttentionConfig, card: dict[str, Any] | None = None,
                    progress: Progress | None = None) -> AttentionResult:
    """Train the attention module on ``ex`` into ``out`` (resuming from ``out/checkpoints``); the
    weights and their card land in ``out`` last, the card being the completion mark."""
    if ex.n == 0:
        raise ValueError("no training submissions: no paper has a weak positive among the candidates")
    threads = torch.get_num_threads()
    try:
        return _train(ex, out, cfg, card, progress)
    finally:
        torch.set_num_threads(threads)


def _train(ex: AttentionExamples, out: Path, cfg: AttentionConfig, card: dict[str, Any] | None,
           progress: Progress | None) -> AttentionResult:
    seed_all(cfg.seed)
    pool = AttentionPool(cfg.dim, cfg.temperature)
    opt = torch.optim.Adam(pool.parameters(), lr=cfg.learning_rate)
    weights = dict(pool.named_parameters())
    total = cfg.total_steps(ex.n)
    profiles, mask, papers = torch.from_numpy(ex.profiles), torch.from_numpy(ex.mask), torch.from_numpy(ex.papers)
    run = run_loop(lambda step: batch_loss(pool, ex, batches(ex.n, cfg, step), profiles, mask, papers), opt, weights,
                   out / "checkpoints", total, cfg.checkpoint_every, "lower the learning rate", progress)
    losses = run.losses
    torch.save(pool.state_dict(), out / f".{WEIGHTS_FILE}.tmp")
    (out / f".{WEIGHTS_FILE}.tmp").replace(out / WEIGHTS_FILE)
    tau = float(pool.log_tau.detach().exp())
    result = AttentionResult(out, total, run.resumed_from, ex.n, round(run.seconds, 2), losses[0] if losses else None,
                             losses[-1] if losses else None, tau, losses, run.resume_note)
    write_atomic(out / CARD_FILE, json.dumps({"objective": "attention", "base_model": cfg.base_model,
                                              "config": asdict(cfg), "steps": total, "submissions": ex.n,
                                              "learned_temperature": tau, **(card or {})}, indent=2) + "\n")
    return result


def is_attention(folder: str | Path) -> bool:
    """Whether ``folder`` holds a finished attention module."""
    p = Path(folder)
    return (p / CARD_FILE).is_file() and (p / WEIGHTS_FILE).is_file()


def load_attention(folder: str | Path) -> tuple[AttentionPool, dict[str, Any]]:
    """The trained module in ``folder`` and its card; one line when the folder is not one."""
    p = Path(folder)
    if not is_attention(p):
        raise UsageError(f"pooling=attention:{folder}: no trained attention module there ({CARD_FILE} and {WEIGHTS_FILE}; "
                         "train one with `revbench train --objective attention`)")
    try:
        card = json.loads((p / CARD_FILE).read_text())
        dim = int(card["config"]["dim"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{p / CARD_FILE}: not an attention module's card ({type(exc).__name__}: {exc})") from None
    pool = AttentionPool(dim)
    state = load_weights(p / WEIGHTS_FILE)
    want = {k: tuple(v.shape) for k, v in pool.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}
    if got != want:
        raise InputError(f"{p / WEIGHTS_FILE}: weights {got or 'none'}, an attention module of dimension {dim} has {want}")
    pool.load_state_dict(state)
    pool.eval()
    return pool, card


def attention_scores(pool: AttentionPool, subs: np.ndarray, profile: np.ndarray, rows: list[np.ndarray],
                     cols: np.ndarray) -> np.ndarray:
    """The score of each pair ``e``: submission ``subs[cols[e]]`` attending over the profile rows
    ``rows[e]`` of its reviewer."""
    if not len(cols):
        return np.zeros(0)
    padded, mask = pad_profiles([profile[r] for r in rows], profile.shape[1])
    with torch.no_grad():
        s = pool(torch.from_numpy(subs[cols].astype(np.float32)), torch.from_numpy(padded), torch.from_numpy(mask))
    return s.numpy().astype(np.float64)
