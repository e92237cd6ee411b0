"""Which benchmarks of the results page are SYNTHETIC: every benchmark built from a simulated
world, not only its release (the warehouse's own benchmark, the weak benchmark built from it, the
release's JSON read back as LR-bench, a cross-benchmark average with any of them among its parts),
and none read from elsewhere."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from revbench.app.results_page import synthetic_versions
from revbench.evaluation.importers.lrbench import load_lrbench, lrbench_version
from revbench.settings import Settings
from tests.support.rebuild import tiny_items, write_lrbench


def results(keys: list[tuple[str, str]]) -> pl.DataFrame:
    """One loss row per (benchmark, version)."""
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    return pl.DataFrame([dict(benchmark=b, version=v, split="average", scorer="tpms", metric="loss", value=0.3, n=2,
                              run_id="run-1", evaluated_at=when) for b, v in keys])


def release(settings: Settings, version: str, synthetic: bool | None, items: list | None = None) -> str:
    """A release folder with its JSON in LR-bench's format and a manifest (its ``synthetic`` flag
    left out when None, as releases made before the flag); returns the version its LR-bench
    reading gets."""
    folder = write_lrbench(settings.releases_dir / version, items)
    flag = {} if synthetic is None else {"synthetic": synthetic}
    (folder / "manifest.json").write_text(json.dumps({"version": version, **flag}))
    v = lrbench_version(folder)
    assert v is not None
    return v


def test_the_lrbench_version_is_the_one_the_importer_gives(tmp_path: Path) -> None:
    folder = write_lrbench(tmp_path / "lr")
    assert lrbench_version(folder) == load_lrbench(folder).version
    assert lrbench_version(tmp_path) is None


def test_every_benchmark_of_a_simulated_world_is_synthetic(settings: Settings) -> None:
    lr_synth = release(settings, "v1", True)
    lr_real = release(settings, "v2", False, tiny_items()[:2])
    keys = [("release", "v1"), ("release", "v2"), ("lrbench", lr_synth), ("lrbench", lr_real), ("lrbench", "0ther"),
            ("warehouse", "w1"), ("weak", "k1"), ("goldstandard", "g1"), ("openreview", "o1"),
            ("all", f"goldstandard@g1+lrbench@{lr_synth}"), ("all", "goldstandard@g1+openreview@o1")]
    marked = synthetic_versions(settings, results(keys), corpus_synthetic=True)
    assert marked == {("release", "v1"), ("lrbench", lr_synth), ("warehouse", "w1"), ("weak", "k1"),
                      ("all", f"goldstandard@g1+lrbench@{lr_synth}")}


def test_a_real_warehouse_marks_only_what_its_releases_say(settings: Settings) -> None:
    lr_synth = release(settings, "v1", True)
    lr_old = release(settings, "v2", None, tiny_items()[:2])  # a manifest without the flag: the corpus decides
    keys = [("release", "v1"), ("release", "v2"), ("release", "gone"), ("lrbench", lr_synth), ("lrbench", lr_old),
            ("warehouse", "w1"), ("weak", "k1")]
    assert synthetic_versions(settings, results(keys), corpus_synthetic=False) == {("release", "v1"), ("lrbench", lr_synth)}
    assert {("release", "v2"), ("release", "gone"), ("lrbench", lr_old)} <= synthetic_versions(settings, results(keys), True)
