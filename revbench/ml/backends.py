"""Runtimes of a sentence encoder: PyTorch (sentence-transformers itself), ONNX Runtime in full
precision or with weights quantised to int8, and OpenVINO reading the same ONNX graph.

sentence-transformers has its own ``backend="onnx"|"openvino"``, but it goes through Optimum:
``optimum-onnx`` pins transformers below 4.58 (sentence-transformers 6 runs on transformers 5)
and ``optimum-intel`` pulls a CUDA build of PyTorch. So the model is exported here with
PyTorch's own ONNX exporter and run by ``onnxruntime`` or ``openvino`` directly; tokenising,
pooling and normalising follow the sentence-transformers configuration the export records.

Which model a name means (and what precision it runs in) is :mod:`revbench.ml.models`'s
answer: this module imports it, never the reverse. :func:`load_encoder` is the one place that
picks the runtime's loader.

An export lives in ``<cache>/onnx/<model key>/`` (the graph, its int8 twin, the tokenizer and
``encoder.json``), made once per model and reused by every stage and process; the key carries the
digest of the model's files, so new weights get a new export.

``auto`` (the default of ``REVBENCH_EMBED__BACKEND``) is PyTorch unless ``benchmarks.embed_bench``
measured another runtime on this machine at least :data:`AUTO_SPEEDUP` times faster with the same
results (:func:`pick`); the measurement is kept in ``<cache>/embed-backend.json`` with the
machine it was made on.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import queue
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from revbench.errors import UsageError
from revbench.files import write_atomic
from revbench.ml.models import HASHING_MODEL, ModelRef, Runtime, load_model, model_key, openvino_precision
from revbench.ml.recipes import MODELS_SUBDIR

RUNTIMES: tuple[Runtime, ...] = ("torch", "onnx", "onnx-int8", "openvino")
PACKAGES = {"torch": "torch", "onnx": "onnxruntime", "onnx-int8": "onnxruntime", "openvino": "openvino"}
"""The package each runtime needs (a distribution name)."""
DECISION_FILE = "embed-backend.json"
AUTO_SPEEDUP = 1.3
"""How much faster than PyTorch another runtime must encode for ``auto`` to take it."""
AUTO_MIN_COSINE = 0.99
"""The mean cosine with PyTorch's vectors it must keep."""
AUTO_MAX_LOSS_DELTA = 0.003
"""How far the embedding scorer's loss on the gold-standard sample may move."""
EXPORT_VERSION = 1
"""Bumped when the export's layout or graph changes: older exports are made again."""


def missing_package(runtime: str) -> str | None:
    """The package ``runtime`` needs when it is not installed, else None."""
    try:
        metadata.version(PACKAGES[runtime])
    except metadata.PackageNotFoundError:
        return PACKAGES[runtime]
    return None


def machine() -> dict[str, Any]:
    """What a speed measurement depends on: the CPU, its cores, and the runtimes' versions."""
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), "")
    except OSError:
        pass
    versions = {}
    for pkg in sorted(set(PACKAGES.values())):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {"cpu": cpu, "cores": os.cpu_count(), "versions": versions}


@dataclass(frozen=True)
class Measured:
    """One runtime as ``embed_bench`` measured it against PyTorch on the same texts."""

    runtime: str
    texts_per_s: float
    mean_cosine: float
    loss_delta: float | None
    """Change of the embedding scorer's loss on the gold-standard sample (None: not measured)."""


def pick(rows: list[Measured]) -> tuple[Runtime, str]:
    """The runtime ``auto`` takes from measurements (PyTorch's row among them), and why: the
    fastest one at least AUTO_SPEEDUP times PyTorch's speed with a mean cosine of at least
    AUTO_MIN_COSINE and the loss within AUTO_MAX_LOSS_DELTA; else PyTorch."""
    torch_row = next((r for r in rows if r.runtime == "torch"), None)
    if torch_row is None or torch_row.texts_per_s <= 0:
        return "torch", "no PyTorch measurement to compare with"
    ok = [r for r in rows if r.runtime != "torch" and r.texts_per_s >= AUTO_SPEEDUP * torch_row.texts_per_s
          and r.mean_cosine >= AUTO_MIN_COSINE and r.loss_delta is not None and abs(r.loss_delta) <= AUTO_MAX_LOSS_DELTA]
    if not ok:
        return "torch", (f"no runtime is {AUTO_SPEEDUP}x faster than torch ({torch_row.texts_per_s:.1f} texts/s) with "
                         f"cosine >= {AUTO_MIN_COSINE} and loss within {AUTO_MAX_LOSS_DELTA}")
    best = max(ok, key=lambda r: r.texts_per_s)
    return best.runtime, f"{best.texts_per_s / torch_row.texts_per_s:.2f}x torch, cosine {best.mean_cosine:.4f}"  # type: ignore[return-value]


def write_decision(cache_dir: Path, model: str, rows: list[Measured]) -> dict[str, Any]:
    """Keep ``auto``'s choice for ``model`` on this machine (``embed_bench`` calls this)."""
    runtime, why = pick(rows)
    path = cache_dir / DECISION_FILE
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    entry = {"runtime": runtime, "why": why, "machine": machine(), "rows": [r.__dict__ for r in rows]}
    known = {**(known if isinstance(known, dict) else {}), model_key(model, cache_dir / MODELS_SUBDIR): entry}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(known, indent=2) + "\n")
    _decided.cache_clear()
    return entry


def runtime_for(setting: str, cache_dir: Path, model: str) -> Runtime:
    """The runtime that encodes ``model`` under ``REVBENCH_EMBED__BACKEND=setting``; a named
    runtime whose package is not installed stops here, before any work. ``auto`` follows what
    was measured for these very files (the decision is kept under the model's key)."""
    if setting == "auto":
        return ("torch" if model == HASHING_MODEL
                else _decided(str(cache_dir / DECISION_FILE), model_key(model, cache_dir / MODELS_SUBDIR)))
    if setting not in RUNTIMES:
        raise UsageError(f"REVBENCH_EMBED__BACKEND={setting}: expected one of auto, {', '.join(RUNTIMES)}")
    lacking = missing_package(setting)
    if lacking and model != HASHING_MODEL:
        raise UsageError(f"REVBENCH_EMBED__BACKEND={setting}: the package {lacking} is not installed "
                         f"(pip install {lacking}, or choose torch or auto)")
    return setting  # type: ignore[return-value]


@functools.lru_cache(maxsize=32)
def _decided(path: str, key: str) -> Runtime:
    """What ``embed_bench`` decided for this machine, if it measured this machine and the
    runtime is still installed; PyTorch otherwise."""
    try:
        entry = json.loads(Path(path).read_text()).get(key) or {}
    except (OSError, ValueError, AttributeError):
        return "torch"
    runtime = entry.get("runtime", "torch")
    if runtime not in RUNTIMES or entry.get("machine") != machine() or missing_package(runtime):
        return "torch"
    if runtime != "torch":
        from revbench.ml.models import device

        if device() == "cuda":  # the measurement was of CPU runtimes; PyTorch runs on the GPU
            return "torch"
    return runtime  # type: ignore[no-any-return]


def export_folder(root: Path, name: str | ModelRef) -> Path:
    """Where the ONNX export of model ``name`` is kept (by its key: name and files' digest)."""
    return root / "onnx" / model_key(name, root / MODELS_SUBDIR)


def ensure_export(name: str | ModelRef, root: Path, int8: bool = False) -> Path:
    """The ONNX export of ``name`` (made now if absent or of an older layout), with its int8
    twin when asked. Returns the graph's path. Two processes exporting at once each write a
    folder of their own and the first to finish is kept."""
    folder = export_folder(root, name)
    card = folder / "encoder.json"
    try:
        fresh = json.loads(card.read_text()).get("export_version") == EXPORT_VERSION
    except (OSError, ValueError, AttributeError):
        fresh = False
    if not fresh:
        tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        _export(name, tmp, root)
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        try:
            tmp.rename(folder)
        except OSError:  # another process put its export there first: the same model, kept
            shutil.rmtree(tmp, ignore_errors=True)
    graph = folder / "model.onnx"
    if not int8:
        return graph
    quantised = folder / "model-int8.onnx"
    if not quantised.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        part = folder / f"model-int8.onnx.tmp-{os.getpid()}"
        with _quiet_root_logger():  # the quantiser advises pre-processing through the root logger
            quantize_dynamic(str(graph), str(part), weight_type=QuantType.QInt8)
        part.replace(quantised)  # whole or absent
    return quantised


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    level, quiet = root.level, logging.NullHandler()
    root.addHandler(quiet)  # so that logging.warning() does not install a stderr handler of its own
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
        root.removeHandler(quiet)


def _export(model: str | ModelRef, folder: Path, root: Path) -> None:
    """Export the transformer of ``model`` (as PyTorch loads it: an adapter merged) to ONNX, with
    its tokenizer and what pooling and normalising it needs."""
    import torch

    name = model.name if isinstance(model, ModelRef) else model
    # Identity was judged where the encoder was asked for (the cache, the check, the scorer).
    st = load_model(name, half=False, models_dir=root / MODELS_SUBDIR, stand_ins=True)
    kinds = [type(m).__name__ for m in st]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        raise UsageError(f"model {name!r} ({' -> '.join(kinds)}): the ONNX runtimes run a transformer with mean or CLS "
                         "pooling; use REVBENCH_EMBED__BACKEND=torch for it")
    pooled = st[1].get_config_dict()
    # sentence-transformers 6 names one mode; earlier versions set one flag per mode.
    mode = pooled.get("pooling_mode") or ("mean" if pooled.get("pooling_mode_mean_tokens") else
                                          "cls" if pooled.get("pooling_mode_cls_token") else None)
    if mode not in ("mean", "cls") or not pooled.get("include_prompt", True):
        raise UsageError(f"model {name!r}: the ONNX runtimes pool by mean or CLS token; use REVBENCH_EMBED__BACKEND=torch")
    tokenizer = st.tokenizer
    inputs = [k for k in tokenizer.model_input_names if k in ("input_ids", "attention_mask", "token_type_ids")]
    hf = st[0].auto_model.float().cpu().eval()

    class Hidden(torch.nn.Module):
        # transformers 5 reordered BertModel.forward's positional arguments: inputs go by name.
        def __init__(self) -> None:
            super().__init__()
            self.hf = hf

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.hf(**dict(zip(inputs, tensors, strict=True))).last_hidden_state

    sample = tokenizer(["an example title", "a second, longer example of an abstract"], padding=True, return_tensors="pt")
    folder.mkdir(parents=True)
    axes = {k: {0: "batch", 1: "tokens"} for k in [*inputs, "last_hidden_state"]}
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        # The TorchScript exporter: the dynamo one needs onnxscript and gives the same graph here.
        torch.onnx.export(Hidden(), tuple(sample[k] for k in inputs), str(folder / "model.onnx"), input_names=inputs,
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False)
    tokenizer.save_pretrained(str(folder))
    card = {"export_version": EXPORT_VERSION, "model": name, "max_seq_length": int(st.max_seq_length), "pooling": mode,
            "normalize": "Normalize" in kinds, "inputs": inputs, "pad_id": int(tokenizer.pad_token_id or 0),
            "pad_token": str(tokenizer.pad_token), "dim": int(_dimension(st)),
            "torch": torch.__version__}
    write_atomic(folder / "encoder.json", json.dumps(card, indent=2) + "\n")


def _dimension(st: Any) -> int:
    # sentence-transformers 6 renamed the method; earlier versions know only the old name.
    get = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
    return int(get() or 0)


_FIRST_USE = threading.Lock()


def load_encoder(name: str | ModelRef, runtime: Runtime = "torch", export_root: Path | None = None) -> Any:
    """The model ``name`` means, run by ``runtime``: PyTorch loads it itself
    (:func:`revbench.ml.models.load_model`, half precision on a GPU); another runtime loads the
    model's ONNX export kept under ``export_root`` (made on first use). The hashing encoder has
    no runtime: every one gets it. Whether files found for a recipe are its published model is
    judged before this is asked (the embedding cache, ``check_model``, the scorer): a piece on a
    worker has no settings to judge by."""
    if runtime == "torch" or (name.name if isinstance(name, ModelRef) else name) == HASHING_MODEL:
        return load_model(name, models_dir=export_root / MODELS_SUBDIR if export_root else None, stand_ins=True)
    if export_root is None:
        raise ValueError(f"the {runtime} runtime needs a folder for the model's ONNX export")
    return onnx_encoder(name, runtime, export_root)


def onnx_encoder(name: str | ModelRef, runtime: Runtime, root: Path) -> OnnxEncoder:
    """Model ``name`` run by ``runtime`` (``onnx``, ``onnx-int8`` or ``openvino``) from its ONNX
    export under ``root`` (made on first use)."""
    lacking = missing_package(runtime)
    if lacking:
        raise UsageError(f"REVBENCH_EMBED__BACKEND={runtime}: the package {lacking} is not installed (pip install {lacking})")
    graph = ensure_export(name, root, int8=runtime == "onnx-int8")
    return OnnxEncoder(graph, runtime)


class OnnxEncoder:
    """An exported sentence encoder with sentence-transformers' ``encode`` signature: texts cut
    at the model's token limit, batched longest first, mean- or CLS-pooled, L2-normalised."""

    def __init__(self, graph: Path, runtime: Runtime):
        from tokenizers import Tokenizer

        self.runtime = runtime
        self.card = json.loads((graph.parent / "encoder.json").read_text())
        self.max_seq_length = int(self.card["max_seq_length"])
        self._tokenizer = Tokenizer.from_file(str(graph.parent / "tokenizer.json"))
        # The saved tokenizer may pad every text to a fixed length; pad a batch to its longest.
        self._tokenizer.no_padding()
        self._tokenizer.enable_padding(pad_id=self.card["pad_id"], pad_token=self.card["pad_token"])
        self._tokenizer.enable_truncation(max_length=self.max_seq_length)
        if runtime == "openvino":
            import openvino as ov

            # The precision named in the vectors' key, asked for explicitly.
            hint = "bf16" if openvino_precision() == "bfloat16" else "f32"
            compiled = ov.Core().compile_model(str(graph), "CPU", {"INFERENCE_PRECISION_HINT": hint})
            # A compiled model called directly shares one infer request, which two pieces on the
            # thread runner would use at once ("Infer Request is busy"): a pool of requests, each
            # lent to one caller at a time.
            self.pool_size = min(8, max(2, os.cpu_count() or 2))
            idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
            for _ in range(self.pool_size):
                idle.put(compiled.create_infer_request())
            # The first tensor.data of a process makes pybind11's numpy API table inside a C++
            # static guard: two threads there at once deadlock with the GIL (seen twice in the 160k
            # day-later refresh, every piece waiting at 0% CPU: one thread in __cxa_guard_acquire
            # holding the GIL, one in pybind11's gil_safe_call_once for npy_api waiting for it).
            # One inference here, one thread at a time, makes it before any piece runs.
            with _FIRST_USE:
                warm = idle.get()
                try:
                    one = {"input_ids": self.card["pad_id"], "attention_mask": 1, "token_type_ids": 0}
                    warm.infer({k: np.array([[one[k]]], dtype=np.int64) for k in self.card["inputs"]})
                    np.array(warm.get_output_tensor(0).data, copy=True)
                finally:
                    idle.put(warm)

            def run(feed: dict[str, np.ndarray]) -> np.ndarray:
                request = idle.get()
                try:
                    request.infer(feed)
                    return np.array(request.get_output_tensor(0).data, copy=True)
                finally:
                    idle.put(request)

            self._run = run
        else:
            import onnxruntime as ort

            session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
            self._run = lambda feed: session.run(None, feed)[0]

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.card["dim"])

    def encode(self, texts: list[str], batch_size: int = 32, normalize_embeddings: bool = True, **_: Any) -> np.ndarray:
        """Unit vectors (float32) of ``texts`` in order."""
        out = np.zeros((len(texts), self.get_sentence_embedding_dimension()), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), max(batch_size, 1)):
            idx = order[start:start + batch_size]
            enc = self._tokenizer.encode_batch([texts[i] for i in idx])
            feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
            hidden = np.asarray(self._run({k: feed[k] for k in self.card["inputs"]}), dtype=np.float32)
            if self.card["pooling"] == "cls":
                vecs = hidden[:, 0]
            else:
                mask = feed["attention_mask"][..., None].astype(np.float32)
                vecs = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
            if normalize_embeddings or self.card["normalize"]:
                vecs = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
            out[idx] = vecs
        return out
