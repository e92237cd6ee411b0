"""Sentence embeddings with a cache keyed by (model and its files' digest, runtime, precision, token
limit, text hash), on a GPU when one is present (which model a name means, and which files, is
:mod:`revbench.ml.models`'s answer, which runtime encodes is :mod:`revbench.ml.backends`'s)."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from revbench.files import file_sha256, replacing
from revbench.ml.backends import load_encoder, runtime_for
from revbench.ml.models import ModelRef, Runtime, as_ref, check_identity, cut_keys, model_ref
from revbench.ml.recipes import MODELS_SUBDIR

if TYPE_CHECKING:
    from revbench.settings import Settings


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_models: dict[tuple[str, str, str], tuple[str, Any]] = {}
"""(name, runtime, precision) -> (the files' digest, the model loaded from them)"""
_models_lock = threading.Lock()


def _ref(model: str | ModelRef, runtime: Runtime, root: Path | None) -> ModelRef:
    if isinstance(model, ModelRef) and model.runtime == runtime:
        return model
    name = model.name if isinstance(model, ModelRef) else model
    return model_ref(name, runtime, models_dir=root / MODELS_SUBDIR if root else None)


def model_for(model: str | ModelRef, runtime: Runtime = "torch", root: Path | None = None) -> Any:
    """The model ``model`` names (or is, resolved) run by ``runtime``, loaded once per process and
    files (pieces on one worker share it; files that changed since are loaded again); an ONNX
    runtime's export is kept under ``root`` (the cache folder)."""
    ref = _ref(model, runtime, root)
    key = (ref.name, runtime, ref.precision)
    with _models_lock:
        if key not in _models or _models[key][0] != ref.digest:  # new weights, adapter or config: another model
            _models[key] = (ref.digest, load_encoder(ref, runtime, root))
        return _models[key][1]


def check_model(name: str, what: str, runtime: Runtime = "torch", root: Path | None = None,
                stand_ins: bool = False) -> None:
    """Load ``name`` now (it stays loaded for the work that follows), so a model that is not
    there, or files that are not the published model its recipe names (unless ``stand_ins``),
    stop a run before any work, with one line naming ``what`` asked for it."""
    from revbench.errors import UsageError
    from revbench.ml.presence import absent_line

    line = absent_line([name], root / MODELS_SUBDIR if root else None)  # before torch loads, and in one line
    if line:
        raise UsageError(line)
    try:
        ref = _ref(name, runtime, root)
        check_identity(ref, stand_ins)
        model_for(ref, runtime, root)
    except UsageError:
        raise
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"{what} {name!r}: cannot load it ({first[:200]}); give a sentence-transformers name or "
                         "folder, an adapter folder from `revbench train`, or hashing") from None


def encode_piece(model_name: str | ModelRef, items: list[tuple[str, str]], token_budget: int = 0, runtime: Runtime = "torch",
                 root: str | None = None) -> tuple[list[str], np.ndarray]:
    """One embedding piece: unit vectors of ``(text hash, text)`` items, by a model loaded once
    in whichever process (thread or Dask worker) runs it, in ``runtime`` (an ONNX runtime's
    export under ``root``). Returns the hashes and their vectors.

    With a ``token_budget`` (the GPU path) texts go in batches of about that many padded
    tokens (lengths estimated at four characters a token, capped at the model's limit);
    otherwise in batches of 32."""
    try:
        model = model_for(model_name, runtime, Path(root) if root else None)
    except OSError as exc:  # not downloaded where this piece runs (a worker offline, another cache)
        first = (str(exc).strip().splitlines() or [""])[0]
        name = model_name.name if isinstance(model_name, ModelRef) else model_name
        raise OSError(f"model {name} ({runtime}) is not available here: {first}") from exc
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


def export_dir(data_dir: Path, benchmark: str, version: str, model: str | ModelRef, runtime: Runtime = "torch",
               models_dir: Path | None = None) -> Path:
    """Where the embed flow exports one benchmark's vectors by one model (its files' digest, the
    runtime and precision and the token limit it runs with here: :func:`revbench.ml.models.vector_key`)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{benchmark}-{version}")
    return data_dir / "vectors" / safe / as_ref(model, runtime, models_dir).vector_key


class EmbeddingCache:
    """Vectors of texts already embedded by one model in one runtime, stored as parquet shards
    under ``root/embeddings/<vector key>/`` (model and its files' digest, runtime, precision,
    token limit: :func:`revbench.ml.models.vector_key`); only texts never seen are encoded, a
    text given twice is encoded once, and texts the model reads the same once cut at its token
    limit (:func:`revbench.ml.models.cut_keys`) share one vector. ``asked``, ``encoded`` and
    ``shared_by_cut`` count texts asked for, encoded, and served another text's vector.

    The model is resolved once, when the cache is made (:class:`revbench.ml.models.ModelRef`):
    files found for a recipe that are not its published model are refused there unless
    ``stand_ins``."""

    _shared: dict[tuple[str, str], EmbeddingCache] = {}

    @classmethod
    def shared(cls, root: Path, model_name: str | ModelRef, runtime: Runtime = "torch",
               stand_ins: bool = False) -> EmbeddingCache:
        """One cache (and one loaded model) per (root, model and its files, runtime) in this
        process: files changed since are another cache."""
        ref = _ref(model_name, runtime, root)
        check_identity(ref, stand_ins)
        key = (str(root), ref.vector_key)
        if key not in cls._shared:
            cls._shared[key] = cls(root, ref, runtime=runtime, stand_ins=stand_ins)
        return cls._shared[key]

    @classmethod
    def totals(cls) -> tuple[int, int, int]:
        """Texts asked for, encoded, and served another text's vector by the caches of this
        process: the share of encodes saved is ``1 - encoded / asked``."""
        caches = list(cls._shared.values())
        return sum(c.asked for c in caches), sum(c.encoded for c in caches), sum(c.shared_by_cut for c in caches)

    def __init__(self, root: Path, model_name: str | ModelRef, key: str | None = None, runtime: Runtime = "torch",
                 stand_ins: bool = False):
        self.ref = _ref(model_name, runtime, root)
        check_identity(self.ref, stand_ins)
        self.model_name = self.ref.name
        self.runtime = runtime
        self.root = root
        self.dir = root / "embeddings" / (key or self.ref.vector_key)
        self._vectors: dict[str, np.ndarray] = {}
        self._cuts: dict[str, str] = {}
        """cut key -> the text hash whose vector the model gives every text with that key"""
        self._followers: dict[str, list[tuple[str, str]]] = {}
        """text hash about to be encoded -> (text hash, cut key) of texts waiting for its vector"""
        self._preloaded: set[str] = set()
        self.encoded = 0
        self.asked = 0
        self.shared_by_cut = 0
        if self.dir.exists():
            for shard in sorted(self.dir.glob("*.parquet")):
                self._take(pl.read_parquet(shard))

    def _take(self, df: pl.DataFrame, keep: bool = False) -> int:
        """Hold the ``text_hash, vector`` rows of ``df`` (one array per shard: rows are views);
        ``keep`` leaves vectors already held as they are. Returns how many were added."""
        if df.height == 0:
            return 0
        width = len(df["vector"][0])
        matrix = df["vector"].cast(pl.List(pl.Float32)).list.to_array(width).to_numpy()
        before = len(self._vectors)
        if "cut_key" in df.columns:
            cuts = df.filter(pl.col("cut_key").is_not_null())
            self._cuts.update(zip(cuts["cut_key"].to_list(), cuts["text_hash"].to_list(), strict=True))
        if keep:
            self._vectors = {**dict(zip(df["text_hash"].to_list(), matrix, strict=True)), **self._vectors}
        else:
            self._vectors.update(zip(df["text_hash"].to_list(), matrix, strict=True))
        return len(self._vectors) - before

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
            meta = json.loads(manifest.read_text())
            want = meta.get("files", {}).get("vectors.parquet")
            made_by = meta.get("model_digest", self.ref.digest)
        except (ValueError, OSError, AttributeError):
            return 0
        if made_by != self.ref.digest:
            return 0  # another model's vectors (the folder's key says so too): never served for this one
        path = folder / "vectors.parquet"
        if not path.exists() or file_sha256(path) != want:
            return 0  # a damaged or stale export is ignored: the cache and the model still answer
        return self._take(pl.read_parquet(path, columns=["text_hash", "vector"]), keep=True)

    def missing(self, texts: list[str]) -> list[tuple[str, str]]:
        """``(hash, text)`` of the texts to encode, longest first (so batches hold texts of
        similar length): each text never embedded, once, and of texts the model reads the same
        once cut, only one. A text cut like one already embedded gets its vector now."""
        todo: dict[str, str] = {}
        for t in texts:
            h = text_hash(t)
            if h not in self._vectors and h not in todo:
                todo[h] = t
        keys = cut_keys(self.ref, list(todo.values())) if todo else None
        if keys is not None:
            known: list[tuple[str, str]] = []
            first: dict[str, str] = {}
            for h, key in zip(list(todo), keys, strict=True):
                if key in self._cuts and self._cuts[key] in self._vectors:
                    known.append((h, key))
                    del todo[h]
                elif key in first:
                    self._followers.setdefault(first[key], []).append((h, key))
                    del todo[h]
                else:
                    first[key] = h
                    self._followers.setdefault(h, []).insert(0, (h, key))  # the text itself records its key
            if known:
                self._write([h for h, _ in known], np.vstack([self._vectors[self._cuts[k]] for _, k in known]),
                            [k for _, k in known])
                self.shared_by_cut += len(known)
        return sorted(todo.items(), key=lambda ht: -len(ht[1]))

    def add(self, hashes: list[str], vecs: np.ndarray) -> None:
        """Keep vectors encoded elsewhere (a piece), written as their own shard at once, so a
        killed run keeps every finished piece; texts waiting for one of them get it too."""
        if not hashes:
            return
        vecs = np.asarray(vecs, dtype=np.float32)
        rows_h, rows_v, rows_k = [], [], []
        for h, v in zip(hashes, vecs, strict=True):
            waiting = self._followers.pop(h, [])
            if not waiting or waiting[0][0] != h:
                waiting.insert(0, (h, None))  # type: ignore[arg-type]  # encoded without a key
            for f, key in waiting:
                rows_h.append(f)
                rows_v.append(v)
                rows_k.append(key)
        self._write(rows_h, np.vstack(rows_v), rows_k)
        self.encoded += len(hashes)
        self.shared_by_cut += len(rows_h) - len(hashes)

    def _write(self, hashes: list[str], vecs: np.ndarray, keys: list[str | None]) -> None:
        for h, v, k in zip(hashes, vecs, keys, strict=True):
            self._vectors[h] = v
            if k is not None:
                self._cuts.setdefault(k, h)
        self.dir.mkdir(parents=True, exist_ok=True)
        shard = self.dir / f"{len(list(self.dir.glob('*.parquet'))):06d}-{hashes[0][:8]}.parquet"
        with replacing(shard) as tmp:  # a shard is whole or absent
            pl.DataFrame({"text_hash": hashes, "vector": [v.tolist() for v in vecs], "cut_key": keys},
                         schema_overrides={"cut_key": pl.Utf8}).write_parquet(tmp)

    def embed(self, texts: list[str], encode: Callable[[list[str]], np.ndarray] | None = None) -> np.ndarray:
        """Unit vectors for ``texts`` in order, encoding only the missing ones."""
        hashes = [text_hash(t) for t in texts]
        self.asked += len(texts)
        todo = self.missing(texts)
        if todo:
            self.add(*(encode_piece(self.ref, todo, 0, self.runtime, str(self.root)) if encode is None
                       else ([h for h, _ in todo], encode([t for _, t in todo]))))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([self._vectors[h] for h in hashes])


def settings_cache(settings: Settings, model: str | ModelRef) -> EmbeddingCache:
    """The shared cache of ``model`` under the settings' cache folder, encoding in the runtime
    ``REVBENCH_EMBED__BACKEND`` names (``auto`` resolved for this machine): the one door every
    stage that encodes goes through. Files found for a recipe that are not its published model
    are refused here unless ``REVBENCH_EMBED__STAND_INS``."""
    name = model.name if isinstance(model, ModelRef) else model
    return EmbeddingCache.shared(settings.cache_dir, model, runtime_for(settings.embed.backend, settings.cache_dir, name),
                                 stand_ins=settings.embed.stand_ins)
