"""What ``revbench status`` shows, read without ever getting in a running flow's way.

It opens the warehouse read-only and does not wait: when a flow holds it (DuckDB lets no other
process read it meanwhile), the answer comes from the holder file the flow keeps beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import WarehouseBusy
from revbench.warehouse.db import Warehouse
from revbench.warehouse.holder import read_holder, read_waiting


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
    waiting: list[dict[str, Any]] = field(default_factory=list)
    graph: dict[str, Any] | None = None
    """``Warehouse.graph.graph_coverage`` once any graph table has a row; None before."""


def read_status(path: Path) -> WarehouseStatus:
    """The warehouse's state, or the running flow's own account of it when it is busy; either
    way the runs waiting for a curator (they let go of the warehouse while they wait)."""
    if not path.exists():
        return WarehouseStatus(path, missing=True)
    try:
        with Warehouse.open(path, read_only=True) as wh:
            return WarehouseStatus(path, version=wh.schema_version(), counts=wh.table_counts(),
                                   rejects=wh.ingest.reject_counts().to_dicts(), runs=wh.runs.latest_runs(5).to_dicts(),
                                   holder=read_holder(path), waiting=read_waiting(path),
                                   graph=wh.graph.graph_coverage() if wh.graph.has_graph() else None)
    except WarehouseBusy:
        return WarehouseStatus(path, busy=True, holder=read_holder(path), waiting=read_waiting(path))


def survey_counts(warehouse: Path, store_path: Path) -> dict[str, Any]:
    """Invited, sent, answered, skipped and opted-out counts; message states need the
    warehouse and are left out while a flow holds it."""
    from revbench.warehouse.store import SurveyStore

    out: dict[str, Any] = {}
    if warehouse.exists():
        try:
            with Warehouse.open(warehouse, read_only=True) as wh:
                states = wh.survey.message_state_counts() if wh.has_table("survey_messages") else []
            for kind, state, n in states:
                out[f"{kind} {state}"] = n
        except WarehouseBusy:
            out["messages"] = "a run holds the warehouse"
    if store_path.exists():
        with SurveyStore(store_path) as store:
            answered = store.answered()
            opted_out = store.opted_out()
        out["invitations with answers"] = sum(1 for a in answered.values() if any(v is not None for v in a.values()))
        out["ratings"] = sum(1 for a in answered.values() for v in a.values() if v is not None)
        out["skipped papers"] = sum(1 for a in answered.values() for v in a.values() if v is None)
        out["opted out"] = len(opted_out)
    return out


def unconfirmed_messages(warehouse: Path) -> pl.DataFrame | None:
    """The messages that may or may not have arrived (``Warehouse.survey.unconfirmed_messages``); None when
    there is no warehouse or a flow holds it."""
    if not warehouse.exists():
        return None
    try:
        with Warehouse.open(warehouse, read_only=True) as wh:
            return wh.survey.unconfirmed_messages() if wh.has_table("survey_messages") else None
    except WarehouseBusy:
        return None
