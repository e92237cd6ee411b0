"""RATE-style training on the demo world, on the CPU: training triplets per second, and the trained
scorer against its untrained base on the demo benchmark's held-out ratings, with paired
bootstrap intervals on the differences (the same pairs, resampled together).

The demo world (SYNTHETIC, 300 papers) is built with ``revbench demo`` in its own data folder
the first time. Weak supervision never sees a rated paper; the benchmark is the warehouse's
kept ratings. Both the RATE keyword-profile scorer and the plain embedding scorer are compared,
each with the base model and with the adapter merged in.

    .venv/bin/python -m benchmarks.train_bench [--epochs 2] [--anchors 600] [--lr 1e-4]
    .venv/bin/python -m benchmarks.train_bench --objective attention   # against max, mean and top-3 mean
    .venv/bin/python -m benchmarks.train_bench --objective augment     # the tuned encoder against its base
    .venv/bin/python -m benchmarks.train_bench --objective factors     # cof with the factor-aware encoder against cof

The attention and augmentation objectives never train on a query paper (every rated paper is
one); their results go to ``train-attention.json`` and ``train-augment.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

RESULTS = Path(__file__).resolve().parent / "results"


def ensure_demo(data: Path) -> None:
    if (data / "warehouse.duckdb").exists() and (data / "releases").exists():
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVBENCH_")}
    env["REVBENCH_DATA_DIR"] = str(data)
    print(f"building the demo world in {data} (revbench demo, a few minutes)", flush=True)
    subprocess.run([sys.executable, "-m", "revbench", "demo", "--no-track"], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def rows_of(rows: list[dict[str, Any]], pair: tuple[str, str]) -> list[dict[str, Any]]:
    keep = {"loss", "accuracy", "easy_accuracy", "hard_accuracy"}
    names = {pair[0], pair[1], f"{pair[1]} - {pair[0]}"}
    return [{k: r[k] for k in ("split", "scorer", "metric", "value", "ci_low", "ci_high", "n")}
            for r in rows if r["scorer"] in names and r["metric"] in keep and r["benchmark"] == "warehouse"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=Path("data/bench/train"))
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--anchors", type=int, default=600)
    p.add_argument("--candidates", type=int, default=30)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--objective", choices=["rate", "attention", "augment", "factors"], default="rate")
    p.add_argument("--experts", type=int, default=3, help="attention: candidates wrote more than N papers (demo: 3)")
    a = p.parse_args()
    if a.objective != "rate":
        objective_bench(a)
        return

    data = (a.data / "data").resolve()
    ensure_demo(data)
    from revbench.app.entry import prepare_process
    from revbench.flows.evaluate import evaluate_flow
    from revbench.flows.train import train_flow
    from revbench.ml.models import DEFAULT_MODEL, device
    from revbench.settings import Settings

    train = {"keywords": "yake", "anchors": a.anchors, "candidates": a.candidates, "learning_rate": a.lr,
             "batch_size": a.batch_size, "epochs": a.epochs, "max_seq_length": a.max_seq_length, "seed": a.seed,
             "checkpoint_every": 100}
    s = Settings(data_dir=data).with_overrides(train=train)
    prepare_process(s)
    rss = [0.0]
    t0 = time.perf_counter()
    out = train_flow.fn(s, name="bench", replace=True)
    train_s = time.perf_counter() - t0
    rss[0] = psutil.Process().memory_info().rss / 2**20
    adapter = str(data / "models" / "bench" / "adapter")
    print(f"trained: {out.provenance.triplets} triplets, {out.steps} steps in {out.seconds:.0f} s "
          f"({out.pairs_per_second:.1f} triplets/s); loss {out.first_loss:.3f} -> {out.last_loss:.3f}", flush=True)

    comparisons = {}
    for kind, base in (("rate", f"rate:model={DEFAULT_MODEL},keywords=offline"), ("embedding", f"embedding:model={DEFAULT_MODEL}")):
        tuned = f"{kind}:model={adapter}" + (",keywords=offline" if kind == "rate" else "")
        ev = evaluate_flow.fn(s, benchmarks=["warehouse"], scorers=[base, tuned], baseline=base, bootstrap=a.bootstrap,
                              seed=a.seed, plot=False, report_dir=str(a.data / f"report-{kind}"))
        labels = sorted({r["scorer"] for r in ev.rows if " - " not in r["scorer"]}, key=lambda x: x != kind)
        base_label = next(lbl for lbl in labels if "bench" not in lbl)
        tuned_label = next(lbl for lbl in labels if "bench" in lbl)
        comparisons[kind] = rows_of(ev.rows, (base_label, tuned_label))
        for r in comparisons[kind]:
            if r["split"] in ("pointwise", "average") and r["metric"] in ("loss", "accuracy"):
                ci = f" [{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r["ci_low"] is not None else ""
                print(f"  {kind:9s} {r['split']:10s} {r['metric']:8s} {r['scorer'][:60]:60s} {r['value']:.4f}{ci}", flush=True)

    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores, {device()}",
        "base_model": DEFAULT_MODEL, "settings": train, "train_seconds_with_setup": round(train_s, 1),
        "training": {k: getattr(out, k) for k in ("steps", "seconds", "pairs_per_second", "first_loss", "last_loss")},
        "weak_supervision": {k: getattr(out.provenance, k) for k in ("triplets", "by_view", "skipped", "papers", "reviewers")},
        "peak_rss_mb_after_training": round(rss[0]), "bootstrap": a.bootstrap, "comparisons": comparisons,
    }
    RESULTS.mkdir(exist_ok=True)
    name = "train.json" if device() == "cpu" else f"train-{device()}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {RESULTS / name}")


def compare(s: Any, a: argparse.Namespace, scorers: list[str], baseline: str, tag: str) -> list[dict[str, Any]]:
    """Every scorer against ``baseline`` on the warehouse's kept ratings, paired intervals on the
    differences; prints the average loss and accuracy lines."""
    from revbench.flows.evaluate import evaluate_flow

    ev = evaluate_flow.fn(s, benchmarks=["warehouse"], scorers=scorers, baseline=baseline, bootstrap=a.bootstrap,
                          seed=a.seed, plot=False, report_dir=str(a.data / f"report-{tag}"))
    keep = {"loss", "accuracy", "easy_accuracy", "hard_accuracy"}
    rows = [{k: r[k] for k in ("split", "scorer", "metric", "value", "ci_low", "ci_high", "n")}
            for r in ev.rows if r["metric"] in keep and r["benchmark"] == "warehouse"]
    for r in rows:
        if r["split"] == "average" and r["metric"] in ("loss", "accuracy") and r["value"] is not None:
            ci = f" [{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r["ci_low"] is not None else ""
            print(f"  {r['metric']:8s} {r['scorer'][-70:]:70s} {r['value']:.4f}{ci}", flush=True)
    return rows


def objective_bench(a: argparse.Namespace) -> None:
    """``--objective attention|augment``: train on the demo world, then compare with the base."""
    data = (a.data / "data").resolve()
    ensure_demo(data)
    from revbench.app.entry import prepare_process
    from revbench.ml.models import DEFAULT_MODEL, device
    from revbench.settings import Settings

    train = {"learning_rate": a.lr, "batch_size": a.batch_size, "epochs": a.epochs, "max_seq_length": a.max_seq_length,
             "seed": a.seed, "checkpoint_every": 100, "anchors": a.anchors, "attention_experts": a.experts}
    s = Settings(data_dir=data).with_overrides(train=train)
    prepare_process(s)
    t0 = time.perf_counter()
    if a.objective == "attention":
        from revbench.flows.train_attention import attention_flow

        out = attention_flow.fn(s, name="bench-attention", replace=True)
        base = f"embedding:model={DEFAULT_MODEL}"
        scorers = [base, f"{base},pooling=mean", f"{base},pooling=topk_mean:3", out.scorer]
        trained = {"submissions": out.submissions, "skipped_papers": out.skipped_papers, "steps": out.steps,
                   "first_loss": out.first_loss, "last_loss": out.last_loss, "temperature": out.temperature}
    elif a.objective == "factors":
        from revbench.flows.train_contrastive import factors_flow

        out = factors_flow.fn(s, name="bench-factors", replace=True)
        base = "cof"  # the graph's topic and citation factors beside the base model's semantic one
        scorers = [base, f"cof:encoder={DEFAULT_MODEL}", out.scorer]  # the base model with instructions, untrained
        trained = {"pairs": out.pairs, "steps": out.steps, "seconds": out.seconds,
                   "pairs_per_second": out.pairs_per_second, "first_loss": out.first_loss, "last_loss": out.last_loss}
    else:
        from revbench.flows.train_contrastive import augment_flow

        out = augment_flow.fn(s, name="bench-augment", replace=True)
        base = f"embedding:model={DEFAULT_MODEL}"
        scorers = [base, out.scorer]
        trained = {"papers": out.pairs, "steps": out.steps, "seconds": out.seconds,
                   "papers_per_second": out.pairs_per_second, "first_loss": out.first_loss, "last_loss": out.last_loss}
    train_s = time.perf_counter() - t0
    print(f"trained ({a.objective}) in {train_s:.0f} s: {trained}", flush=True)
    rows = compare(s, a, scorers, base, a.objective)
    result = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores, {device()}",
              "objective": a.objective, "base_model": DEFAULT_MODEL, "settings": train,
              "train_seconds_with_setup": round(train_s, 1), "training": trained, "bootstrap": a.bootstrap,
              "baseline": base, "scorers": scorers, "comparison": rows,
              "peak_rss_mb": round(psutil.Process().memory_info().rss / 2**20)}
    RESULTS.mkdir(exist_ok=True)
    name = f"train-{a.objective}.json" if device() == "cpu" else f"train-{a.objective}-{device()}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {RESULTS / name}")


if __name__ == "__main__":
    main()
