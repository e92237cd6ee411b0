"""The embed flow: a benchmark's texts embedded once per model and exported with a manifest; a
second run encodes nothing, and the evaluate flow's embedding scorers read the export instead of
encoding again (here with the cache deleted, so only the export can answer)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from revbench.errors import UsageError
from revbench.flows.embed import embed_flow
from revbench.flows.evaluate import evaluate_flow
from revbench.ml.embeddings import EmbeddingCache, token_batches
from revbench.settings import Settings
from tests.support.evaluation import write_openreview

MODEL = "hashing"  # weightless: the flow's bookkeeping is under test, not a model


def shards(s: Settings) -> list[Path]:
    return sorted((s.cache_dir / "embeddings").rglob("*.parquet"))


def test_embed_twice_then_evaluate_reads_the_export(settings: Settings, tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    first = embed_flow.fn(settings, benchmarks=[f"openreview={data}"], models=[MODEL])
    (row,) = first.rows
    assert row.encoded == row.texts > 0 and row.reused == 0
    export = Path(row.export)
    manifest = json.loads((export / "manifest.json").read_text())
    vectors = pl.read_parquet(export / "vectors.parquet")
    assert manifest["files"]["vectors.parquet"] == hashlib.sha256((export / "vectors.parquet").read_bytes()).hexdigest()
    assert manifest["rows"] == vectors.height == row.texts and manifest["model"] == MODEL
    assert set(manifest["by_kind"]) == {"submission", "profile_paper", "keyword_profile"}
    assert manifest["dim"] == 384 and vectors["vector"].list.len().unique().to_list() == [384]

    EmbeddingCache._shared.clear()  # a new process: nothing in memory
    second = embed_flow.fn(settings, benchmarks=[f"openreview={data}"], models=[MODEL])
    assert second.rows[0].encoded == 0 and second.rows[0].reused == row.texts

    shutil.rmtree(settings.cache_dir / "embeddings")
    EmbeddingCache._shared.clear()
    out = evaluate_flow.fn(settings, benchmarks=[f"openreview={data}"], scorers=[f"embedding:model={MODEL}",
                                                                              f"rate:model={MODEL}"],
                           bootstrap=0, plot=False)
    assert shards(settings) == [], "the evaluate flow encoded texts the export holds"
    assert any(r["scorer"].startswith("embedding") and r["value"] is not None for r in out.rows)


def test_a_damaged_export_is_ignored_not_trusted(settings: Settings, tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    row = embed_flow.fn(settings, benchmarks=[f"openreview={data}"], models=[MODEL]).rows[0]
    export = Path(row.export)
    (export / "vectors.parquet").write_bytes((export / "vectors.parquet").read_bytes()[:-50])
    shutil.rmtree(settings.cache_dir / "embeddings")
    EmbeddingCache._shared.clear()
    evaluate_flow.fn(settings, benchmarks=[f"openreview={data}"], scorers=[f"embedding:model={MODEL}"], bootstrap=0,
                     plot=False)
    assert shards(settings), "a truncated export must not stand in for the encoder"


def test_a_bad_model_or_benchmark_stops_before_any_work(settings: Settings, tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    with pytest.raises(UsageError, match="unknown kind 'nosuch'"):
        embed_flow.fn(settings, benchmarks=[f"nosuch={data}"], models=[MODEL])
    with pytest.raises(UsageError, match=r"--model '/no/such/model': cannot load it"):
        embed_flow.fn(settings, benchmarks=[f"openreview={data}"], models=[MODEL, "/no/such/model"])
    assert not (settings.data_dir / "vectors").exists() and shards(settings) == []


def test_a_truncated_manifest_is_ignored(settings: Settings, tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    row = embed_flow.fn(settings, benchmarks=[f"openreview={data}"], models=[MODEL]).rows[0]
    manifest = Path(row.export) / "manifest.json"
    manifest.write_text(manifest.read_text()[:40])
    shutil.rmtree(settings.cache_dir / "embeddings")
    EmbeddingCache._shared.clear()
    out = evaluate_flow.fn(settings, benchmarks=[f"openreview={data}"], scorers=[f"embedding:model={MODEL}"],
                           bootstrap=0, plot=False)
    assert shards(settings) and any(r["value"] is not None for r in out.rows)


def test_token_batches_keep_within_the_budget() -> None:
    lengths = [10, 200, 30, 200, 5, 120, 60]
    batches = token_batches(lengths, budget=400)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert max(lengths[i] for i in b) * len(b) <= 400 or len(b) == 1
    assert batches[0] == [1, 3]  # the longest go first, two at a time
    assert token_batches([500], budget=100) == [[0]]  # a text over the budget still goes, alone
