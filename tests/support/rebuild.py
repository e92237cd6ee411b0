"""Helpers of the rebuild tests (plain functions, no fixtures): where the real benchmark samples
are, a writable copy of one, and a small LR-bench-format folder written by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

EXTERNAL = Path(__file__).resolve().parents[3] / "shared" / "external"


def copy_sample(src: Path, dst: Path) -> Path:
    """A writable copy of a sample folder (the samples are read-only, and copytree would copy that)."""
    for p in sorted(src.rglob("*")):
        target = dst / p.relative_to(src)
        if p.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, target)
    return dst


def reviewer(author_id: str, score: int, *titles: str) -> dict[str, Any]:
    """One side of an LR-bench paper-centric tuple: a reviewer, their score and their publications."""
    return {"author_id": author_id, "score": score,
            "papers": [{"title": t, "abstract": f"We study {t.lower()} with experiments."} for t in titles]}


def tiny_items() -> list[dict[str, Any]]:
    """Three paper-centric tuples on two query papers; reviewer r3 lists the first query paper among
    their publications (with other case and spacing), and r1 rates both papers."""
    q1 = {"paper_id": "q1", "paper_title": "Sparse Attention for Long Documents",
          "abstract": "Attention that scales to long documents."}
    q2 = {"paper_id": "q2", "paper_title": "Graph Kernels for Molecules", "abstract": "Kernels on molecular graphs."}
    return [
        {"anchor": q1, "positive": reviewer("r1", 5, "Efficient transformers", "Long-range attention"),
         "negative": reviewer("r2", 2, "Protein folding with graphs"), "type": "paper_centric"},
        {"anchor": q1, "positive": reviewer("r3", 4, "sparse  attention for LONG documents", "Retrieval over documents"),
         "negative": reviewer("r2", 2, "Protein folding with graphs"), "type": "paper_centric"},
        {"anchor": q2, "positive": reviewer("r2", 5, "Protein folding with graphs", "Message passing for chemistry"),
         "negative": reviewer("r1", 1, "Efficient transformers", "Long-range attention"), "type": "paper_centric"},
    ]


def write_lrbench(d: Path, items: list[dict[str, Any]] | None = None) -> Path:
    """A hand-written LR-bench folder (``evaluations_pc.json``) holding ``items`` (default: :func:`tiny_items`)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "evaluations_pc.json").write_text(json.dumps(tiny_items() if items is None else items, indent=1))
    return d
