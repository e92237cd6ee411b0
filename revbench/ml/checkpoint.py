"""Training checkpoints that hold data only, and a resume that survives a damaged one.

A checkpoint is a folder ``step-<n>/`` (``n`` zero-padded to 7 digits) written to ``.tmp-<n>/``
and renamed whole, with two files:

- ``state.safetensors``: the trained weights (``weights/<name>``), every tensor of the
  optimizer's state (``optimizer/...``) and torch's and CUDA's generator states (``rng/...``,
  uint8 tensors);
- ``state.json``: the format, the step, the losses so far, the thread count, the weights' names,
  the optimizer's state dict with each tensor replaced by ``{"$tensor": KEY}`` (its
  ``param_groups`` and the non-tensor parts of its state), numpy's and Python's generator states,
  and the size and sha256 of ``state.safetensors``.

Tuples, non-string dict keys and numpy arrays are spelt ``{"$tuple": [...]}``,
``{"$items": [[key, value], ...]}`` and ``{"$ndarray": [...], "dtype": "<u4"}``, so every value
comes back as the type it was written, and a resumed run computes bit for bit what an
uninterrupted one does. Nothing is ever unpickled: a pickle where a checkpoint file belongs (the
``state.pt`` of the format before this one, or one planted there) is refused without being opened
by a loader that could run it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import random
import re
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from revbench.errors import InputError, UsageError

log = logging.getLogger(__name__)

TENSORS_FILE, STATE_FILE = "state.safetensors", "state.json"
CHECKPOINT_FORMAT = "revbench-checkpoint/1"


class CheckpointDamaged(Exception):
    """A checkpoint that cannot be resumed from: ``file`` (in the checkpoint's folder) and ``why``."""

    def __init__(self, file: str, why: str):
        super().__init__(f"{file}: {why}")
        self.file, self.why = file, why


@dataclass(frozen=True)
class Resumed:
    """Where a run starts: the step it resumed from (0: from scratch), the losses up to it, and
    what was wrong with the checkpoints it set aside (empty when nothing was)."""

    step: int = 0
    losses: list[float] = field(default_factory=list)
    note: str = ""


def checkpoints(folder: Path) -> list[Path]:
    """The checkpoints in ``folder`` (``step-<n>`` folders; set-aside and half-written ones are
    not), oldest first."""
    found = [p for p in folder.glob("step-*") if p.is_dir() and p.name[5:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[5:]))


def write_checkpoint(folder: Path, step: int, weights: dict[str, Any], optimizer: Any, losses: list[float],
                     keep: int = 2) -> None:
    """Write ``step``'s checkpoint atomically: ``weights`` and every tensor of the optimizer and
    the generators in ``state.safetensors``, the rest (step, losses, thread count, the optimizer's
    settings, numpy's and Python's generators) in ``state.json``; keep the newest ``keep``."""
    import torch
    from safetensors.torch import save as save_tensors

    tensors: dict[str, Any] = {}
    for name, value in weights.items():
        _encode(value, f"weights/{name}", tensors)
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    state: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT, "step": step, "losses": losses, "threads": torch.get_num_threads(),
        "weights": list(weights), "optimizer": _encode(optimizer.state_dict(), "optimizer", tensors),
        "torch_rng": _encode(torch.get_rng_state(), "rng/torch", tensors), "cuda_rng": _encode(cuda, "rng/cuda", tensors),
        "numpy_rng": _encode(np.random.get_state(), "rng/numpy", tensors),
        "python_rng": _encode(random.getstate(), "rng/python", tensors)}
    data = save_tensors(tensors)
    state["tensors"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    target = folder / f"step-{step:07d}"
    tmp = folder / f".tmp-{step:07d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, content in ((TENSORS_FILE, data), (STATE_FILE, (json.dumps(state) + "\n").encode())):
        with open(tmp / name, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes the checkpoint visible
    tmp.rename(target)  # a checkpoint is whole or absent
    for old in checkpoints(folder)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def read_checkpoint(path: Path, weights: dict[str, Any], optimizer: Any) -> tuple[int, list[float]]:
    """Restore the checkpoint in ``path``: its weights copied into ``weights`` (the live tensors by
    name), the optimizer and every generator restored, the run put back on the thread count it
    started with; returns the step and the losses so far. Raises :class:`CheckpointDamaged`,
    having changed nothing, when the checkpoint is not as written or does not fit."""
    import torch

    state = _read_state(path, weights, optimizer)
    try:
        optimizer.load_state_dict(state["optimizer"])  # checks the groups before it changes anything
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointDamaged(STATE_FILE, f"its optimizer state does not fit ({_first_line(exc)})") from None
    with torch.no_grad():
        for name, target in weights.items():
            target.copy_(state["weights"][name])
    if state["threads"] and state["threads"] != torch.get_num_threads():
        # Float sums split over another number of threads round differently: resume on the
        # thread count the run started with, so its weights come out as if never stopped.
        torch.set_num_threads(int(state["threads"]))
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] is not None and torch.cuda.is_available():
        for i, cuda in enumerate(state["cuda_rng"][:torch.cuda.device_count()]):  # a machine with fewer GPUs
            torch.cuda.set_rng_state(cuda, i)
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
    return state["step"], state["losses"]


def resume(folder: Path, weights: dict[str, Any], optimizer: Any) -> Resumed:
    """Restore the newest good checkpoint in ``folder`` (see :func:`read_checkpoint`). A damaged
    one is named in a warning, set aside as ``damaged-step-<n>`` for a person to look at (never
    deleted), and the one before it tried; with none good the run starts from scratch. The note
    says what happened."""
    damaged: list[tuple[str, str, str]] = []
    for path in reversed(checkpoints(folder)):
        try:
            step, losses = read_checkpoint(path, weights, optimizer)
        except CheckpointDamaged as exc:
            damaged.append((path.name, str(exc), _set_aside(path, exc).name))
            continue
        return Resumed(step, losses, _note(folder, damaged, f"resumed from {path.name}"))
    return Resumed(0, [], _note(folder, damaged, "started from scratch"))


def load_weights(path: Path) -> dict[str, Any]:
    """The state dict ``torch.save`` wrote to ``path``, read with ``weights_only=True`` (tensors and
    plain containers only: a pickle that would build anything else is refused before it runs);
    one line naming the file when it is not such a file."""
    import torch

    try:
        with warnings.catch_warnings():  # torch's aside on a foreign pickle's protocol: the refusal below says it all
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        detail = " ".join(str(exc).split("WeightsUnpickler error:", 1)[-1].split())
        detail = re.split(" Please | Check the doc", detail)[0][:160]  # torch's advice to load it anyway is left out
        raise InputError(f"{path}: not plain saved weights, refused unread by the weights-only loader, nothing in it "
                         f"ran ({detail})") from None
    except Exception as exc:  # noqa: BLE001 - a truncated or foreign file, whatever torch says about it
        raise InputError(f"{path}: not readable as saved weights ({type(exc).__name__}: {_first_line(exc)[:160]})") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise InputError(f"{path}: not a state dict (a {type(state).__name__})")
    return state


def _note(folder: Path, damaged: list[tuple[str, str, str]], then: str) -> str:
    """One line for the run's result (and the log, after ``folder``): which checkpoints were
    damaged, which file and why, where they went and where the run starts."""
    if not damaged:
        return ""
    if len(damaged) == 1:
        name, why, aside = damaged[0]
        note = f"checkpoint {name} is damaged ({why}), set aside as {aside}: {then}"
    else:
        listed = "; ".join(f"{name} ({why})" for name, why, _ in damaged)
        note = f"checkpoints {listed} are damaged, set aside as damaged-<name>: {then}"
    log.warning("%s: %s", folder, note)
    return note


def _set_aside(path: Path, exc: CheckpointDamaged) -> Path:
    aside, n = path.with_name(f"damaged-{path.name}"), 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"damaged-{path.name}-{n}")
    try:
        path.rename(aside)
    except OSError as err:
        raise UsageError(f"{path / exc.file}: {exc.why}, and the checkpoint cannot be moved aside ({err.strerror}): "
                         "move it away and run again") from None
    return aside


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _encode(obj: Any, key: str, tensors: dict[str, Any]) -> Any:
    """``obj`` as JSON, its tensors moved into ``tensors`` under their path from ``key``."""
    import torch

    if isinstance(obj, torch.Tensor):
        tensors[key] = obj.detach().cpu().contiguous().clone()
        return {"$tensor": key}
    if isinstance(obj, np.ndarray):
        return {"$ndarray": obj.tolist(), "dtype": obj.dtype.str}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple | list):
        items = [_encode(v, f"{key}/{i}", tensors) for i, v in enumerate(obj)]
        return {"$tuple": items} if isinstance(obj, tuple) else items
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: _encode(v, f"{key}/{k}", tensors) for k, v in obj.items()}
        return {"$items": [[_encode(k, key, tensors), _encode(v, f"{key}/{k}", tensors)] for k, v in obj.items()]}
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TypeError(f"{key}: a {type(obj).__name__} has no place in a checkpoint")


def _decode(obj: Any, tensors: dict[str, Any]) -> Any:
    """The inverse of :func:`_encode`; builds nothing but containers, numbers and arrays."""
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "$tensor" in obj:
        return tensors[obj["$tensor"]]
    if "$tuple" in obj:
        return tuple(_decode(v, tensors) for v in obj["$tuple"])
    if "$ndarray" in obj:
        dtype = np.dtype(obj["dtype"])
        if dtype.kind not in "biuf":
            raise ValueError(f"an array of {dtype}")
        return np.asarray(obj["$ndarray"], dtype=dtype)
    if "$items" in obj:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["$items"]}
    return {k: _decode(v, tensors) for k, v in obj.items()}


def _read_file(path: Path, name: str) -> bytes:
    try:
        return (path / name).read_bytes()
    except FileNotFoundError:
        raise CheckpointDamaged(name, "missing") from None
    except OSError as exc:
        raise CheckpointDamaged(name, f"unreadable ({exc.strerror})") from None


def _is_pickle(data: bytes) -> bool:
    """Whether ``data`` (a file that is not what was written) starts as ``torch.save``'s zip or a
    pickle of protocol 2 to 5 does: said by name, never loaded."""
    return data.startswith(b"PK\x03\x04") or (data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"))


def _read_state(path: Path, weights: dict[str, Any], optimizer: Any) -> dict[str, Any]:
    """Everything in the checkpoint at ``path``, checked against its own record and against the
    live ``weights`` and ``optimizer``, with nothing restored yet."""
    from safetensors.torch import load as load_tensors

    if (path / "state.pt").exists():
        raise CheckpointDamaged("state.pt", "a pickle (the checkpoint format before safetensors), not read: a pickle "
                                "can run code")
    raw = _read_file(path, STATE_FILE)
    try:
        state = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise CheckpointDamaged(STATE_FILE, "a pickle, not read (a pickle can run code)" if _is_pickle(raw)
                                else f"does not parse, truncated or not JSON ({_first_line(exc)})") from None
    ok = (isinstance(state, dict) and state.get("format") == CHECKPOINT_FORMAT and isinstance(state.get("step"), int)
          and isinstance(state.get("losses"), list) and isinstance(state.get("tensors"), dict)
          and all(isinstance(x, int | float) for x in state["losses"])
          and isinstance(state.get("weights"), list) and isinstance(state.get("threads"), int | None))
    if not ok:
        raise CheckpointDamaged(STATE_FILE, f"not a {CHECKPOINT_FORMAT} state")
    if state["step"] != int(path.name[5:]) or len(state["losses"]) != state["step"]:
        raise CheckpointDamaged(STATE_FILE, f"step {state['step']} with {len(state['losses'])} losses in {path.name}")
    data, want = _read_file(path, TENSORS_FILE), state["tensors"]
    if len(data) != want.get("bytes") or hashlib.sha256(data).hexdigest() != want.get("sha256"):
        raise CheckpointDamaged(TENSORS_FILE, "a pickle, not read (a pickle can run code)" if _is_pickle(data)
                                else f"truncated ({len(data)} of {want.get('bytes')} bytes)"
                                if isinstance(want.get("bytes"), int) and len(data) < want["bytes"]
                                else "not the file written with this checkpoint (its size or sha256 differs)")
    try:
        tensors = load_tensors(data)
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error for every malformed header
        raise CheckpointDamaged(TENSORS_FILE, f"not safetensors ({_first_line(exc)})") from None
    try:
        out = {k: _decode(state[k], tensors) for k in ("optimizer", "torch_rng", "cuda_rng", "numpy_rng", "python_rng")}
        out["weights"] = {name: tensors[f"weights/{name}"] for name in state["weights"]}
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise CheckpointDamaged(STATE_FILE, f"does not match {TENSORS_FILE} ({type(exc).__name__}: {exc})") from None
    _check_fit(out, weights, optimizer)
    return {**out, "step": state["step"], "losses": [float(x) for x in state["losses"]], "threads": state["threads"]}


def _check_fit(state: dict[str, Any], weights: dict[str, Any], optimizer: Any) -> None:
    """That the read weights, optimizer state and generator states can be restored as they are."""
    import torch

    saved = state["weights"]
    if set(saved) != set(weights):
        odd = sorted(set(saved) ^ set(weights))
        raise CheckpointDamaged(TENSORS_FILE, f"its weights are not this model's ({len(odd)} differ, e.g. {odd[0]})")
    for name, live in weights.items():
        if saved[name].shape != live.shape or saved[name].dtype != live.dtype:
            raise CheckpointDamaged(TENSORS_FILE, f"{name} is {tuple(saved[name].shape)} {saved[name].dtype}, the model's "
                                    f"{tuple(live.shape)} {live.dtype}")
    try:
        groups = state["optimizer"]["param_groups"]
        params = dict(zip([i for g in groups for i in g["params"]],
                          [p for g in optimizer.param_groups for p in g["params"]], strict=True))
        if [len(g["params"]) for g in groups] != [len(g["params"]) for g in optimizer.param_groups]:
            raise ValueError("other parameter groups")
        for i, entry in state["optimizer"]["state"].items():
            if any(isinstance(v, torch.Tensor) and v.dim() and v.shape != params[i].shape for v in entry.values()):
                raise ValueError(f"parameter {i}'s state has another shape")
        torch.Generator().set_state(state["torch_rng"])
        if state["cuda_rng"] is not None and not all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8
                                                     for t in state["cuda_rng"]):
            raise ValueError("a CUDA generator state that is not bytes")
        np.random.RandomState().set_state(state["numpy_rng"])
        random.Random().setstate(state["python_rng"])
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        raise CheckpointDamaged(STATE_FILE, f"does not fit this run ({type(exc).__name__}: {_first_line(exc)})") from None
