"""Self-supervised fine-tuning by augmentation (Neural Architectures for Reviewer Expertise
Modelling): two views of one paper should embed closer to each other than to the batch's other
papers.

For each paper of a batch, at training step ``s``, with a generator seeded by ``(seed, s, row)``:

- view A is the title;
- view B is the abstract with each sentence dropped with probability ``SENTENCE_DROP`` (one is
  always kept), then one span of ``SPAN_SHARE`` of its words replaced by the tokenizer's mask token.

A paper without a title, or without an abstract, gives two augmented abstracts, or two copies
of its title. The loss is the symmetric in-batch InfoNCE at the training temperature ``t``::

    loss = (CE(A B^T / t, I) + CE(B A^T / t, I)) / 2

LoRA, checkpoints, resume and the saved adapter are :func:`revbench.ml.training.train`'s; the
adapter scores as ``embedding:model=PATH``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from revbench.ml.training import TrainConfig, _encode

SENTENCE_DROP = 0.3
SPAN_SHARE = 0.15
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentence_dropout(text: str, rng: np.random.Generator, p: float = SENTENCE_DROP) -> str:
    """``text`` with each sentence dropped with probability ``p``; at least one sentence stays."""
    sentences = [s for s in _SENTENCE.split(text.strip()) if s]
    if len(sentences) <= 1:
        return text.strip()
    keep = rng.random(len(sentences)) >= p
    if not keep.any():
        keep[rng.integers(len(sentences))] = True
    return " ".join(s for s, k in zip(sentences, keep, strict=True) if k)


def span_mask(text: str, rng: np.random.Generator, mask: str, share: float = SPAN_SHARE) -> str:
    """``text`` with one contiguous span of ``share`` of its words (at least one) replaced by ``mask``."""
    words = text.split()
    if len(words) < 2:
        return text
    n = max(1, round(share * len(words)))
    start = int(rng.integers(0, len(words) - n + 1))
    return " ".join(words[:start] + [mask] * n + words[start + n:])


def views(title: str | None, abstract: str | None, rng: np.random.Generator, mask: str) -> tuple[str, str]:
    """The two views of one paper (see the module's docstring)."""
    title, abstract = (title or "").strip(), (abstract or "").strip()

    def augmented() -> str:
        return span_mask(sentence_dropout(abstract, rng), rng, mask)

    if title and abstract:
        return title, augmented()
    if abstract:
        return augmented(), augmented()
    return title, title


def mask_token(model: Any) -> str:
    """The tokenizer's mask token (``[MASK]`` for BERT-style models)."""
    return str(getattr(model.tokenizer, "mask_token", None) or "[MASK]")


def augment_loss(model: Any, batch: pl.DataFrame, cfg: TrainConfig, step: int) -> Any:
    """The symmetric InfoNCE of one batch of papers (``paper_id, title, abstract``) at ``step``."""
    import torch

    mask = mask_token(model)
    pairs = [views(t, a, np.random.default_rng([cfg.seed, step, i]), mask)
             for i, (t, a) in enumerate(zip(batch["title"].to_list(), batch["abstract"].to_list(), strict=True))]
    a = _encode(model, [p[0] for p in pairs])
    b = _encode(model, [p[1] for p in pairs])
    logits = a @ b.T / cfg.temperature
    target = torch.arange(len(pairs), device=logits.device)
    return (torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.T, target)) / 2


def factor_loss(model: Any, batch: pl.DataFrame, cfg: TrainConfig, step: int) -> Any:
    """UniPR's factor-aware objective on one batch of pairs (``factor, query_text, doc_text``):
    each query, after its factor's instruction, should embed closest to its own document among
    the batch's documents (in-batch InfoNCE at the training temperature); a document that is
    another row's too is masked out of the rows it is not the positive of."""
    import torch

    from revbench.ml.recipes import instruction_prefix

    prefixes = {f: instruction_prefix(f)[0] for f in set(batch["factor"].to_list())}
    q = _encode(model, [prefixes[f] + t for f, t in zip(batch["factor"].to_list(), batch["query_text"].to_list(), strict=True)])
    d = _encode(model, batch["doc_text"].to_list())
    logits = q @ d.T / cfg.temperature
    docs = batch["doc_id"].to_list()
    same = torch.tensor([[j != i and docs[j] == docs[i] for j in range(len(docs))] for i in range(len(docs))], dtype=torch.bool)
    logits = logits.masked_fill(same.to(logits.device), float("-inf"))
    return torch.nn.functional.cross_entropy(logits, torch.arange(len(docs), device=logits.device))
