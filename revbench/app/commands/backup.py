"""The backup's commands: ``backup`` (a snapshot of the warehouse and the survey store) and
``restore`` (a snapshot checked and put back, keeping every answer given since), with what each prints."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from revbench.app.cli_common import setup
from revbench.app.console import console
from revbench.app.entry import check_output_dir


def backup(
    to: Annotated[Path | None, typer.Option("--to", metavar="DIR", help="Folder the snapshot goes to, as DIR/revbench-backup-<UTC time>/ (default: REVBENCH_BACKUP__DIR, else data/backups); it may hold only revbench's snapshots")] = None,
    keep: Annotated[int | None, typer.Option(min=0, help="Keep the newest N snapshots in DIR, removing older ones of revbench's (default: REVBENCH_BACKUP__KEEP; 0: keep all)")] = None,
) -> None:
    """Snapshot the warehouse and the survey store with a manifest of checksums, authenticated with REVBENCH_BACKUP__KEY (safe while the survey server runs)."""
    if to is not None:
        check_output_dir(to, "--to")
    settings = setup()
    from revbench.flows.backup import backup_flow

    print_backup(backup_flow.fn(settings, to=to, keep=keep))


def restore(
    from_: Annotated[Path, typer.Option("--from", metavar="DIR", help="A snapshot folder `revbench backup` wrote (DIR/revbench-backup-<UTC time>/)", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Restore over live data the snapshot lacks (it is set aside; answers, opt-outs and messages sent are kept)")] = False,
) -> None:
    """Check a snapshot against its manifest (verified with REVBENCH_BACKUP__KEY), then restore the warehouse and the survey store from it, keeping every answer given since."""
    settings = setup()
    from revbench.backup.restore import restore as restore_snapshot

    print_restore(restore_snapshot(settings, from_, force=force))


def print_backup(out: Any) -> None:
    """A snapshot written (``revbench.flows.backup.BackupResult``): where, what it holds, what was pruned."""
    from rich.markup import escape

    mib = out.bytes / 2**20
    console.print(f"Backup written: [bold]{escape(out.path)}[/] ({out.files} files, {mib:.1f} MiB, taken {out.created_at})",
                  soft_wrap=True, highlight=False)
    if out.last_run:
        console.print(f"  warehouse: {out.warehouse_runs} runs, the last {escape(out.last_run)}", highlight=False)
    if out.store_epoch:
        console.print(f"  survey store: {out.store_answers} answers (epoch {out.store_epoch})", highlight=False)
    for p in out.pruned:
        console.print(f"  removed the older snapshot {escape(p)} (keeping the newest {out.kept})", soft_wrap=True,
                      highlight=False)
    console.print(f"Restore it with: revbench restore --from {escape(out.path)}", soft_wrap=True, highlight=False)


def print_restore(out: Any) -> None:
    """What a restore did (``revbench.backup.restore.RestoreResult``): each part, what was carried over, where the
    live files went."""
    from rich.markup import escape

    console.print(f"Restored [bold]{escape(str(out.backup))}[/] (taken {out.created_at})", soft_wrap=True, highlight=False)
    console.print(f"  warehouse: {escape(out.warehouse)}", soft_wrap=True, highlight=False)
    console.print(f"  survey store: {escape(out.survey_store)}", soft_wrap=True, highlight=False)
    for line in out.newer.parts():
        console.print(f"  the live data had: {escape(line)}", soft_wrap=True, highlight=False)
    kept = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in out.carried.items() if v)
    if kept:
        console.print(f"  carried over: {escape(kept)}", soft_wrap=True, highlight=False)
    console.print(f"  the live files as they were: {escape(str(out.set_aside))}/ (restore.json says what was done)",
                  soft_wrap=True, highlight=False)
    console.print("The next ratings pull (`revbench ratings`) brings in every answer given since the backup.",
                  soft_wrap=True, highlight=False)
