"""The encoders' GPU paths on a lent GPU, against the CPU in the same run, with no weights to
download: SPECTER2's recipe (its adapter computed by revbench) on the stand-in fixture the
``adapters`` library made, in full and half precision, and a few contrastive LoRA steps (the
augmentation and factor objectives' training loop) on that stand-in.

Needs only torch, transformers, sentence-transformers, peft and polars (a device image has all
but polars: carry its wheel). Writes one JSON file.

    python benchmarks/gpu_check.py --out benchmarks/results/gpu_check.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "embed" / "fixtures" / "specter2-tiny"


def recipe_check(models: Path) -> dict[str, object]:
    """SPECTER2 by its recipe, loaded where a GPU is present: half precision (the inference
    default there) and full, against the adapters library's vectors."""
    from revbench.ml.models import device, load_model

    ref = json.loads((FIXTURE / "reference.json").read_text())
    want = np.asarray(ref["cls_with_adapter"], dtype=np.float32)
    out: dict[str, object] = {"device": device()}
    for half in (False, True):
        # the fixture's SPECTER2 is a small stand-in (not the published architecture): declared so
        model = load_model("specter2", half=half, models_dir=models, stand_ins=True)
        got = np.asarray(model.encode(ref["texts"], normalize_embeddings=False), dtype=np.float32)
        cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
        out["half" if half else "full"] = {"max_abs_diff": float(np.abs(got - want).max()),
                                           "min_cosine": float(cos.min()), "dtype": str(next(model.parameters()).dtype)}
    return out


def lora_steps(base: str, steps: int, on: str) -> dict[str, float]:
    """``steps`` steps of the augmentation objective on ``on`` (cuda or cpu), seconds per step."""
    import polars as pl
    import torch

    from revbench.ml import models as m
    from revbench.ml.augment import augment_loss
    from revbench.ml.training import TrainConfig, _lora, seed_all

    orig = m.device
    m.device = lambda: on  # type: ignore[assignment]  # the same loop, placed on the asked device
    try:
        cfg = TrainConfig(base_model=base, batch_size=16, max_seq_length=128, learning_rate=1e-3, seed=0)
        seed_all(0)
        model = m.load_model(base, half=False)
        peft = _lora(model, cfg)
        opt = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=cfg.learning_rate)
        words = "retrieval graph protein language reviewer ranking molecule citation expertise learning".split()
        rng = np.random.default_rng(0)
        papers = pl.DataFrame({"paper_id": [f"p{i}" for i in range(16)],
                               "title": [" ".join(rng.choice(words, 5)) for _ in range(16)],
                               "abstract": [". ".join(" ".join(rng.choice(words, 12)) for _ in range(4)) for _ in range(16)]})
        losses, t0 = [], 0.0
        for step in range(steps + 1):
            if step == 1:
                if on == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()  # the first step warms up
            loss = augment_loss(model, papers, cfg, step)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        if on == "cuda":
            torch.cuda.synchronize()
        return {"seconds_per_step": (time.perf_counter() - t0) / steps, "first_loss": losses[0], "last_loss": losses[-1]}
    finally:
        m.device = orig  # type: ignore[assignment]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    import torch

    tmp = Path(tempfile.mkdtemp())
    shutil.copytree(FIXTURE / "base", tmp / "allenai__specter2_base")
    shutil.copytree(FIXTURE / "adapter", tmp / "allenai__specter2")
    result: dict[str, object] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                                 "specter2_recipe": recipe_check(tmp)}
    base = str(tmp / "allenai__specter2_base")
    runs = {"cpu": lora_steps(base, a.steps, "cpu")}
    if torch.cuda.is_available():
        runs["cuda"] = lora_steps(base, a.steps, "cuda")
        runs["cpu_over_cuda"] = {"ratio": runs["cpu"]["seconds_per_step"] / runs["cuda"]["seconds_per_step"]}
    result["augment_lora_steps"] = runs
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
