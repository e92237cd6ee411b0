"""Bulk datasets read where they lie: Semantic Scholar's Academic Graph (S2AG: ``papers``,
``citations``) and the OpenAlex snapshot (``works``, ``authors``), gzipped JSON Lines scanned by
DuckDB's JSON reader (no unpacking, no whole-file loads), filtered to the corpus by a join.

Layouts, as the providers publish them:

- S2AG (the Datasets API's downloads): ``<root>/<release_id>/papers/*`` and
  ``<root>/<release_id>/citations/*`` (a release as ``/release/{id}/dataset/{name}`` lists its
  files), or ``<root>/papers/*`` and ``<root>/citations/*`` alone (one release, its id unknown),
  each a set of JSON Lines shards, gzipped or not; the incremental diffs between releases (as
  ``/diffs/{start}/to/{end}/{name}`` lists them, one ``update_files`` and ``delete_files`` list
  per increment ``from_release`` -> ``to_release``) under
  ``<root>/diffs/<from_release>_<to_release>/<name>/updates/*`` and ``.../deletes/*``. Keys are
  lower case (``corpusid``, ``externalids``, ``s2fieldsofstudy``; ``citationid``,
  ``citingcorpusid``, ``citedcorpusid``, ``isinfluential``, ``contexts``, ``intents``). Every key
  is optional: one a shard lacks reads as null, and a ``contexts`` or ``intents`` of JSON
  ``null`` stays null (unknown), never an empty list.
- OpenAlex snapshot: ``<root>/data/works/updated_date=YYYY-MM-DD/*.gz`` and the same for
  ``authors`` (a ``<root>/works/...`` layout without ``data/`` reads too); each line one entity
  in the API's own shape, so the API's parsers read it unchanged.

Nothing here opens the warehouse: each scan runs in its own in-memory DuckDB (this module holds
SQL, so it lives in ``warehouse/``); the graph stage hands the rows to its tasks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import InputError

S2AG_PAPER_COLUMNS = {"corpusid": "BIGINT", "externalids": "JSON", "url": "VARCHAR", "title": "VARCHAR",
                      "year": "BIGINT", "s2fieldsofstudy": "JSON", "publicationtypes": "JSON"}
"""The keys of an S2AG ``papers`` row the graph reads (the rest are not scanned)."""
S2AG_CITATION_COLUMNS = {"citationid": "BIGINT", "citingcorpusid": "BIGINT", "citedcorpusid": "BIGINT",
                         "isinfluential": "BOOLEAN", "contexts": "JSON", "intents": "JSON"}
"""Every key of an S2AG ``citations`` row."""
S2AG_PAPER_SELECT = ("corpusid, externalids->>'ArXiv' AS arxiv, externalids::VARCHAR AS externalids, url, title, year, "
                     "s2fieldsofstudy::VARCHAR AS s2fieldsofstudy, publicationtypes::VARCHAR AS publicationtypes")
"""An S2AG ``papers`` row as the graph reads it: the scanned keys, JSON ones as text, and ``arxiv``."""
S2AG_CITATION_SELECT = ("citationid, citingcorpusid, citedcorpusid, isinfluential, contexts::VARCHAR AS contexts, "
                        "intents::VARCHAR AS intents")
"""An S2AG ``citations`` row as the graph reads it (``contexts`` and ``intents`` as JSON text)."""
SHARD_SUFFIXES = (".gz", ".jsonl", ".json", ".ndjson")
DIFFS = "diffs"
"""The folder of S2AG's incremental diffs under a bulk folder."""
Mapper = Callable[[Callable[..., Any], list[tuple[Any, ...]], str], Iterable[Any]]
"""Runs ``fn(*piece)`` for every piece (named for the log) and yields what each returns, in any order."""


def serial(fn: Callable[..., Any], pieces: list[tuple[Any, ...]], name: str) -> Iterable[Any]:
    """The pieces one after another, here."""
    return [fn(*p) for p in pieces]


_PARTITION = re.compile(r"updated_date=(\d{4}-\d{2}-\d{2})")


def partition_of(path: str) -> str | None:
    """The ``updated_date`` partition a snapshot file lies in (None: not partitioned)."""
    m = _PARTITION.search(path)
    return m.group(1) if m else None


def shards(root: Path, dataset: str, after: str | None = None) -> list[str]:
    """The shard files of one dataset under ``root`` (``<root>/<dataset>/`` or, for the OpenAlex
    snapshot, ``<root>/data/<dataset>/``, partitions included), sorted; with ``after`` (a date),
    only the partitions written after it (an unpartitioned file is always read). No shard at
    all is an error naming the folder; none after ``after`` is an empty list."""
    for folder in (root / dataset, root / "data" / dataset):
        if folder.is_dir():
            files = sorted(str(p) for p in folder.rglob("*") if p.is_file() and p.name.endswith(SHARD_SUFFIXES))
            if files:
                return [f for f in files if after is None or (partition_of(f) or "9999") > after]
    raise InputError(f"{root}: no {dataset} shards (expected {root / dataset}/*.gz or {root / 'data' / dataset}/*/*.gz)")


def s2ag_releases(root: Path) -> list[str]:
    """The S2AG releases under ``root`` (``<root>/<release_id>/papers/``), oldest first; none
    where ``root`` holds one release alone (``<root>/papers/``)."""
    if not root.is_dir() or (root / "papers").is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if d.is_dir() and d.name != DIFFS and (d / "papers").is_dir())


def s2ag_diff_chain(root: Path, start: str) -> list[tuple[str, str, Path]]:
    """The increments under ``<root>/diffs/`` that lead on from release ``start``, in order
    (``from_release``, ``to_release``, folder): each the one from where the last ended, the
    furthest where two start at one release; empty where none starts at ``start``."""
    steps: dict[str, list[tuple[str, Path]]] = {}
    if (root / DIFFS).is_dir():
        for d in sorted((root / DIFFS).iterdir()):
            frm, sep, to = d.name.partition("_")
            if d.is_dir() and sep and frm and to > frm:
                steps.setdefault(frm, []).append((to, d))
    chain: list[tuple[str, str, Path]] = []
    at = start
    while at in steps:
        to, folder = max(steps[at])
        chain.append((at, to, folder))
        at = to
    return chain


def diff_shards(diff: Path, dataset: str, kind: str) -> list[str]:
    """The shards of one dataset's ``updates`` or ``deletes`` in an increment's folder (none: an
    increment that changed nothing of it)."""
    folder = diff / dataset / kind
    return sorted(str(p) for p in folder.rglob("*") if p.is_file() and p.name.endswith(SHARD_SUFFIXES)) if folder.is_dir() else []


def latest_partition(root: Path, dataset: str) -> str | None:
    """The newest ``updated_date`` partition of a snapshot dataset (None: not partitioned)."""
    dates = [d for f in shards(root, dataset) if (d := partition_of(f))]
    return max(dates) if dates else None


def _connect():  # noqa: ANN202 (duckdb loads only when a bulk dataset is read)
    import duckdb

    return duckdb.connect()


_DATABASES: dict[tuple[int, str], Any] = {}


def piece_connection(kind: str, threads: int, setup: str = ""):  # noqa: ANN202
    """A connection of its own for one piece, to the in-memory DuckDB this process keeps for
    ``kind`` of piece (``setup`` run once on it): a database's start costs more than a small
    file's whole scan, and a snapshot has thousands of files."""
    database = _DATABASES.get((os.getpid(), kind))
    if database is None:
        database = _DATABASES[(os.getpid(), kind)] = _connect()
        if setup:
            database.execute(setup)
    con = database.cursor()
    con.execute(f"SET threads = {max(1, threads)}")
    return con


def _files(files: list[str]) -> str:
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"


def _columns(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"


def _scan(files: list[str], columns: dict[str, str]) -> str:
    """A FROM item reading ``files`` with ``columns``; no file at all reads as no rows of them."""
    if not files:
        return "(SELECT " + ", ".join(f"NULL::{t} AS {k}" for k, t in columns.items()) + " LIMIT 0)"
    # ignore_errors: a malformed line (a truncated shard's last) is skipped, not the whole shard
    return (f"read_json({_files(files)}, format='newline_delimited', compression='auto_detect', "
            f"columns={_columns(columns)}, ignore_errors=true)")


def s2ag_papers(root: Path, arxiv_ids: Iterable[str] = (), corpus_ids: Iterable[int] = ()) -> pl.DataFrame:
    """S2AG ``papers`` rows whose ``externalids.ArXiv`` is one of ``arxiv_ids`` or whose ``corpusid``
    is one of ``corpus_ids``: the scanned keys (:data:`S2AG_PAPER_COLUMNS`, JSON ones as text) and
    ``arxiv``, the bare arXiv id."""
    con = _connect()
    try:
        con.register("wanted_arxiv", pl.DataFrame({"id": sorted(set(arxiv_ids))}, schema={"id": pl.Utf8}))
        con.register("wanted_corpus", pl.DataFrame({"id": sorted(set(corpus_ids))}, schema={"id": pl.Int64}))
        return con.sql(
            f"""SELECT {S2AG_PAPER_SELECT}
                FROM {_scan(shards(root, 'papers'), S2AG_PAPER_COLUMNS)}
                WHERE externalids->>'ArXiv' IN (SELECT id FROM wanted_arxiv)
                   OR corpusid IN (SELECT id FROM wanted_corpus)
                ORDER BY corpusid""").pl()
    finally:
        con.close()


def s2ag_citations(root: Path, citing: Iterable[int]) -> pl.DataFrame:
    """S2AG ``citations`` rows of the ``citing`` corpus ids, every key (``contexts`` and
    ``intents`` as JSON text, null where S2 wrote null), in ``citationid`` order."""
    con = _connect()
    try:
        con.register("citing", pl.DataFrame({"id": sorted(set(citing))}, schema={"id": pl.Int64}))
        return con.sql(
            f"""SELECT {S2AG_CITATION_SELECT}
                FROM {_scan(shards(root, 'citations'), S2AG_CITATION_COLUMNS)}
                WHERE citingcorpusid IN (SELECT id FROM citing)
                ORDER BY citingcorpusid, citationid""").pl()
    finally:
        con.close()


LISTED_KEYS = 5_000
"""Up to this many keys (rows of the query naming them) a part is read for are written into the query as a list
(:func:`keys_in`)."""


def keys_in(con, column: str, keys: str) -> str:  # noqa: ANN001
    """A condition for ``bulk_state.part``'s ``where``: ``column`` is one of the integer keys the query
    ``keys`` (SQL, run here) returns. When it returns at most :data:`LISTED_KEYS` rows, its keys are
    written as a list, which DuckDB tests in the parquet scan itself: at a few thousand keys, two
    to four times faster than a semi-join over a kept citations part (a join passes the scan only
    the keys' range). A list costs about 20 µs a key to plan, so more are left a subquery."""
    # Read no further than the bound: a whole release's millions of keys never reach Python.
    rows = con.execute(f"SELECT * FROM ({keys}) LIMIT {LISTED_KEYS + 1}").fetchall()
    if len(rows) > LISTED_KEYS:
        return f"{column} IN ({keys})"
    listed = ", ".join(str(int(k)) for k in sorted({row[0] for row in rows if row[0] is not None}))  # int(): only numbers
    return f"{column} IN ({listed})" if listed else "FALSE"
