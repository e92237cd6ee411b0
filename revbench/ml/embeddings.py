"""Sentence embeddings with a cache keyed by (model, precision, token limit, text hash), on a GPU
when one is present (which model a name means is :mod:`revbench.ml.models`'s answer)."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.files import file_sha256, replacing
from revbench.ml.models import load_model, model_key, vector_key


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_models: dict[str, Any] = {}
_models_lock = threading.Lock()


def model_for(name: str) -> Any:
    """The model ``name``, loaded once per process (pieces on one worker share it)."""
    key = model_key(name)  # a retrained adapter in the same folder is another model
    with _models_lock:
        if key not in _models:
            _models[key] = load_model(name)
        return _models[key]


def check_model(name: str, what: str) -> None:
    """Load ``name`` now (it stays loaded for the work that follows), so a model that is not
    there stops a run before any work, with one line naming ``what`` asked for it."""
    from revbench.errors import UsageError

    try:
        model_for(name)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"{what} {name!r}: cannot load it ({first[:200]}); give a sentence-transformers name or "
                         "folder, an adapter folder from `revbench train`, or hashing") from None


def encode_piece(model_name: str, items: list[tuple[str, str]], token_budget: int = 0) -> tuple[list[str], np.ndarray]:
    """One embedding piece: unit vectors of ``(text hash, text)`` items, by a model loaded once
    in whichever process (thread or Dask worker) runs it. Returns the hashes and their vectors.

    With a ``token_budget`` (the GPU path) texts go in batches of about that many padded
    tokens (lengths estimated at four characters a token, capped at the model's limit);
    otherwise in batches of 32."""
    model = model_for(model_name)
    texts = [t for _, t in items]
    kw = dict(normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    if not token_budget or not texts:
        vecs = model.encode(texts, batch_size=32, **kw)
        return [h for h, _ in items], np.asarray(vecs, dtype=np.float32)
    cap = getattr(model, "max_seq_length", 512) or 512
    out = np.zeros((len(texts), 0), dtype=np.float32)
    for idx in token_batches([min(cap, len(t) // 4 + 2) for t in texts], token_budget):
        v = np.asarray(model.encode([texts[i] for i in idx], batch_size=len(idx), **kw), dtype=np.float32)
        if out.shape[1] == 0:
            out = np.zeros((len(texts), v.shape[1]), dtype=np.float32)
        out[idx] = v
    return [h for h, _ in items], out


def token_batches(lengths: list[int], budget: int, max_batch: int = 256) -> list[list[int]]:
    """Indices of texts (longest first) cut into batches whose padded size, longest text times
    batch length, stays within ``budget`` tokens: long texts go a few at a time, short ones
    many, so memory use stays flat and short texts do not wait on padding."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        longest = lengths[cur[0]] if cur else lengths[i]
        if cur and (longest * (len(cur) + 1) > budget or len(cur) >= max_batch):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


def export_dir(data_dir: Path, benchmark: str, version: str, model: str) -> Path:
    """Where the embed flow exports one benchmark's vectors by one model (in the precision and at
    the token limit it runs with here: :func:`revbench.ml.models.vector_key`)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{benchmark}-{version}")
    return data_dir / "vectors" / safe / vector_key(model)


class EmbeddingCache:
    """Vectors of texts already embedded by one model, stored as parquet shards under
    ``root/embeddings/<vector key>/`` (model, precision, token limit:
    :func:`revbench.ml.models.vector_key`); only texts never seen are encoded, and a text given
    twice is encoded once."""

    _shared: dict[tuple[str, str], EmbeddingCache] = {}

    @classmethod
    def shared(cls, root: Path, model_name: str) -> EmbeddingCache:
        """One cache (and one loaded model) per (root, model) in this process."""
        key = (str(root), vector_key(model_name))
        if key not in cls._shared:
            cls._shared[key] = cls(root, model_name)
        return cls._shared[key]

    def __init__(self, root: Path, model_name: str, key: str | None = None):
        self.model_name = model_name
        self.dir = root / "embeddings" / (key or vector_key(model_name))
        self._vectors: dict[str, np.ndarray] = {}
        self._preloaded: set[str] = set()
        self.encoded = 0
        if self.dir.exists():
            for shard in sorted(self.dir.glob("*.parquet")):
                df = pl.read_parquet(shard)
                for h, v in zip(df["text_hash"].to_list(), df["vector"].to_list(), strict=True):
                    self._vectors[h] = np.asarray(v, dtype=np.float32)

    def preload(self, folder: Path) -> int:
        """Take the vectors of an embed-flow export (``vectors.parquet`` checked against its
        ``manifest.json``) into memory, so texts it holds are not encoded again. Returns how
        many vectors it added; 0 when there is no export or it does not match its manifest."""
        import json

        manifest = folder / "manifest.json"
        if str(folder) in self._preloaded or not manifest.exists():
            return 0
        self._preloaded.add(str(folder))
        try:
            want = json.loads(manifest.read_text()).get("files", {}).get("vectors.parquet")
        except (ValueError, OSError, AttributeError):
            return 0
        path = folder / "vectors.parquet"
        if not path.exists() or file_sha256(path) != want:
            return 0  # a damaged or stale export is ignored: the cache and the model still answer
        df = pl.read_parquet(path, columns=["text_hash", "vector"])
        added = 0
        for h, v in zip(df["text_hash"].to_list(), df["vector"].to_list(), strict=True):
            if h not in self._vectors:
                self._vectors[h] = np.asarray(v, dtype=np.float32)
                added += 1
        return added

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
        with replacing(shard) as tmp:  # a shard is whole or absent
            pl.DataFrame({"text_hash": hashes, "vector": [v.tolist() for v in vecs]}).write_parquet(tmp)
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
