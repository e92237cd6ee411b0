"""Whether the models a run names are on this machine, asked before anything loads.

A scorer or a flow asks here first, so a model that is not here stops the run in one line (exit 2)
naming every such model and how to bring it, before torch or sentence-transformers are imported
and before any work: a recipe's weights and adapter (:func:`revbench.ml.recipes.missing_parts`),
a trained adapter's base, and a Hugging Face hub name (``allenai/scibert_scivocab_uncased``) that
is not in the Hugging Face cache while downloads are off (``HF_HUB_OFFLINE``, which revbench sets
unless the user did). Left to sentence-transformers, such a name fails only after torch loaded and
the hub was asked, with a generic ``OSError``. Only files are read; nothing reaches the network.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from revbench.ml.models import CARD_FILE, DEFAULT_MODEL, HASHING_MODEL
from revbench.ml.recipes import RECIPES, fetch_advice, hf_cached, looked_in, missing_parts, recipe

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
"""A Hugging Face repository id (``name`` or ``org/name``), as opposed to a path."""
PACKAGED = (HASHING_MODEL, DEFAULT_MODEL, "minilm")
"""Names whose files ship with revbench (or that have none): always here."""


def downloads_off() -> bool:
    """Whether the Hugging Face hub may not be asked: ``HF_HUB_OFFLINE`` (or transformers' own
    ``TRANSFORMERS_OFFLINE``) set true, read as huggingface_hub reads it."""
    return any(os.environ.get(v, "").upper() in {"1", "ON", "YES", "TRUE"} for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _recipe_of_repo(name: str) -> str:
    """Where a hub name is a recipe's weights or adapter: the recipe to name instead (its hub
    repository alone is another model: no adapter, mean pooling)."""
    for r in RECIPES.values():
        if name in (r.repo, r.adapter):
            part = "adapter" if name == r.adapter else "weights"
            return f" ({name} is the {part} of the published {r.name}: model={r.name} runs its recipe)"
    return ""


def absent(name: str, models_dir: Path | None) -> tuple[str, list[str], bool] | None:
    """What of model ``name`` is not on this machine: the words, the repositories to download and
    whether it is a hub name; None when it is here, can still be downloaded (downloads on), or is a
    path (which loading reports as it is)."""
    if name in PACKAGED:
        return None
    r = recipe(name)
    if r is not None:
        parts = missing_parts(r, models_dir)
        return None if parts is None else (parts[0], parts[1], False)
    path = Path(name).expanduser()
    card = path / CARD_FILE  # a trained adapter: absent only through its base
    if card.is_file():
        try:
            base = str(json.loads(card.read_text())["base_model"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # loading says what is wrong with the card
        got = absent(base, models_dir)
        return None if got is None else (f"the base of the adapter {name}, {got[0]}", got[1], got[2])
    if path.exists() or not HUB_ID.match(name) or not downloads_off() or hf_cached(name) is not None:
        return None
    where = looked_in(name, None)
    return (f"{name}: no folder of that name, not in {where}, and downloads are off (HF_HUB_OFFLINE)"
            f"{_recipe_of_repo(name)}", [name], True)


def absent_line(names: Sequence[str], models_dir: Path | None) -> str | None:
    """One line naming every model of ``names`` whose files are not on this machine (see
    :func:`absent`) and how to bring them; None when all are here."""
    missing = [got for got in (absent(n, models_dir) for n in dict.fromkeys(names)) if got is not None]
    if not missing:
        return None
    repos = list(dict.fromkeys(repo for _, rs, _ in missing for repo in rs))
    advice = fetch_advice(repos, folders=any(not hub for _, _, hub in missing), hub=any(hub for _, _, hub in missing))
    words = "; ".join(w for w, _, _ in missing)
    head = "model" if len(missing) == 1 else f"{len(missing)} models are not here:"
    return f"{head} {words}; {advice}"
