from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl

from revbench.synth.world import BAD_KINDS, WorldSpec, ensure_world, generate_world


def _digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*.parquet")):
        h.update(pl.read_parquet(p).hash_rows().to_numpy().tobytes())
    return h.hexdigest()


def test_same_seed_same_world(tmp_path: Path) -> None:
    spec = WorldSpec(n_papers=80, seed=4)
    generate_world(tmp_path / "a", spec)
    generate_world(tmp_path / "b", spec)
    generate_world(tmp_path / "c", WorldSpec(n_papers=80, seed=5))
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b") != _digest(tmp_path / "c")


def test_world_has_what_later_stages_need(small_world: Path) -> None:
    manifest = json.loads((small_world / "world.json").read_text())
    assert manifest["synthetic"] is True and "SYNTHETIC" in manifest["notice"]
    persons = pl.read_parquet(small_world / "truth" / "persons.parquet")
    mentions = pl.read_parquet(small_world / "truth" / "mentions.parquet")
    assert manifest["counts"]["mentions"] == mentions.height
    assert persons["name"].is_duplicated().any(), "homonyms expected"
    homonyms = persons.filter(pl.col("name").is_duplicated())
    assert homonyms.group_by("name").agg(pl.col("institution").n_unique()).filter(pl.col("institution") > 1).height > 0
    assert (persons["emails"].list.len() > 1).any(), "people with several emails expected"
    assert all(e.endswith(".example") for es in persons["emails"] for e in es), "no deliverable addresses"
    bad = pl.read_parquet(small_world / "truth" / "bad_records.parquet")
    assert set(bad["kind"]) == set(BAD_KINDS)
    docs = pl.read_parquet(small_world / "documents.parquet")
    tei = b"".join(docs["tei"].to_list())
    assert b"MIT CSAIL" in tei or b">MIT<" in tei, "institution aliases expected in PDFs"
    assert b"SYNTHETIC" in tei and b"SYNTHETIC" in docs["pdf"][0]
    for row in pl.read_parquet(small_world / "arxiv.parquet").head(3).iter_rows(named=True):
        assert "SYNTHETIC" in row["versions"][0]["entry"]


def test_ensure_world_reuses(tmp_path: Path) -> None:
    spec = WorldSpec(n_papers=40, seed=1)
    m1 = ensure_world(tmp_path, spec)
    stamp = (tmp_path / "arxiv.parquet").stat().st_mtime_ns
    assert ensure_world(tmp_path, spec) == m1
    assert (tmp_path / "arxiv.parquet").stat().st_mtime_ns == stamp
