"""The same texts encoded by the packaged all-MiniLM-L6-v2 in every runtime of
``REVBENCH_EMBED__BACKEND`` that is installed (torch, onnx, onnx-int8, openvino), in one run.

For each runtime: texts per second (the median of ``--repeat`` passes over the texts, after one
warm-up pass), the one-off export and load time, the mean and lowest cosine with PyTorch's
vectors of the same texts, and the embedding scorer's loss on the gold-standard sample with its
change from PyTorch's. The texts are the gold-standard sample's titles and abstracts (the real
ones: ``../shared/external/goldstandard-sample``), cycled to ``--texts``; SYNTHETIC ones when the
sample is absent (and then no loss).

``auto`` takes another runtime than PyTorch only when it is at least 1.3x faster here with a mean
cosine >= 0.99 and the loss within 0.003 (:func:`revbench.ml.backends.pick`); this bench records
that decision for this machine in the data folder's cache, where ``auto`` reads it.

    .venv/bin/python -m benchmarks.embed_bench [--texts 256] [--repeat 3]

Results go to ``benchmarks/results/embed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
GOLD = ROOT.parent / "shared" / "external" / "goldstandard-sample"


def gold_texts(root: Path) -> list[str]:
    """Every distinct title + abstract of the gold-standard sample (submissions and profiles)."""
    texts: dict[str, None] = {}
    for draw in sorted(root.glob("d_20_*")):
        for sub in json.loads((draw / "submissions.json").read_text()).values():
            c = sub.get("content", {})
            texts[f"{c.get('title', '')}. {c.get('abstract', '')}".strip()] = None
        for archive in sorted((draw / "archives").glob("*.jsonl")):
            for line in archive.read_text().splitlines():
                if line.strip():
                    c = json.loads(line).get("content", {})
                    texts[f"{c.get('title', '')}. {c.get('abstract', '')}".strip()] = None
    return [t for t in texts if len(t) > 2]


def synthetic_texts(n: int) -> list[str]:
    from revbench.synth.draw import Generator, WorldSpec

    g = Generator(WorldSpec(seed=4))
    out = []
    for _ in range(n):
        topic = g.choice(g.topic_ids)
        title = g.title(topic)
        out.append(f"{title}. {g.abstract(topic, title)}")
    return out


def gold_loss(runtime: str, data: Path) -> float:
    """The embedding scorer's loss on the gold-standard sample with vectors from ``runtime``."""
    from revbench.flows.evaluate import evaluate_flow
    from revbench.settings import Settings

    s = Settings(data_dir=data).with_overrides(embed={"backend": runtime})
    out = evaluate_flow.fn(s, benchmarks=[f"goldstandard={GOLD}"], scorers=["embedding:model=all-MiniLM-L6-v2"],
                           bootstrap=0, plot=False)
    losses = [r["value"] for r in out.rows if r["metric"] == "loss" and r["value"] is not None]
    if not losses:
        raise SystemExit(f"no loss in the evaluation with {runtime}: {out.rows[:3]}")
    return float(statistics.mean(losses))


def measure(runtime: str, texts: list[str], repeat: int, export_root: Path) -> tuple[dict[str, Any], np.ndarray]:
    from revbench.ml.embeddings import model_for

    t = time.perf_counter()
    model = model_for("all-MiniLM-L6-v2", runtime, export_root)  # type: ignore[arg-type]
    load_s = time.perf_counter() - t
    model.encode(texts[:64], batch_size=32, normalize_embeddings=True, show_progress_bar=False)  # warm-up
    times, vecs = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        vecs = np.asarray(model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False),
                          dtype=np.float32)
        times.append(time.perf_counter() - t)
    assert vecs is not None
    secs = statistics.median(times)
    from revbench.ml.models import resolve_model

    return {"runtime": runtime, "precision": resolve_model("all-MiniLM-L6-v2", runtime=runtime).precision,  # type: ignore[arg-type]
            "load_and_export_s": round(load_s, 2), "encode_s": round(secs, 2),
            "texts_per_s": round(len(texts) / secs, 1)}, vecs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--runtimes", default="torch,onnx,onnx-int8,openvino")
    p.add_argument("--no-decision", action="store_true", help="do not record auto's choice for this machine")
    a = p.parse_args()
    import torch

    from revbench.ml.backends import Measured, machine, missing_package, write_decision
    from revbench.settings import Settings

    runtimes = [r.strip() for r in a.runtimes.split(",") if r.strip()]
    if runtimes[0] != "torch":
        raise SystemExit("--runtimes: torch comes first (the others are compared with it)")
    source = gold_texts(GOLD) if GOLD.exists() else []
    label = f"gold-standard sample ({len(source)} distinct texts)" if source else "SYNTHETIC"
    if not source:
        source = synthetic_texts(a.texts)
    texts = [source[i % len(source)] for i in range(a.texts)]
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ref: np.ndarray | None = None
        ref_loss: float | None = None
        for runtime in runtimes:
            lacking = missing_package(runtime)
            if lacking:
                skipped[runtime] = f"{lacking} is not installed"
                print(f"  {runtime:10s} skipped: {skipped[runtime]}", flush=True)
                continue
            row, vecs = measure(runtime, texts, a.repeat, work / "cache")
            if ref is None:
                ref = vecs
            cos = (vecs * ref).sum(axis=1)
            row["mean_cosine"] = round(float(cos.mean()), 5)
            row["min_cosine"] = round(float(cos.min()), 5)
            if GOLD.exists():
                loss = gold_loss(runtime, work / f"data-{runtime}")
                ref_loss = loss if ref_loss is None else ref_loss
                row["gold_loss"] = round(loss, 5)
                row["loss_delta"] = round(loss - ref_loss, 5)
            rows.append(row)
            print(f"  {runtime:10s} {row['texts_per_s']:7.1f} texts/s  cosine {row['mean_cosine']:.5f} (min {row['min_cosine']:.5f})"
                  f"  loss {row.get('gold_loss', '-')}  (export and load {row['load_and_export_s']} s)", flush=True)
    base = rows[0]["texts_per_s"]
    for r in rows:
        r["speed_vs_torch"] = round(r["texts_per_s"] / base, 2)
    measured = [Measured(r["runtime"], r["texts_per_s"], r["mean_cosine"], r.get("loss_delta")) for r in rows]
    settings = Settings()
    decision = None if a.no_decision else write_decision(settings.cache_dir, "all-MiniLM-L6-v2", measured)
    from revbench.ml.backends import pick

    chosen, why = pick(measured)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {**machine(), "torch_threads": torch.get_num_threads(), "python": sys.version.split()[0]},
        "model": "all-MiniLM-L6-v2 (max 256 tokens)", "texts": a.texts, "source": label, "repeat": a.repeat,
        "batch_size": 32, "rows": rows, "skipped": skipped,
        "auto": {"runtime": chosen, "why": why, "recorded_in": None if decision is None else str(settings.cache_dir)},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "embed.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"auto on this machine: {chosen} ({why})")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
