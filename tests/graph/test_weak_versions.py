"""Versions that are what they hold: a weak benchmark's version is computed from the files read, so
labels inverted under a manifest re-hashed to match are refused (the manifest's version is not its
files'), a folder rewritten whole is another version and its results are recorded under it; a
folder written before (its labels' digest as version) still reads, under its files' version; a
release and a weak benchmark are parsed from the very bytes checked against their manifest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from revbench.errors import ReleaseTampered
from revbench.evaluation.importers import release as release_importer
from revbench.evaluation.importers import weak as weak_importer
from revbench.evaluation.importers.registry import load_benchmark
from revbench.evaluation.importers.weak import FILES, weak_version, write_weak
from revbench.files import file_sha256
from revbench.flows.evaluate import evaluate_flow
from revbench.flows.labels import write_labels
from revbench.schemas.release import RELEASE_TABLES
from revbench.schemas.tables import EVAL_RESULTS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.graph.test_weak_labels import world  # noqa: F401  (the hand-made warehouse, as a fixture)
from tests.support.cli import one_line_error
from tests.support.common import run_cli


def _invert(folder: Path) -> None:
    labels = pl.read_parquet(folder / "labels.parquet")
    labels.with_columns((1 - pl.col("label")).cast(pl.Int8)).write_parquet(folder / "labels.parquet")


def _rehash(folder: Path, version: str | None = None) -> dict:
    """The manifest's file list recomputed to match the files (what a careful hand would do), its
    version left as it was unless given."""
    manifest = json.loads((folder / "manifest.json").read_text())
    for f in manifest["files"]:
        f["bytes"], f["sha256"] = (folder / f["path"]).stat().st_size, file_sha256(folder / f["path"])
    if version is not None:
        manifest["version"] = version
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _versions_recorded(settings: Settings) -> set[str]:
    with Warehouse.open(settings.warehouse_path, read_only=True) as wh:
        rows = wh.read(EVAL_RESULTS).filter(pl.col("benchmark") == "weak")
    return set(rows["benchmark_version"].to_list())


def test_the_version_is_computed_from_every_file(world: Settings, tmp_path: Path) -> None:  # noqa: F811
    d = tmp_path / "weak"
    write_labels(world, "authorship", d, experts=1)
    manifest = json.loads((d / "manifest.json").read_text())
    files = {f["path"]: file_sha256(d / f["path"]) for f in manifest["files"]}
    assert manifest["version"] == weak_version(files) == load_benchmark("weak", d).version
    # Any file takes part: another profile, or one more file, is another version.
    assert weak_version({**files, "profiles.parquet": "0" * 64}) != manifest["version"]
    assert weak_version({**files, "extra.parquet": "0" * 64}) != manifest["version"]


def test_inverted_labels_under_a_rehashed_manifest_are_refused(world: Settings, tmp_path: Path,  # noqa: F811
                                                               isolated_env: Path) -> None:
    d = tmp_path / "weak"
    write_labels(world, "authorship", d, experts=1)
    before = load_benchmark("weak", d).version
    _invert(d)
    _rehash(d)  # every sha256 matches the files again; the version is still the untouched folder's
    with pytest.raises(ReleaseTampered) as err:
        load_benchmark("weak", d)
    assert f"version '{before}' is not the version of the files it lists" in str(err.value)
    assert "\n" not in str(err.value)
    one_line_error(*run_cli("evaluate", "-b", f"weak={d}", "-s", "bm25", "--bootstrap", "0"), 2,
                   str(d / "manifest.json"), before)


def test_a_folder_rewritten_whole_is_another_version_and_its_results_say_so(world: Settings,  # noqa: F811
                                                                            tmp_path: Path) -> None:
    d = tmp_path / "weak"
    write_labels(world, "authorship", d, experts=1)
    first = load_benchmark("weak", d).version
    evaluate_flow.fn(world, benchmarks=[f"weak={d}"], scorers=["bm25"], bootstrap=0)
    assert _versions_recorded(world) == {first}
    # Labels inverted and the manifest made whole again, its version included: another benchmark.
    _invert(d)
    manifest = _rehash(d)
    _rehash(d, weak_version({f["path"]: f["sha256"] for f in manifest["files"]}))
    second = load_benchmark("weak", d).version
    assert second != first
    evaluate_flow.fn(world, benchmarks=[f"weak={d}"], scorers=["bm25"], bootstrap=0)
    assert _versions_recorded(world) == {first, second}


def test_a_folder_written_before_reads_under_its_files_version(world: Settings, tmp_path: Path) -> None:  # noqa: F811
    d = tmp_path / "weak"
    write_labels(world, "authorship", d, experts=1)
    # As `revbench labels` wrote it before: the version was the labels' sha256, 12 digits.
    older = file_sha256(d / "labels.parquet")[:12]
    _rehash(d, older)
    now = load_benchmark("weak", d).version
    listed = {f["path"]: f["sha256"] for f in json.loads((d / "manifest.json").read_text())["files"]}
    assert now == weak_version(listed) and now != older
    # Its profiles changed and re-hashed: another version, though its labels' digest still holds.
    profiles = pl.read_parquet(d / "profiles.parquet")
    profiles.with_columns(pl.lit("Edited.").alias("abstract")).write_parquet(d / "profiles.parquet")
    _rehash(d)
    assert load_benchmark("weak", d).version not in (now, older)
    # Its labels inverted under that older version: refused, as any version that is not its files'.
    _invert(d)
    _rehash(d)
    with pytest.raises(ReleaseTampered):
        load_benchmark("weak", d)


def _swap_after_check(monkeypatch: pytest.MonkeyPatch, module: object, rel: str, data: bytes) -> None:
    """The file ``rel`` replaced right after its folder was checked: the read must see it."""
    check = module.verify_release

    def checked_then_swapped(folder: Path, *args: object, **kw: object) -> object:
        out = check(folder, *args, **kw)
        (folder / rel).write_bytes(data)
        return out

    monkeypatch.setattr(module, "verify_release", checked_then_swapped)


def test_a_file_changed_after_the_check_is_refused_not_read(world: Settings, tmp_path: Path,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "weak"
    write_labels(world, "authorship", d, experts=1)
    inverted = tmp_path / "inverted.parquet"
    pl.read_parquet(d / "labels.parquet").with_columns((1 - pl.col("label")).cast(pl.Int8)).write_parquet(inverted)
    _swap_after_check(monkeypatch, weak_importer, "labels.parquet", inverted.read_bytes())
    with pytest.raises(ReleaseTampered) as err:
        load_benchmark("weak", d)
    assert str(d / "labels.parquet") in str(err.value) and "while it was read" in str(err.value)

    # A release likewise: its digest is its manifest's, which then names every byte parsed.
    rel = tmp_path / "v1"
    (rel / "data").mkdir(parents=True)
    files = []
    for tab in RELEASE_TABLES:
        path = rel / "data" / f"{tab.name}.parquet"
        tab.empty().write_parquet(path)
        files.append({"path": f"data/{tab.name}.parquet", "bytes": path.stat().st_size, "sha256": file_sha256(path)})
    (rel / "manifest.json").write_text(json.dumps({"version": "v1", "files": files}))
    b = load_benchmark("release", rel)
    assert (b.version, b.digest) == ("v1", hashlib.sha256((rel / "manifest.json").read_bytes()).hexdigest())
    other = tmp_path / "other.parquet"
    RELEASE_TABLES[0].empty().write_parquet(other)
    # One more byte: another file than the one its manifest lists.
    _swap_after_check(monkeypatch, release_importer, f"data/{RELEASE_TABLES[0].name}.parquet",
                      other.read_bytes() + b"\n")
    with pytest.raises(ReleaseTampered) as err:
        load_benchmark("release", rel)
    assert f"{RELEASE_TABLES[0].name}.parquet" in str(err.value) and "while it was read" in str(err.value)


def test_write_weak_names_its_version_by_the_same_rule(world: Settings, tmp_path: Path) -> None:  # noqa: F811
    d = tmp_path / "weak"
    write_labels(world, "citations", d, experts=1)
    frames = {name: pl.read_parquet(d / f"{name}.parquet") for name in FILES}
    again = write_weak(tmp_path / "again", frames, {"source": "citations"})
    listed = {f["path"]: f["sha256"] for f in again["files"]}
    assert again["version"] == weak_version(listed) == load_benchmark("weak", tmp_path / "again").version
