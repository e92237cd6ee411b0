"""``revbench doctor``'s data folder probe: a folder, writable, with room to grow."""

from __future__ import annotations

from revbench.health import Probe, ProbeContext

LOW_SPACE_BYTES = 5 * 2**30
"""Free space under which the data folder is a warning: a full-size refresh writes gigabytes
(PDF-free, but the warehouse, the embedding cache and DuckDB's spill files)."""


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def probe_data(ctx: ProbeContext) -> Probe:
    """The data folder: a folder, writable (a file is written and removed), with room to grow."""
    import os
    import shutil
    import tempfile

    settings = ctx.settings
    d = settings.data_dir
    url = str(d.absolute())
    if d.exists() and not d.is_dir():
        return Probe("data", url, "fail", "a file, not a folder", fix="set REVBENCH_DATA_DIR to a folder")
    if not d.exists():
        parent = next((p for p in d.absolute().parents if p.exists()), None)
        if parent is None or not os.access(parent, os.W_OK | os.X_OK):
            return Probe("data", url, "fail", f"does not exist, and {parent} is not writable",
                         fix="create it for this user, or set REVBENCH_DATA_DIR to a writable folder")
        free = shutil.disk_usage(parent).free
        low = free < LOW_SPACE_BYTES
        return Probe("data", url, "warn" if low else "ok", f"not there yet (the first command creates it); {_gib(free)} free",
                     fix=f"make room: under {_gib(LOW_SPACE_BYTES)} free" if low else "")
    try:
        with tempfile.NamedTemporaryFile(dir=d, prefix=".doctor-") as f:
            f.write(b"revbench doctor")
            f.flush()
    except OSError as exc:
        return Probe("data", url, "fail", f"not writable ({exc.strerror or exc})",
                     fix="make it writable for this user, or set REVBENCH_DATA_DIR to a writable folder")
    free = shutil.disk_usage(d).free
    if free < LOW_SPACE_BYTES:
        return Probe("data", url, "warn", f"writable; only {_gib(free)} free",
                     fix=f"make room (a full-size refresh wants more than {_gib(LOW_SPACE_BYTES)}), or move REVBENCH_DATA_DIR")
    return Probe("data", url, "ok", f"writable; {_gib(free)} free")
