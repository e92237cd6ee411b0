"""One settings digest for every objective, the same strings the flows wrote before it (a trained
model's folder records its digest: a change would read every one as trained with other
settings), and the one training loop on a tiny module: its checkpoints, progress, resume and
refusal of a loss that is not a number."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from revbench.ml.checkpoint import checkpoints
from revbench.ml.loop import TrainingDiverged, run_loop
from revbench.objectives import OBJECTIVE_NAMES, settings_digest, settings_of
from revbench.settings import Settings, TrainSettings

# What each flow's own settings_digest returned before the table: for a default Settings, and for
# one with a RATE, a LoRA and an attention setting changed (OTHER).
BEFORE = {"rate": "06278a70c1e48ece", "attention": "993bdb6fa23ac9d7", "augment": "b53cc8a3d678f8a2",
          "factors": "b53cc8a3d678f8a2"}
BEFORE_OTHER = {"rate": "3646a0a0ed8927ef", "attention": "0ae3cfa94150270f", "augment": "8b73bee1edb62ca3",
                "factors": "8b73bee1edb62ca3"}
OTHER = {"base_model": "x", "seed": 3, "target_modules": ["q_proj", "v_proj"], "attention_labels": "authorship",
         "negative_ratios": [0.5]}

# The settings tuples the attention and contrastive flows held, as they were.
OLD_ATTENTION = ("base_model", "attention_labels", "attention_experts", "attention_negatives", "attention_learning_rate",
                 "attention_temperature", "attention_batch_size", "anchors", "profile_max_papers", "epochs", "max_steps",
                 "seed")
OLD_CONTRASTIVE = ("base_model", "lora_r", "lora_alpha", "lora_dropout", "target_modules", "learning_rate", "temperature",
                   "batch_size", "epochs", "max_steps", "max_seq_length", "anchors", "seed")


def old_digest(t: TrainSettings, name: str) -> str:
    """The three digests as the flows computed them."""
    if name == "rate":
        return hashlib.sha256(json.dumps(t.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]
    keys = OLD_ATTENTION if name == "attention" else OLD_CONTRASTIVE
    return hashlib.sha256(json.dumps({k: getattr(t, k) for k in keys}, sort_keys=True).encode()).hexdigest()[:16]


def test_the_digest_of_a_default_settings_is_what_each_flow_wrote(settings: Settings) -> None:
    assert settings.train == TrainSettings()
    assert {n: settings_digest(settings, n) for n in OBJECTIVE_NAMES} == BEFORE
    other = settings.with_overrides(train=OTHER)
    assert {n: settings_digest(other, n) for n in OBJECTIVE_NAMES} == BEFORE_OTHER
    for s in (settings, other):
        assert {n: settings_digest(s, n) for n in OBJECTIVE_NAMES} == {n: old_digest(s.train, n) for n in OBJECTIVE_NAMES}


def test_provenance_records_the_settings_each_flow_recorded(settings: Settings) -> None:
    t = settings.train
    assert settings_of(settings, "rate") == t.model_dump(mode="json")
    assert settings_of(settings, "attention") == {k: getattr(t, k) for k in OLD_ATTENTION}
    assert settings_of(settings, "augment") == settings_of(settings, "factors") == {k: getattr(t, k) for k in OLD_CONTRASTIVE}


def _tiny(seed: int = 0):  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(seed)
    w = torch.nn.Parameter(torch.ones(3))
    return w, torch.optim.SGD([w], lr=0.1)


def test_the_loop_checkpoints_every_n_steps_and_at_the_last(tmp_path: Path) -> None:
    w, opt = _tiny()
    seen: list[tuple[int, int]] = []
    run = run_loop(lambda step: (w * (step + 1)).square().sum(), opt, {"w": w}, tmp_path / "ck", 5, 2, "lower it",
                   lambda step, total, loss: seen.append((step, total)))
    assert (run.steps, run.resumed_from, len(run.losses), run.resume_note) == (5, 0, 5, "")
    assert seen == [(s, 5) for s in range(1, 6)]
    assert [p.name for p in checkpoints(tmp_path / "ck")] == ["step-0000004", "step-0000005"]  # the newest two kept
    w2, opt2 = _tiny()
    again = run_loop(lambda step: (w2 * (step + 1)).square().sum(), opt2, {"w": w2}, tmp_path / "ck", 7, 2, "lower it")
    assert (again.steps, again.resumed_from, again.losses[:5]) == (7, 5, run.losses)
    assert [p.name for p in checkpoints(tmp_path / "ck")] == ["step-0000006", "step-0000007"]


def test_the_loop_refuses_a_loss_that_is_not_a_number(tmp_path: Path) -> None:
    w, opt = _tiny()

    def loss(step: int):  # type: ignore[no-untyped-def]
        return w.sum() * (float("nan") if step == 3 else 1.0)

    with pytest.raises(TrainingDiverged, match=r"^the loss is nan at step 4: lower it \(checkpoints up to step 3 are kept\)$"):
        run_loop(loss, opt, {"w": w}, tmp_path / "ck", 6, 2, "lower it")
    assert [p.name for p in checkpoints(tmp_path / "ck")] == ["step-0000002"]


def test_training_diverged_is_still_importable_from_training() -> None:
    from revbench.ml import training

    assert training.TrainingDiverged is TrainingDiverged
