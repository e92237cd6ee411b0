"""The backup flow: a snapshot of the warehouse and the survey store, then the oldest pruned.

The steps live in :mod:`revbench.backup.take`. Unlike the other flows it records no run in the
warehouse: a backup must not change what it copies, and a run row written after the copy would
make the live warehouse look newer than every snapshot of it. It holds the warehouse only while
it copies the file (announced in the holder file, so ``revbench status`` and a waiting run name
it), and a tracked run publishes the snapshot's files as an artifact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from revbench.backup.take import write_backup
from revbench.flows.common import code_version, publish_table, revbench_flow
from revbench.flows.results import FlowResult
from revbench.settings import Settings


@dataclass(frozen=True, kw_only=True)
class BackupResult(FlowResult):
    """One snapshot: its folder, when it was taken, its files and what they hold, and the older
    snapshots removed to keep the newest ``kept``."""

    path: str
    created_at: str
    files: int
    bytes: int
    warehouse_runs: int
    last_run: str
    store_answers: int
    store_epoch: str
    kept: int
    pruned: list[str] = field(default_factory=list)


@revbench_flow("backup")
def backup_flow(settings: Settings, to: Path | None = None, keep: int | None = None) -> BackupResult:
    """Write a snapshot into ``to`` (default REVBENCH_BACKUP__DIR) and keep the newest ``keep``
    (default REVBENCH_BACKUP__KEEP, 0: all)."""
    snap = write_backup(settings, to, keep, code_version())
    m = snap.manifest
    wh, store = m.get("warehouse") or {}, m.get("survey_store") or {}
    last = wh.get("last_run") or {}
    publish_table("backup-files", [{"file": name, **entry} for name, entry in m["files"].items()],
                  f"Snapshot {snap.path}")
    return BackupResult(
        path=str(snap.path), created_at=m["created_at"], files=len(m["files"]),
        bytes=sum(int(e["bytes"]) for e in m["files"].values()), warehouse_runs=int(wh.get("runs", 0)),
        last_run=f"{last.get('flow')} run {last.get('run_id')}" if last else "", store_answers=int(store.get("events", 0)),
        store_epoch=str((store.get("identity") or {}).get("epoch") or ""), kept=settings.backup.keep if keep is None else keep,
        pruned=[str(p) for p in snap.pruned])
