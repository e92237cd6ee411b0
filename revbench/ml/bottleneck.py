"""SPECTER2's proximity adapter, loaded from the files the ``adapters`` library (AdapterHub) saves.

Why not the library itself: every ``adapters`` release pins ``transformers`` 4.x (1.3.0:
``~=4.57.6``) and imports names that transformers 5 and huggingface_hub 1 removed. Its BERT
model class cannot even be built on the transformers revbench installs, and upstream has no
support for 5.x yet (adapter-hub/adapters#834). peft has no bottleneck adapters. So this module
computes the one adapter the recipe needs, the Pfeiffer bottleneck after each layer's
feed-forward block, from the library's own files. It refuses any configuration it does not
compute exactly.

A test compares the vectors with ones the library computed on the same files, in an
environment pinned to its transformers version (``tests/embed/fixtures/specter2-tiny``).

With the Pfeiffer configuration (``original_ln_before``, ``residual_before_ln``,
``original_ln_after``, the adapter's residual added after it, no adapter layer norms, no
gating, scaling 1), a layer's output block computes, for the feed-forward output ``h`` (dense,
dropout) and the attention output ``x``::

    LN(up(relu(down(LN(h + x)))) + h + x)

``LN`` is the block's own LayerNorm, used twice. Without the adapter the block computes
``LN(h + x)``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from revbench.errors import UsageError
from revbench.ml.checkpoint import load_weights

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "pytorch_adapter.bin"
PFEIFFER = {"mh_adapter": False, "output_adapter": True, "non_linearity": "relu", "original_ln_before": True,
            "original_ln_after": True, "residual_before_ln": True, "adapter_residual_before_ln": False,
            "ln_before": False, "ln_after": False}
"""The configuration computed here; each key must be present with this value."""
DEFAULTS = {"scaling": 1.0, "use_gating": False, "phm_layer": False, "stochastic_depth": 0.0, "is_parallel": False,
            "inv_adapter": None, "leave_out": []}
"""Keys an older save may lack: absent, they mean this (the library's defaults); present, they must."""
_KEY = re.compile(r"^(?:bert\.)?encoder\.layer\.(\d+)\.output\.adapters\.([^.]+)\.(adapter_down\.0|adapter_up)\.(weight|bias)$")


def read_adapter(folder: Path) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The adapter's configuration and its weights by layer (``down.weight``, ``down.bias``,
    ``up.weight``, ``up.bias``), checked: one line naming the file and what does not fit."""
    try:
        saved = json.loads((folder / CONFIG_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{folder / CONFIG_FILE}: not a readable adapter configuration ({exc})") from None
    cfg = saved.get("config", saved) if isinstance(saved, dict) else None
    if not isinstance(cfg, dict):
        raise UsageError(f"{folder / CONFIG_FILE}: no adapter configuration in it")
    wrong = [f"{k}={cfg.get(k)!r} (computed here: {v!r})" for k, v in PFEIFFER.items() if cfg.get(k) != v]
    wrong += [f"{k}={cfg[k]!r} (computed here: {v!r})" for k, v in DEFAULTS.items() if k in cfg and cfg[k] != v]
    if wrong:
        raise UsageError(f"{folder / CONFIG_FILE}: a bottleneck adapter this loader does not compute: {', '.join(wrong)}")
    state = load_weights(folder / WEIGHTS_FILE)  # weights_only: a planted pickle is refused unrun
    layers: dict[int, dict[str, Any]] = {}
    names = set()
    for key, tensor in state.items():
        m = _KEY.match(key)
        if m is None or not isinstance(tensor, torch.Tensor):
            raise UsageError(f"{folder / WEIGHTS_FILE}: unexpected weight {key!r} (an output adapter has down and up "
                             "projections only)")
        names.add(m.group(2))
        part = "down" if m.group(3).startswith("adapter_down") else "up"
        layers.setdefault(int(m.group(1)), {})[f"{part}.{m.group(4)}"] = tensor
    if len(names) != 1:
        raise UsageError(f"{folder / WEIGHTS_FILE}: expected one adapter's weights, found {sorted(names) or 'none'}")
    for i, w in sorted(layers.items()):
        if set(w) != {"down.weight", "down.bias", "up.weight", "up.bias"}:
            raise UsageError(f"{folder / WEIGHTS_FILE}: layer {i} lacks {sorted({'down.weight', 'down.bias', 'up.weight', 'up.bias'} - set(w))}")
    return cfg, layers


def attach(model: Any, folder: Path) -> int:
    """Put the adapter in ``folder`` after the feed-forward block of each layer of the BERT
    ``model`` that it has weights for. Returns how many layers got one."""
    cfg, layers = read_adapter(folder)
    blocks = model.encoder.layer
    hidden = model.config.hidden_size
    leave_out = set(cfg.get("leave_out") or [])
    missing = [i for i in range(len(blocks)) if i not in layers and i not in leave_out]
    if missing or any(i >= len(blocks) for i in layers):
        raise UsageError(f"{folder / WEIGHTS_FILE}: weights for layers {sorted(layers)}, the model has {len(blocks)}")
    for i, w in layers.items():
        bottleneck = w["down.weight"].shape[0]
        if tuple(w["down.weight"].shape) != (bottleneck, hidden) or tuple(w["up.weight"].shape) != (hidden, bottleneck):
            raise UsageError(f"{folder / WEIGHTS_FILE}: layer {i}'s projections {tuple(w['down.weight'].shape)} and "
                             f"{tuple(w['up.weight'].shape)} do not fit hidden size {hidden}")
        block = blocks[i].output
        adapted = _AdaptedOutput(block, bottleneck, hidden)
        with torch.no_grad():
            adapted.down.weight.copy_(w["down.weight"])
            adapted.down.bias.copy_(w["down.bias"])
            adapted.up.weight.copy_(w["up.weight"])
            adapted.up.bias.copy_(w["up.bias"])
        blocks[i].output = adapted.to(block.dense.weight.dtype)
    return len(layers)


class _AdaptedOutput(torch.nn.Module):
    """A BERT layer's output block with the Pfeiffer adapter (see the module's docstring)."""

    def __init__(self, block: Any, bottleneck: int, hidden: int):
        super().__init__()
        self.dense, self.dropout, self.LayerNorm = block.dense, block.dropout, block.LayerNorm
        self.down = torch.nn.Linear(hidden, bottleneck)
        self.up = torch.nn.Linear(bottleneck, hidden)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        h = self.dropout(self.dense(hidden_states))
        adapted = self.up(torch.relu(self.down(self.LayerNorm(h + input_tensor)))) + h
        return self.LayerNorm(adapted + input_tensor)
