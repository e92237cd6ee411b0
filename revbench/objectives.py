"""The training objectives of ``revbench train --objective NAME``: one entry each, and everything
that names the objectives reads it (the command line's choices, its refusal and its help, each
flow's settings digest, the docs). Adding an objective is one entry here plus its flow
(``docs/extending/objective.md``).

Flows and losses are named as ``module:attribute`` and imported only when an objective runs: the
command line reads this table for ``--help`` and for every other command, and must load neither
Prefect nor torch (``tests/app/test_cold_imports.py`` watches ``revbench evaluate`` for them and
for ``revbench.ml``, which is why the table lives here and not beside the training code).

Every objective trains through the one loop, :func:`revbench.ml.loop.run_loop`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from revbench.settings import Settings

# The TRAIN__* settings that decide a contrastive adapter: LoRA and its training, no RATE recipe.
_CONTRASTIVE = ("base_model", "lora_r", "lora_alpha", "lora_dropout", "target_modules", "learning_rate", "temperature",
                "batch_size", "epochs", "max_steps", "max_seq_length", "anchors", "seed")


@dataclass(frozen=True)
class Objective:
    """One training objective.

    ``flow`` is run as ``flow.run(settings, name=..., replace=..., track=...)`` and writes
    ``DATA_DIR/models/<name>/``; ``rows`` is the file there that holds its training rows, ``data``
    says what they are; ``loss`` is the loss of one batch (the function the loop's step calls);
    ``settings`` are the fields of the ``section`` of the settings that decide the trained model
    (``None``: every field), which its digest, and so a second run's "nothing to do", reads;
    ``doc`` is its line in ``revbench train --help``."""

    name: str
    flow: str
    rows: str
    data: str
    loss: str
    settings: tuple[str, ...] | None
    doc: str
    section: str = "train"

    def runner(self) -> Any:
        """The flow that trains it, importing its module now."""
        return resolve(self.flow)

    def loss_fn(self) -> Any:
        """Its loss of one batch, importing its module now."""
        return resolve(self.loss)


OBJECTIVES: tuple[Objective, ...] = (
    # The first is the default of `revbench train`.
    Objective("rate", "revbench.flows.train:train_flow", "pairs.parquet",
              "weak-supervision triplets (anchor, positive, negative) from keyword profiles, embeddings and BM25; "
              "rated papers held out", "revbench.ml.training:triplet_loss", None,
              "LoRA on weak-supervision triplets (RATE)"),
    Objective("attention", "revbench.flows.train_attention:attention_flow", "labels.parquet",
              "the graph's weak labels on unrated papers (citations or authorship), over the base model's frozen "
              "vectors of the papers and of each reviewer's papers", "revbench.ml.attention:batch_loss",
              ("base_model", "attention_labels", "attention_experts", "attention_negatives", "attention_learning_rate",
               "attention_temperature", "attention_batch_size", "anchors", "profile_max_papers", "epochs", "max_steps",
               "seed"),
              "reviewer attention over a reviewer's papers, on the graph's weak labels"),
    Objective("augment", "revbench.flows.train_contrastive:augment_flow", "papers.parquet",
              "unrated papers with a title or an abstract, two augmented views of each", "revbench.ml.augment:augment_loss",
              _CONTRASTIVE, "contrastive LoRA on two views of each unrated paper"),
    Objective("factors", "revbench.flows.train_contrastive:factors_flow", "pairs.parquet",
              "UniPR's citation, topic and semantic pairs among unrated papers, the query after its factor's instruction",
              "revbench.ml.augment:factor_loss", _CONTRASTIVE,
              "UniPR's factor-aware encoder on citation, topic and semantic pairs"),
)

OBJECTIVE_NAMES: tuple[str, ...] = tuple(o.name for o in OBJECTIVES)
"""The objectives' names, the default first."""


def objective(name: str) -> Objective:
    """The entry of objective ``name`` (KeyError for another name)."""
    for o in OBJECTIVES:
        if o.name == name:
            return o
    raise KeyError(name)


def choices() -> str:
    """The objectives' names as a person reads them: ``rate, attention, augment or factors``."""
    return ", ".join(OBJECTIVE_NAMES[:-1]) + " or " + OBJECTIVE_NAMES[-1] if len(OBJECTIVE_NAMES) > 1 else OBJECTIVE_NAMES[0]


def help_text() -> str:
    """The help of ``--objective``: each objective's name and line."""
    return "; ".join(f"{o.name}: {o.doc}" for o in OBJECTIVES)


def settings_of(settings: Settings, name: str) -> dict[str, Any]:
    """The settings that decide objective ``name``'s model, as its provenance records them."""
    row = objective(name)
    every = getattr(settings, row.section).model_dump(mode="json")
    return every if row.settings is None else {k: every[k] for k in row.settings}


def settings_digest(settings: Settings, name: str) -> str:
    """The digest of :func:`settings_of`, recorded in a trained model's provenance: a folder
    trained with the same digest is done, another is refused without ``--replace``. Changing how
    it is computed makes every trained model's folder read as trained with other settings."""
    return hashlib.sha256(json.dumps(settings_of(settings, name), sort_keys=True).encode()).hexdigest()[:16]


def resolve(ref: str) -> Any:
    """The object a ``module:attribute`` reference names, importing its module now."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
