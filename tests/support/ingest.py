"""Reference runs of the ingest flow and warehouse snapshots to compare runs with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from revbench.flows.ingest import ingest_flow
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.support.common import WORLD_SINCE, WORLD_UNTIL, on_replay

# One reference run per session: several tests compare their runs with it.
REFERENCE: dict[str, Any] = {}


def snapshot(s: Settings) -> dict[str, pl.DataFrame]:
    with Warehouse.open(s.warehouse_path) as wh:
        return wh.ingest.snapshot()


def assert_same(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].equals(b[name]), f"table {name} differs"


def reference_run(small_world: Path, replay, settings: Settings) -> dict[str, pl.DataFrame]:
    """The warehouse after one fault-free run over the whole world (computed once)."""
    if "ref" not in REFERENCE:
        s = on_replay(settings, replay(world=small_world)).with_overrides(data_dir=settings.data_dir / "reference")
        ingest_flow(s, WORLD_SINCE, WORLD_UNTIL, synthetic=True)
        REFERENCE["ref"] = snapshot(s)
        REFERENCE["settings"] = s
    return REFERENCE["ref"]
