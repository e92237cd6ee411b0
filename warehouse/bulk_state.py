"""What the graph stage keeps of one S2AG release between runs, so that a later release is read
from its incremental diffs alone, never the base files again. One folder per release (written
whole, then renamed into place, so a run that stops leaves the last one as it was):

- ``papers/*.parquet``: every paper of the release, only the keys the graph reads
  (:data:`~revbench.warehouse.bulk.S2AG_PAPER_SELECT`: corpus id, arXiv id, external ids, URL,
  title, year, fields of study, publication types), one part per shard read. The cited papers'
  metadata comes from here, and a diff's updated citation may cite any paper, so it holds them all.
- ``covered.parquet``: the corpus papers the release holds (``arxiv``, ``corpusid``: the highest
  of an arXiv id S2 lists twice, as the scan keeps), whose citations are kept.
- ``citations/*.parquet``: every ``citations`` row a covered paper cites from.

The shards are read one piece per file (:func:`papers_piece`, :func:`citations_piece`, each its
own in-memory DuckDB writing its own part), so the caller can run them where it runs pieces:
threads, or a Dask cluster whose workers see the same folders.
An increment (S2AG's diffs) brings a folder to the next release: :mod:`revbench.warehouse.bulk_diffs`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from revbench.warehouse.bulk import (
    S2AG_CITATION_COLUMNS,
    S2AG_CITATION_SELECT,
    S2AG_PAPER_COLUMNS,
    S2AG_PAPER_SELECT,
    Mapper,
    _connect,
    _scan,
    serial,
    shards,
)

def q(path: Path | str) -> str:
    """``path`` as an SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


def part(state: Path, name: str) -> str:
    """A FROM item reading one part (``papers``, ``covered``, ``citations``) of a release's folder."""
    return f"read_parquet({q(state / 'covered.parquet' if name == 'covered' else state / name / '*.parquet')})"


def state_ready(state: Path) -> bool:
    """A release's folder, written whole."""
    return (state / "covered.parquet").is_file() and (state / "papers").is_dir() and (state / "citations").is_dir()


def begin(state: Path) -> Path:
    """The folder a release's folder is written in before it is put in place (emptied)."""
    tmp = state.with_name(state.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    for folder in ("papers", "citations"):
        (tmp / folder).mkdir(parents=True)
    return tmp


def publish(tmp: Path, state: Path) -> None:
    """``tmp``, written whole, as the release's folder ``state`` (replacing an older one)."""
    shutil.rmtree(state, ignore_errors=True)
    tmp.rename(state)


def piece_db(threads: int):  # noqa: ANN202
    """An in-memory DuckDB on ``threads`` threads for one piece."""
    con = _connect()
    # a COPY streams: no need to keep the scan's order, which would hold it in memory
    con.execute(f"SET preserve_insertion_order = false; SET threads = {max(1, threads)}")
    return con


def copy(con, query: str, path: Path | str) -> int:  # noqa: ANN001
    """``query``'s rows to the parquet file ``path``; returns how many."""
    return int(con.execute(f"COPY ({query}) TO {q(path)} (FORMAT parquet, COMPRESSION zstd)").fetchone()[0])


def papers_piece(shard: str, out: str, threads: int = 1) -> int:
    """One ``papers`` shard's rows, the graph's keys, to the parquet file ``out``; returns how many."""
    con = piece_db(threads)
    try:
        return copy(con, f"SELECT {S2AG_PAPER_SELECT} FROM {_scan([shard], S2AG_PAPER_COLUMNS)} WHERE corpusid IS NOT NULL",
                    out)
    finally:
        con.close()


def citations_piece(shard: str, covered: str, out: str, threads: int = 1) -> int:
    """One ``citations`` shard's rows a covered paper (``covered``: a ``covered.parquet``) cites
    from, to the parquet file ``out``; returns how many."""
    con = piece_db(threads)
    try:
        return copy(con, f"SELECT {S2AG_CITATION_SELECT} FROM {_scan([shard], S2AG_CITATION_COLUMNS)} "
                         f"WHERE citingcorpusid IN (SELECT corpusid FROM read_parquet({q(covered)}))", out)
    finally:
        con.close()


def build_state(release: Path, state: Path, corpus: Iterable[str], mapper: Mapper = serial, threads: int = 1
                ) -> dict[str, int]:
    """The folder of the release in ``release`` (its ``papers`` and ``citations`` shards, one
    piece per file run by ``mapper``) for the corpus papers ``corpus`` (arXiv ids), written to
    ``state``; returns the files and rows read into it."""
    tmp = begin(state)
    papers, citations = shards(release, "papers"), shards(release, "citations")
    n_papers = sum(mapper(papers_piece, [(f, str(tmp / "papers" / f"part-{i:05d}.parquet"), threads)
                                         for i, f in enumerate(papers)], "s2ag-papers"))
    con = piece_db(threads)
    try:
        con.register("corpus", pl.DataFrame({"arxiv": sorted(set(corpus))}, schema={"arxiv": pl.Utf8}))
        covered = copy(con, f"SELECT arxiv, max(corpusid) AS corpusid FROM {part(tmp, 'papers')} "
                            "WHERE arxiv IN (SELECT arxiv FROM corpus) GROUP BY arxiv", tmp / "covered.parquet")
    finally:
        con.close()
    n_cites = sum(mapper(citations_piece, [(f, str(tmp / "covered.parquet"), str(tmp / "citations" / f"part-{i:05d}.parquet"),
                                            threads) for i, f in enumerate(citations)], "s2ag-citations"))
    publish(tmp, state)
    return {"files": len(papers) + len(citations), "papers": n_papers, "covered": covered, "citations": n_cites}


def state_rows(state: Path, arxiv_ids: Iterable[str]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """What :func:`~revbench.tasks.graph_bulk.s2ag_fetched` reads for the covered papers among
    ``arxiv_ids``, from a release's folder: their ``papers`` rows, the ``citations`` rows they
    cite from (by ``citationid`` within a paper, S2's order) and the cited papers' rows."""
    con = _connect()
    try:
        con.register("wanted", pl.DataFrame({"arxiv": sorted(set(arxiv_ids))}, schema={"arxiv": pl.Utf8}))
        con.execute(f"""CREATE TEMP TABLE mine AS SELECT p.* FROM {part(state, 'papers')} p
                        JOIN {part(state, 'covered')} c USING (corpusid) WHERE c.arxiv IN (SELECT arxiv FROM wanted)""")
        con.execute(f"CREATE TEMP TABLE cites AS SELECT * FROM {part(state, 'citations')} "
                    "WHERE citingcorpusid IN (SELECT corpusid FROM mine)")
        return (con.sql("SELECT * FROM mine ORDER BY corpusid").pl(),
                con.sql("SELECT * FROM cites ORDER BY citingcorpusid, citationid").pl(),
                con.sql(f"SELECT * FROM {part(state, 'papers')} WHERE corpusid IN (SELECT citedcorpusid FROM cites) "
                        "ORDER BY corpusid").pl())
    finally:
        con.close()


def covered_ids(state: Path) -> list[str]:
    """The arXiv ids of the corpus papers a release's folder covers."""
    return pl.read_parquet(state / "covered.parquet")["arxiv"].sort().to_list()
