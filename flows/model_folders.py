"""What every training flow does with its folder under ``data/models/<name>/``: decide whether a
finished model there stands, resumes or is set aside (``--replace``), record the rated papers held
out, write JSON whole, and plot the loss for the curator."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from revbench.errors import UsageError
from revbench.files import write_atomic
from revbench.ml.training import TrainConfig
from revbench.settings import TrainSettings
from revbench.warehouse import utcnow

NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-_.")


def check_name(name: str) -> None:
    """A model folder's name: lower-case letters, digits, '-', '_' and '.', not hidden."""
    if not name or set(name) - NAME_CHARS or name.startswith("."):
        raise UsageError(f"--name {name!r}: lower-case letters, digits, '-', '_' and '.' only")


def train_config(t: TrainSettings) -> TrainConfig:
    """The training part of the settings."""
    return TrainConfig(
        base_model=t.base_model, lora_r=t.lora_r, lora_alpha=t.lora_alpha, lora_dropout=t.lora_dropout,
        target_modules=tuple(t.target_modules), learning_rate=t.learning_rate, temperature=t.temperature,
        ce_weight=t.ce_weight, pairwise_weight=t.pairwise_weight, batch_size=t.batch_size, epochs=t.epochs,
        max_steps=t.max_steps, checkpoint_every=t.checkpoint_every, max_seq_length=t.max_seq_length, seed=t.seed)




@dataclass(frozen=True)
class HeldOut:
    """The rated papers kept out of training: their count and a digest of their sorted ids."""

    papers: int
    sha256: str


def plot_losses(losses: list[float], path: Path) -> None:
    """The training loss per step with a moving average, for the curator's eye."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=110)
    y = np.asarray(losses, dtype=float)
    ax.plot(np.arange(1, len(y) + 1), y, lw=0.6, alpha=0.4, label="per step")
    w = max(1, len(y) // 20)
    if len(y) >= w:
        ax.plot(np.arange(w, len(y) + 1), np.convolve(y, np.ones(w) / w, mode="valid"), lw=1.6, label=f"mean of {w}")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as JSON, whole or not at all."""
    write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def held_out_digest(paper_ids: list[str]) -> HeldOut:
    """The rated papers kept out of training: their count and a digest of their sorted ids."""
    return HeldOut(len(paper_ids), hashlib.sha256("\n".join(sorted(paper_ids)).encode()).hexdigest())


def prepare_folder(out: Path, digest: str, held_out: HeldOut, replace: bool, done_mark: str = "adapter/README.md",
                   what: str = "TRAIN__* settings") -> str | None:
    """Decide what to do with an existing model folder: ``"done"`` when it holds a complete
    model (``done_mark`` present) trained with these settings and the same rated papers held out, ``None`` to
    (re)start or resume. Other settings, or papers rated since (they may have been training
    data), are an error unless ``replace``, which moves the folder under ``models/.replaced/``."""
    prov = out / "provenance.json"
    if not prov.exists():
        return None
    try:
        recorded = json.loads(prov.read_text())
    except ValueError:
        recorded = {}
    same = recorded.get("settings_sha256") == digest
    if same and recorded.get("held_out") == asdict(held_out) and not replace:
        return "done" if (out / done_mark).exists() else None
    if not replace:
        why = (f"other {what}" if not same else
               f"{held_out.papers} rated papers held out now, {recorded.get('held_out', {}).get('papers')} then: "
               "papers rated since may have been its training data")
        raise UsageError(f"{out} holds a model trained with {why}: pass --replace to train again "
                         f"(the old folder is kept under {out.parent / '.replaced'}), or choose another --name")
    aside = out.parent / ".replaced" / f"{out.name}-{utcnow():%Y%m%dT%H%M%S}"
    aside.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(out), str(aside))
    return None


def read_rows(path: Path) -> Any:
    """A training folder's rows (``pairs.parquet``, ``papers.parquet``), or one line saying the
    file is damaged and how to build it again."""
    import polars as pl

    from revbench.errors import InputError

    try:
        return pl.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - polars raises several kinds for a damaged file
        raise InputError(f"{path} is damaged ({type(exc).__name__}): pass --replace to build it again (the damaged "
                         "folder is kept under models/.replaced/)") from None
