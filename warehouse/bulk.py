"""Bulk datasets read where they lie: Semantic Scholar's Academic Graph (S2AG: ``papers``,
``citations``) and the OpenAlex snapshot (``works``, ``authors``), gzipped JSON Lines scanned by
DuckDB's JSON reader (no unpacking, no whole-file loads), filtered to the corpus by a join.

Layouts, as the providers publish them:

- S2AG (the Datasets API's downloads): ``<root>/papers/*`` and ``<root>/citations/*``, each a set
  of JSON Lines shards, gzipped or not. Keys are lower case (``corpusid``, ``externalids``,
  ``s2fieldsofstudy``; ``citingcorpusid``, ``citedcorpusid``, ``isinfluential``, ``contexts``,
  ``intents``). Every key is optional: one a shard lacks reads as null, and a ``contexts`` or
  ``intents`` of JSON ``null`` stays null (unknown), never an empty list.
- OpenAlex snapshot: ``<root>/data/works/updated_date=YYYY-MM-DD/*.gz`` and the same for
  ``authors`` (a ``<root>/works/...`` layout without ``data/`` reads too); each line one entity
  in the API's own shape, so the API's parsers read it unchanged.

Nothing here opens the warehouse: each scan runs in its own in-memory DuckDB (this module holds
SQL, so it lives in ``warehouse/``); the graph stage hands the rows to its tasks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from revbench.errors import InputError

S2AG_PAPER_COLUMNS = {"corpusid": "BIGINT", "externalids": "JSON", "url": "VARCHAR", "title": "VARCHAR",
                      "year": "BIGINT", "s2fieldsofstudy": "JSON", "publicationtypes": "JSON"}
"""The keys of an S2AG ``papers`` row the graph reads (the rest are not scanned)."""
S2AG_CITATION_COLUMNS = {"citationid": "BIGINT", "citingcorpusid": "BIGINT", "citedcorpusid": "BIGINT",
                         "isinfluential": "BOOLEAN", "contexts": "JSON", "intents": "JSON"}
"""Every key of an S2AG ``citations`` row."""
SHARD_SUFFIXES = (".gz", ".jsonl", ".json", ".ndjson")


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


def latest_partition(root: Path, dataset: str) -> str | None:
    """The newest ``updated_date`` partition of a snapshot dataset (None: not partitioned)."""
    dates = [d for f in shards(root, dataset) if (d := partition_of(f))]
    return max(dates) if dates else None


def _connect():  # noqa: ANN202 (duckdb loads only when a bulk dataset is read)
    import duckdb

    return duckdb.connect()


def _files(files: list[str]) -> str:
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"


def _columns(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"


def _scan(files: list[str], columns: dict[str, str]) -> str:
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
            f"""SELECT corpusid, externalids->>'ArXiv' AS arxiv, externalids::VARCHAR AS externalids, url, title, year,
                       s2fieldsofstudy::VARCHAR AS s2fieldsofstudy, publicationtypes::VARCHAR AS publicationtypes
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
            f"""SELECT citationid, citingcorpusid, citedcorpusid, isinfluential, contexts::VARCHAR AS contexts,
                       intents::VARCHAR AS intents
                FROM {_scan(shards(root, 'citations'), S2AG_CITATION_COLUMNS)}
                WHERE citingcorpusid IN (SELECT id FROM citing)
                ORDER BY citingcorpusid, citationid""").pl()
    finally:
        con.close()


def openalex_entities(root: Path, dataset: str, key: str, wanted: Iterable[str], lower: bool = False,
                      after: str | None = None) -> pl.DataFrame:
    """OpenAlex snapshot entities of ``dataset`` (``works``, ``authors``) whose ``key`` (``doi``,
    ``id``) is one of ``wanted`` (compared in lower case with ``lower``): ``key`` and ``entity``,
    the whole line as JSON text, for the API's parsers. Later partitions win: an entity that
    changed is in the newest ``updated_date`` it was written to. ``after``: only the partitions
    written after that date (a day-later run reads what changed since the last one)."""
    files = shards(root, dataset, after)
    if not files:
        return pl.DataFrame(schema={"key": pl.Utf8, "entity": pl.Utf8})
    con = _connect()
    try:
        con.register("wanted", pl.DataFrame({"k": sorted(set(wanted))}, schema={"k": pl.Utf8}))
        field = f"lower(json->>'{key}')" if lower else f"json->>'{key}'"
        return con.sql(
            f"""SELECT k AS key, arg_max(json::VARCHAR, filename) AS entity
                FROM (SELECT {field} AS k, json, filename
                      FROM read_ndjson_objects({_files(files)}, compression='auto_detect', filename=true,
                                               ignore_errors=true))
                WHERE k IN (SELECT k FROM wanted)
                GROUP BY k ORDER BY k""").pl()
    finally:
        con.close()
