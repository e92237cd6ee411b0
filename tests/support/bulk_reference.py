"""The reference the bulk path's vectorized OpenAlex reader is checked against
(``tests/graph/test_bulk_vector.py``): the snapshot's entities found line by line as whole JSON
text, for the API's own parsers. Kept here, not in the warehouse, because no run uses it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from revbench.warehouse.bulk import Mapper, _connect, _files, serial, shards


def openalex_piece(file: str, key: str, wanted: str, lower: bool = False, threads: int = 1) -> pl.DataFrame:
    """One snapshot file's entities whose ``key`` is one of ``wanted`` (a parquet file of ``k``;
    compared in lower case with ``lower``): ``key``, ``entity`` (the line as JSON text), ``file``."""
    con = _connect()
    try:
        con.execute(f"SET threads = {max(1, threads)}")
        field = f"lower(json->>'{key}')" if lower else f"json->>'{key}'"
        return con.sql(
            f"""SELECT k AS key, json::VARCHAR AS entity, filename AS file
                FROM (SELECT {field} AS k, json, filename
                      FROM read_ndjson_objects({_files([file])}, compression='auto_detect', filename=true,
                                               ignore_errors=true))
                WHERE k IN (SELECT k FROM read_parquet({_files([wanted])}))""").pl()
    finally:
        con.close()


def openalex_entities(root: Path, dataset: str, key: str, wanted: Iterable[str], lower: bool = False,
                      after: str | None = None, mapper: Mapper = serial, threads: int = 1,
                      work: Path | None = None) -> pl.DataFrame:
    """OpenAlex snapshot entities of ``dataset`` (``works``, ``authors``) whose ``key`` (``doi``,
    ``id``) is one of ``wanted`` (compared in lower case with ``lower``): ``key`` and ``entity``,
    the whole line as JSON text, for the API's parsers. Later partitions win: an entity that
    changed is in the newest ``updated_date`` it was written to. ``after``: only the partitions
    written after that date (a day-later run reads what changed since the last one). One piece
    per file (:func:`openalex_piece`, run by ``mapper``); the keys they look for are written
    once to a file under ``work`` (a folder the pieces see; default: the system's temporary one)."""
    files = shards(root, dataset, after)
    out = pl.DataFrame(schema={"key": pl.Utf8, "entity": pl.Utf8, "file": pl.Utf8})
    if files:
        if work is not None:
            work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            keys = Path(tmp) / "wanted.parquet"
            pl.DataFrame({"k": sorted(set(wanted))}, schema={"k": pl.Utf8}).write_parquet(keys)
            frames = list(mapper(openalex_piece, [(f, key, str(keys), lower, threads) for f in files], f"openalex-{dataset}"))
        out = pl.concat([out, *frames])
    return (out.sort(["key", "file"]).group_by("key", maintain_order=True).agg(pl.col("entity").last())
            .select("key", "entity"))
