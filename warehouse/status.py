"""What ``revbench status`` shows, read without ever getting in a running flow's way.

It opens the warehouse read-only and does not wait: when a flow holds it (DuckDB lets no other
process read it meanwhile), the answer comes from the holder file the flow keeps beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from revbench.errors import WarehouseBusy
from revbench.warehouse.db import Warehouse
from revbench.warehouse.holder import read_holder


@dataclass
class WarehouseStatus:
    """Counts and runs when the warehouse could be read; the holding run when it is busy."""

    path: Path
    missing: bool = False
    busy: bool = False
    version: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    holder: dict[str, Any] | None = None


def read_status(path: Path) -> WarehouseStatus:
    """The warehouse's state, or the running flow's own account of it when it is busy."""
    if not path.exists():
        return WarehouseStatus(path, missing=True)
    try:
        with Warehouse.open(path, read_only=True) as wh:
            return WarehouseStatus(path, version=wh.schema_version(), counts=wh.table_counts(),
                                   rejects=wh.reject_counts().to_dicts(), runs=wh.latest_runs(5).to_dicts(),
                                   holder=read_holder(path))
    except WarehouseBusy:
        return WarehouseStatus(path, busy=True, holder=read_holder(path))
