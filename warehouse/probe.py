"""``revbench doctor``'s probes of the two databases: the warehouse and the survey store, each
read without waiting and without taking a write lock.

Loaded only when the doctor probes them (``revbench.services``), before the probes' clocks start.
"""

from __future__ import annotations

import re

from revbench.errors import WarehouseDamaged
from revbench.health import Probe, ProbeContext
from revbench.warehouse.holder import describe
from revbench.warehouse.migrations import LATEST_VERSION
from revbench.warehouse.status import read_status
from revbench.warehouse.store import SurveyStore


def probe_warehouse(ctx: ProbeContext) -> Probe:
    """The warehouse read-only, never waiting and never taking the write lock: its schema version
    against this code's; one held by a running flow passes with a note."""
    settings = ctx.settings
    path = settings.warehouse_path.absolute()
    if not path.exists():
        return Probe("warehouse", str(path), "ok", "none yet (the first ingest creates it)", version=f"code {LATEST_VERSION}")
    try:
        st = read_status(path)
    except WarehouseDamaged as exc:
        newer = re.search(r"schema version (\d+)", str(exc))
        if newer:
            return Probe("warehouse", str(path), "fail", f"schema {newer.group(1)} is newer than this code's {LATEST_VERSION}",
                         version=f"schema {newer.group(1)} (code {LATEST_VERSION})",
                         fix="upgrade revbench to the version that wrote it, or point REVBENCH_DATA_DIR elsewhere")
        return Probe("warehouse", str(path), "fail", "cannot be read", fix=str(exc))
    if st.busy:
        return Probe("warehouse", str(path), "ok", f"in use by {describe(st.holder)}: not read while a run holds it",
                     version=f"code {LATEST_VERSION}")
    version = f"schema {st.version} (code {LATEST_VERSION})"
    papers = st.counts.get("papers")
    what = f"readable; {papers} papers" if papers is not None else "readable"
    if st.version is not None and st.version < LATEST_VERSION:
        return Probe("warehouse", str(path), "ok", f"{what}; the next run that writes it migrates it to {LATEST_VERSION}",
                     version=version)
    return Probe("warehouse", str(path), "ok", what, version=version)


def probe_store(ctx: ProbeContext) -> Probe:
    """The survey store (SQLite, safe to read while the server writes): readable, its epoch and events.
    The store has no schema version of its own: its tables are created if missing on every open."""
    settings = ctx.settings
    path = settings.survey_store_path.absolute()
    if not path.exists():
        return Probe("store", str(path), "ok", "none yet (the survey flow creates it)")
    try:
        with SurveyStore(path) as store:
            epoch = store.epoch()
            events = store.max_event_id()
    except WarehouseDamaged as exc:
        return Probe("store", str(path), "fail", "cannot be read", fix=str(exc))
    return Probe("store", str(path), "ok", f"readable; {events} events, epoch {epoch[:8]}")
