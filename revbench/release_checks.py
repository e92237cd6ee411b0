"""The release's read-side checks: a release folder against its manifest and, for a release of
this project's releases folder, that manifest against the sha256 the warehouse recorded when it
was built; the warehouse's record of a release; the results across published releases, each
release verified first. The release and evaluate flows, the command line and the results page
read releases through here (a flow module is no library: the evaluate and release flows once
imported each other for these)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import ReleaseTampered
from revbench.release_files import REJECTED, Rejection, VerifiedRelease, read_rejection, refuse_rejected, verify_release
from revbench.schemas.tables import RELEASES
from revbench.settings import Settings
from revbench.warehouse import Warehouse


@dataclass(frozen=True)
class ReleaseState:
    """The warehouse's record of one release."""

    status: str
    decided_by: str | None
    manifest_sha256: str | None
    decided_at: Any = None
    reason: str | None = None

    @classmethod
    def of(cls, row: dict[str, Any] | None) -> ReleaseState | None:
        """From a ``releases`` row (None stays None)."""
        return None if row is None else cls(row["status"], row.get("decided_by"), row.get("manifest_sha256"),
                                             row.get("decided_at"), row.get("reason"))


def recorded_state(settings: Settings, version: str) -> ReleaseState | None:
    """The warehouse's record of release ``version`` (None when there is no warehouse or no record)."""
    if not settings.warehouse_path.exists():
        return None
    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        return ReleaseState.of(wh.release.release_state(version)) if wh.has_table(RELEASES.name) else None


def verify_recorded(settings: Settings, release_dir: Path, wh: Warehouse | None = None) -> VerifiedRelease:
    """``release_dir``'s files against its manifest and, for a folder of the releases directory
    that the warehouse recorded, that manifest against the sha256 recorded when it was built (a
    copy elsewhere, or a release from another project, is checked against its own manifest).
    Without ``wh`` the warehouse is opened to read, if there is one. A release the warehouse
    records as rejected is returned ``rejected`` even without its ``REJECTED`` marker (rejected
    before markers were written); a marker on a release recorded published was not put there by
    its curator's decision, and is refused like any other file not as built."""
    expected, state = None, None
    if release_dir.resolve().parent == settings.releases_dir.resolve():
        state = ReleaseState.of(wh.release.release_state(release_dir.name)) if wh is not None else \
            recorded_state(settings, release_dir.name)
        expected = state.manifest_sha256 if state else None
    release = verify_release(release_dir, expected)
    if state is not None and state.status == "published" and release.rejected is not None:
        raise ReleaseTampered(f"{release_dir / REJECTED}: the warehouse records {release.version} as published by "
                              f"{state.decided_by}; the marker was not written by its curator's decision (nothing was "
                              "read from the release or written)")
    if state is not None and state.status == "rejected" and release.rejected is None:
        at = state.decided_at.isoformat() if hasattr(state.decided_at, "isoformat") else str(state.decided_at or "")
        release = dataclasses.replace(release, rejected=Rejection(state.decided_by or "", at, state.reason or ""))
    return release


def release_report(settings: Settings, metric: str, split: str) -> pl.DataFrame:
    """``metric`` on ``split`` of each scorer across the published releases (``scorer, version,
    manifest_sha256, value, ci_low, ci_high``), once every release reported is verified against
    its manifest and the manifest against the warehouse: a changed release is refused, not shown."""
    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        rows = wh.evaluate.release_results(metric, split)
    for version, digest in rows.select("version", "manifest_sha256").unique(maintain_order=True).iter_rows():
        verify_release(settings.releases_dir / version, digest)
    return rows


def check_recorded_releases(settings: Settings, benchmarks: list[tuple[str, Path]]) -> None:
    """A release of this project's releases folder is checked against the manifest sha256 the
    warehouse recorded when it was built, before anything is read (its loader checks every file
    against the manifest; a copy elsewhere has only its own manifest to answer to); read as
    ``release`` or, its JSON, as ``lrbench``. A rejected release (its marker, or the warehouse's
    record) is refused in one line unless ``REVBENCH_RELEASE__EVALUATE_REJECTED`` (``--allow-rejected``)."""
    for kind, path in benchmarks:
        is_release = kind == "release" or (kind == "lrbench" and (path / "manifest.json").is_file())
        if not is_release:
            continue
        if path.resolve().parent == settings.releases_dir.resolve():
            release = verify_recorded(settings, path)
        elif (rejection := read_rejection(path)) is not None:  # a copy: its files are checked as it loads
            release = VerifiedRelease(path, path.name, {}, "", rejected=rejection)
        else:
            continue
        if not settings.release.evaluate_rejected:
            refuse_rejected(release, "", "pass --allow-rejected to evaluate it anyway")
