"""Who holds the warehouse: a small JSON file beside it that the running flow keeps up to date.

DuckDB lets one process write a database file and no other process read it meanwhile, so a
second command cannot ask the warehouse what is going on. The running flow writes
``<warehouse>.run.json`` (run id, flow, pid, start, current stage and progress, finished stages)
and removes it when it ends; ``revbench status`` and a second writer read it instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def holder_path(db: Path) -> Path:
    """``warehouse.duckdb`` -> ``warehouse.duckdb.run.json``."""
    return db.with_name(db.name + ".run.json")


def write_holder(db: Path, info: dict[str, Any]) -> None:
    """Replace the holder file atomically (readers never see half a file)."""
    path = holder_path(db)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    record = {**info, "pid": os.getpid(), "host": socket.gethostname(),
              "updated_at": datetime.now(UTC).isoformat(timespec="seconds")}
    tmp.write_text(json.dumps(record, default=str))
    os.replace(tmp, path)


def clear_holder(db: Path, run_id: str) -> None:
    """Remove the holder file if it is this run's."""
    info = read_holder(db)
    if info is not None and info.get("run_id") == run_id:
        holder_path(db).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_holder(db: Path) -> dict[str, Any] | None:
    """The holder record, with ``alive`` telling whether its process still runs (on this host)."""
    try:
        info = json.loads(holder_path(db).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    info["alive"] = info.get("host") != socket.gethostname() or _alive(int(info.get("pid") or 0))
    return info


def describe(info: dict[str, Any] | None) -> str:
    """One phrase naming the holding run, for messages."""
    if not info:
        return "another process"
    stage = f", stage {info['stage']}" if info.get("stage") else ""
    progress = info.get("progress")
    if progress:
        stage += f" ({progress['done']}/{progress['total']})"
    return f"run {info.get('run_id')} ({info.get('flow')}, pid {info.get('pid')}, since {info.get('started_at')}{stage})"


# A run waiting for a curator lets go of the warehouse (and so of the holder file): what it waits
# for is kept in a file of its own, one per run, so that runs waiting at once never overwrite
# each other and ``revbench status`` can list them all.
def waiting_dir(db: Path) -> Path:
    """``warehouse.duckdb`` -> ``warehouse.duckdb.waiting/`` (one JSON file per waiting run)."""
    return db.with_name(db.name + ".waiting")


def write_waiting(db: Path, info: dict[str, Any]) -> None:
    """Record that run ``info['run_id']`` waits for a curator (what for, where, until when)."""
    folder = waiting_dir(db)
    folder.mkdir(exist_ok=True)
    path = folder / f"{info['run_id']}.json"
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**info, "pid": os.getpid(), "host": socket.gethostname()}, default=str))
    os.replace(tmp, path)


def clear_waiting(db: Path, run_id: str) -> None:
    """The run no longer waits (answered, decided elsewhere, expired or stopped)."""
    (waiting_dir(db) / f"{run_id}.json").unlink(missing_ok=True)
    (waiting_dir(db) / f"{run_id}.decided").unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # another run still waits, or it is gone already
        waiting_dir(db).rmdir()


def write_decision(db: Path, run_id: str, note: dict[str, Any]) -> bool:
    """Tell waiting run ``run_id`` that what it waits for was decided elsewhere (``note``: by
    whom, which run, what); False when it no longer waits. The waiting run's own process reads
    the note and ends its wait (``revbench.flows.curator.DecisionWatcher``)."""
    folder = waiting_dir(db)
    if not (folder / f"{run_id}.json").exists():
        return False
    path = folder / f"{run_id}.decided"
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps({**note, "at": datetime.now(UTC).isoformat(timespec="seconds")}, default=str))
    os.replace(tmp, path)
    return True


def read_decision(db: Path, run_id: str) -> dict[str, Any] | None:
    """The note ``write_decision`` left for waiting run ``run_id``, if any."""
    try:
        note = json.loads((waiting_dir(db) / f"{run_id}.decided").read_text())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def drop_stray_decisions(db: Path) -> None:
    """Remove notes whose run stopped waiting before it read them (a decision and the end of a
    wait crossing), so the folder beside the warehouse goes once nobody waits."""
    folder = waiting_dir(db)
    for note in folder.glob("*.decided") if folder.is_dir() else []:
        if not note.with_suffix(".json").exists():
            note.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def read_waiting(db: Path) -> list[dict[str, Any]]:
    """The runs waiting for a curator, oldest first, each with ``alive`` as in ``read_holder`` and
    ``decided``: the note of a decision made elsewhere that ends its wait (None while it waits)."""
    out: list[tuple[str, int, dict[str, Any]]] = []
    for path in sorted(waiting_dir(db).glob("*.json")) if waiting_dir(db).is_dir() else []:
        try:
            info = json.loads(path.read_text())
            written = path.stat().st_mtime_ns
        except (OSError, ValueError):
            continue
        if isinstance(info, dict):
            info["alive"] = info.get("host") != socket.gethostname() or _alive(int(info.get("pid") or 0))
            info["decided"] = read_decision(db, str(info.get("run_id")))
            # ``since`` is to the second: two runs that began to wait in the same second are
            # ordered by when each wrote its file.
            out.append((str(info.get("since", "")), written, info))
    return [info for _since, _written, info in sorted(out, key=lambda t: (t[0], t[1]))]


def describe_waiting(info: dict[str, Any]) -> str:
    """The block a waiting run prints and ``revbench status`` repeats: what it waits for, where
    to answer, the command that decides instead, and when the wait ends; once the decision was
    made elsewhere (the run is finishing), one line saying so instead."""
    gone = "" if info.get("alive", True) else " (its process is gone: nobody will act on an answer)"
    decided = info.get("decided")
    if decided:
        # `what` names who decided already ("release v3 rejected by ada").
        return (f"{info.get('flow')} run {info.get('run_id')} no longer waits: {decided.get('what')} "
                f"(run {decided.get('run_id')}, at {decided.get('at')}); it finishes with that decision{gone}")
    return "\n".join([
        f"{info.get('flow')} run {info.get('run_id')} waits for {info.get('what')}{gone}",
        # The address on a line of its own: a log folded at 80 columns would break it in two.
        (f"  answer in the Prefect UI:\n  {info['url']}" if info.get("url")
         else "  answer in the Prefect UI: no UI (a temporary Prefect server): use the command"),
        f"  or decide on the command line: {info.get('command')}",
        f"  waits until {info.get('until')} ({info.get('timeout_seconds')} s), then ends as paused-expired",
    ])
