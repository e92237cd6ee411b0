"""What the embed flow embeds and exports: a benchmark's texts as the embedding scorers read them,
and the vectors as the export's rows. Pure over benchmarks, frames and arrays; the flow encodes
and writes."""

from __future__ import annotations

import numpy as np
import polars as pl

from revbench.evaluation.model import Benchmark
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.scorers.base import model_text
from revbench.settings import Settings

TEXT_SCHEMA = {"kind": pl.Utf8, "id": pl.Utf8, "text": pl.Utf8}
VECTOR_SCHEMA = {"kind": pl.Utf8, "id": pl.Utf8, "text_hash": pl.Utf8, "vector": pl.List(pl.Float32)}


def benchmark_texts(settings: Settings, bench: Benchmark, model: str) -> pl.DataFrame:
    """``kind, id, text`` of everything an embedding scorer of ``bench`` embeds: submissions,
    profile papers (every draw) and RATE keyword profiles (every draw), each once."""
    rows = [{"kind": "submission", "id": p, "text": t}
            for p, t in zip(bench.submissions["paper_id"].to_list(), model_text(bench.submissions, model), strict=True)]
    rate = make_scorer(f"rate:model={model}", Context(settings))
    for d, draw in enumerate(bench.draws):
        if draw.height == 0:
            continue
        rows += [{"kind": "profile_paper", "id": p, "text": t}
                 for p, t in zip(draw["paper_id"].to_list(), model_text(draw, model), strict=True)]
        rows += [{"kind": "keyword_profile", "id": f"{r}@{d + 1}", "text": t}
                 for r, t in rate.profiles(bench, d).items()]  # type: ignore[attr-defined]
    return pl.DataFrame(rows, schema=TEXT_SCHEMA).unique(maintain_order=True)


def vector_frame(texts: pl.DataFrame, hashes: list[str], vectors: np.ndarray) -> pl.DataFrame:
    """The export's rows: each text's kind, id and hash with its vector (``vectors`` in the order
    of ``texts``)."""
    return pl.DataFrame({"kind": texts["kind"], "id": texts["id"], "text_hash": hashes,
                         "vector": [v.tolist() for v in vectors]}, schema=VECTOR_SCHEMA)


def counts_by_kind(texts: pl.DataFrame) -> dict[str, int]:
    """How many texts of each kind, by kind name."""
    return dict(sorted(texts.group_by("kind").len().iter_rows()))


def export_dtype(device: str, runtime: str) -> str:
    """The precision an export's manifest records (its ``dtype``): on a GPU (``device`` ``cuda``) the
    torch runtime runs the model in half precision, ``float16 weights, float32 vectors``; the
    ``onnx-int8`` runtime's weights are quantised, ``int8 weights, float32 vectors``; anything else
    runs in ``float32``. The vectors exported are float32 whatever the weights."""
    if device == "cuda" and runtime == "torch":
        return "float16 weights, float32 vectors"
    if runtime == "onnx-int8":
        return "int8 weights, float32 vectors"
    return "float32"
