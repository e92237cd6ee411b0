"""The one training loop every objective runs (``revbench train --objective NAME``): resume from
the newest good checkpoint, then per step the batch's loss, refused when it is not a number,
one optimizer step, the progress callback, and a checkpoint every ``checkpoint_every`` steps and
at the last.

An objective brings its model, optimizer and trainable tensors and the loss of the batch at a
step (the step picks the batch, so a resumed run sees the batches an uninterrupted one would);
the loop owns everything between, so a resumed or diverged run behaves alike for all of them.
``tests/test_structure_objectives.py`` fails on any other module that steps an optimizer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from revbench.errors import RevbenchError
from revbench.ml.checkpoint import resume, write_checkpoint

Progress = Callable[[int, int, float], None]
"""Called after every step with the step done, the total and that step's loss."""


class TrainingDiverged(RevbenchError):
    """The loss stopped being a number; nothing after the last good checkpoint is saved."""


@dataclass(frozen=True)
class LoopResult:
    """What the loop did: the step it ended at (the total), the step it resumed from, every
    step's loss (those before the resume included), the seconds it ran and why checkpoints were
    set aside before resuming (empty when none were)."""

    steps: int
    resumed_from: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    resume_note: str = ""


def run_loop(step_loss: Callable[[int], Any], optimizer: Any, weights: dict[str, Any], ckpt_dir: Path, total: int,
             checkpoint_every: int, diverged_hint: str, progress: Progress | None = None) -> LoopResult:
    """Train until step ``total``: ``step_loss(step)`` is the loss of that step's batch (a scalar
    tensor), ``weights`` the tensors a checkpoint holds, ``diverged_hint`` what the refusal of a
    non-finite loss tells a person to change."""
    import torch

    ckpt_dir.mkdir(parents=True, exist_ok=True)
    start = resume(ckpt_dir, weights, optimizer)
    step, losses = start.step, start.losses
    t0 = time.perf_counter()
    while step < total:
        loss = step_loss(step)
        if not torch.isfinite(loss):
            raise TrainingDiverged(f"the loss is {float(loss.detach())} at step {step + 1}: {diverged_hint} "
                                   f"(checkpoints up to step {step} are kept)")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(step, total, losses[-1])
        if step % checkpoint_every == 0 or step == total:
            write_checkpoint(ckpt_dir, step, weights, optimizer, losses)
    return LoopResult(total, start.step, losses, time.perf_counter() - t0, start.note)
