"""Who holds the warehouse: a small JSON file beside it that the running flow keeps up to date.

DuckDB lets one process write a database file and no other process read it meanwhile, so a
second command cannot ask the warehouse what is going on. The running flow writes
``<warehouse>.run.json`` (run id, flow, pid, start, current stage and progress, finished stages)
and removes it when it ends; ``revbench status`` and a second writer read it instead.
"""

from __future__ import annotations

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
