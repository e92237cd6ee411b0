"""What the graph stage keeps of one S2AG release between runs, so that a later release is read
from its incremental diffs alone, never the base files again. One folder per release (written
whole, then renamed into place, so a run that stops leaves the last one as it was):

- ``papers/*.parquet``: every paper of the release, only the keys the graph reads
  (:data:`~revbench.warehouse.bulk.S2AG_PAPER_SELECT`: corpus id, arXiv id, external ids, URL,
  title, year, fields of study, publication types), one part per shard read. The cited papers'
  metadata comes from here, and a diff's updated citation may cite any paper, so it holds them all.
- ``covered.parquet``: the corpus papers the release holds (``arxiv``, ``corpusid``), whose
  citations are kept. S2 lists some arXiv ids on two records (the paper, and another work wrongly
  linked to it); the one kept is the one the API answers ``ARXIV:<id>`` with (:func:`best_cover`).
- ``citations/*.parquet``: every ``citations`` row a covered paper cites from.

The shards are read one piece per file (:func:`papers_piece`, :func:`citations_piece`, each its
own in-memory DuckDB writing its own part), so the caller can run them where it runs pieces:
threads, or a Dask cluster whose workers see the same folders.
An increment (S2AG's diffs) brings a folder to the next release: :mod:`revbench.warehouse.bulk_diffs`,
as a layer: the parts of the release it starts from, linked (never copied or changed), a part of
its own, and ``masked-papers.parquet`` / ``masked-citations.parquet``, the rows of the earlier parts
it replaces or deletes (``part_file``, ``rownum``). :func:`part` reads a folder as the rows it holds,
masks applied; :func:`compact` rewrites one whole once masks hide a large share of its rows.
"""

from __future__ import annotations

import os
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
    _scan,
    piece_connection,
    serial,
    shards,
)

Corpus = Iterable[str] | pl.DataFrame
"""The corpus papers: their arXiv ids, or a frame of ``arxiv_id`` (or ``arxiv``) and ``title``
(the titles pick between two S2 records of one arXiv id)."""


def q(path: Path | str) -> str:
    """``path`` as an SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


MASKS = {"papers": "masked-papers.parquet", "citations": "masked-citations.parquet"}
"""Per layered part of a folder, the file naming the rows of its parts that a later increment
replaced or deleted (``part_file``: a part's file name; ``rownum``: its row in that file)."""
COMPACT_SHARE = 0.25
COMPACT_PARTS = 128
"""A layered part is rewritten whole once its masks hide this share of its rows, or it has this
many files: reading past the hidden rows, or opening the files, then costs more than a rewrite."""


def part(state: Path, name: str, where: str | None = None) -> str:
    """A FROM item reading one part (``papers``, ``covered``, ``citations``) of a release's folder:
    the rows it holds, those its masks hide left out. ``where`` (SQL over the part's own columns):
    only the rows it picks, tested as the files are read, before the masks are."""
    kept = f" WHERE {where}" if where else ""
    if name == "covered":
        return f"(SELECT * FROM read_parquet({q(state / 'covered.parquet')}){kept})"
    mask = state / MASKS[name]
    if not mask.is_file():
        return f"(SELECT * FROM read_parquet({q(state / name / '*.parquet')}){kept})"
    return f"(SELECT * EXCLUDE (part_file, rownum) FROM {located(state, name, where)})"


def located(state: Path, name: str, where: str | None = None) -> str:
    """A FROM item of one layered part's rows (``papers``, ``citations``) with where each lies
    (``part_file``, ``rownum``), those its masks hide left out; ``where`` as :func:`part`'s."""
    mask = state / MASKS[name]
    hidden = (f"WHERE NOT EXISTS (SELECT 1 FROM read_parquet({q(mask)}) m "
              "WHERE m.part_file = r.part_file AND m.rownum = r.rownum)" if mask.is_file() else "")
    # The rows wanted are picked in the scan, before the masks: DuckDB does not push a filter on
    # the part's columns below the anti-join, which otherwise reads every column of every row
    # (the citations' contexts most of all) for the few a day later keeps.
    kept = f" WHERE {where}" if where else ""
    return (f"(SELECT * FROM (SELECT * EXCLUDE (filename, file_row_number), parse_filename(filename) AS part_file, "
            f"file_row_number AS rownum FROM read_parquet({q(state / name / '*.parquet')}, filename = true, "
            f"file_row_number = true){kept}) r {hidden})")


def link_parts(state: Path, tmp: Path, name: str) -> None:
    """The files of one layered part of ``state`` into ``tmp``, linked: parts are never written
    after they are made, so two releases' folders share them (copied where links are refused)."""
    for f in sorted((state / name).glob("*.parquet")):
        try:
            os.link(f, tmp / name / f.name)
        except OSError:  # another file system, or one without hard links
            shutil.copy2(f, tmp / name / f.name)


def mask_rows(con, state: Path, tmp: Path, name: str, where: str) -> int:  # noqa: ANN001
    """Hide in ``tmp`` (parts linked from ``state``) the rows of ``state``'s part ``name`` that
    ``where`` (over a row, alias ``r``) picks, besides those hidden already; returns rows hidden."""
    old = state / MASKS[name]
    rows = f"SELECT part_file, rownum FROM {located(state, name)} r WHERE {where}"
    if old.is_file():
        rows += f" UNION SELECT part_file, rownum FROM read_parquet({q(old)})"
    out = tmp / MASKS[name]
    n = copy(con, f"SELECT * FROM ({rows}) ORDER BY part_file, rownum", out)  # a row once: UNION
    if not n:
        out.unlink()
    return n


def compact(con, state: Path, name: str) -> bool:  # noqa: ANN001
    """Rewrite one layered part of a folder being written (``state``) whole, without masks, when
    they hide :data:`COMPACT_SHARE` of its rows or it has :data:`COMPACT_PARTS` files; returns
    whether it did."""
    files = sorted((state / name).glob("*.parquet"))
    mask = state / MASKS[name]
    if not mask.is_file() and len(files) < COMPACT_PARTS:
        return False
    hidden = int(con.execute(f"SELECT count(*) FROM read_parquet({q(mask)})").fetchone()[0]) if mask.is_file() else 0
    total = int(con.execute(f"SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata({q(state / name / '*.parquet')})"
                            ).fetchone()[0])
    if len(files) < COMPACT_PARTS and hidden < COMPACT_SHARE * total:
        return False
    fresh = state / f"{name}.compact"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir()
    copy(con, f"SELECT * FROM {part(state, name)}", fresh / "part-00000.parquet")
    shutil.rmtree(state / name)
    fresh.rename(state / name)
    mask.unlink(missing_ok=True)
    return True


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
    """A DuckDB connection on ``threads`` threads for one piece."""
    # a COPY streams: no need to keep the scan's order, which would hold it in memory
    return piece_connection("s2ag", threads, "SET preserve_insertion_order = false")


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


def register_corpus(con, corpus: Corpus) -> None:  # noqa: ANN001
    """``corpus`` as the table ``corpus`` (``arxiv``, ``title``: null where not given) of ``con``."""
    if isinstance(corpus, pl.DataFrame):
        ids = corpus["arxiv_id" if "arxiv_id" in corpus.columns else "arxiv"]
        titles = corpus["title"] if "title" in corpus.columns else pl.Series([None] * corpus.height, dtype=pl.Utf8)
        frame = pl.DataFrame({"arxiv": ids, "title": titles}, schema={"arxiv": pl.Utf8, "title": pl.Utf8})
    else:
        frame = pl.DataFrame({"arxiv": sorted(set(corpus))}, schema={"arxiv": pl.Utf8}).with_columns(title=pl.lit(None, pl.Utf8))
    con.register("corpus", frame.drop_nulls("arxiv").unique("arxiv", keep="first", maintain_order=True))


def _title_key(column: str) -> str:
    # case, accents, spaces and punctuation aside: S2 and arXiv spell one title apart in those
    return f"nullif(regexp_replace(lower(strip_accents({column})), '[^\\p{{L}}\\p{{N}}]+', '', 'g'), '')"


def best_cover(contenders: str) -> str:
    """The covered papers (``arxiv``, ``corpusid``) from ``contenders`` (a FROM item of papers rows
    with their ``arxiv``): one per corpus paper, the record the API answers ``ARXIV:<id>`` with
    where S2 lists the id twice. The record whose title is the corpus paper's comes first, then
    one with publication types (S2 types its papers; a work wrongly linked to an arXiv id is
    mostly an untyped stub), then the one with the most keys filled, then the highest corpus id,
    so the choice never depends on the order the rows were read in."""
    filled = " + ".join(f"(p.{c} IS NOT NULL)::INT" for c in ("externalids", "url", "title", "year", "s2fieldsofstudy",
                                                            "publicationtypes"))
    return f"""SELECT arxiv, corpusid FROM (
                 SELECT p.arxiv, p.corpusid, row_number() OVER (PARTITION BY p.arxiv ORDER BY
                        coalesce({_title_key('p.title')} = {_title_key('c.title')}, false) DESC,
                        coalesce(json_type(p.publicationtypes::JSON) = 'ARRAY'
                                 AND json_array_length(p.publicationtypes::JSON) > 0, false) DESC,
                        {filled} DESC, p.corpusid DESC) AS rank
                 FROM ({contenders}) p JOIN corpus c USING (arxiv))
               WHERE rank = 1"""


def build_state(release: Path, state: Path, corpus: Corpus, mapper: Mapper = serial, threads: int = 1
                ) -> dict[str, int]:
    """The folder of the release in ``release`` (its ``papers`` and ``citations`` shards, one
    piece per file run by ``mapper``) for the corpus papers ``corpus``, written to ``state``;
    returns the files and rows read into it."""
    tmp = begin(state)
    papers, citations = shards(release, "papers"), shards(release, "citations")
    n_papers = sum(mapper(papers_piece, [(f, str(tmp / "papers" / f"part-{i:05d}.parquet"), threads)
                                         for i, f in enumerate(papers)], "s2ag-papers"))
    con = piece_db(threads)
    try:
        register_corpus(con, corpus)
        covered = copy(con, best_cover(f"SELECT * FROM {part(tmp, 'papers')} WHERE arxiv IN (SELECT arxiv FROM corpus)"),
                       tmp / "covered.parquet")
    finally:
        con.close()
    n_cites = sum(mapper(citations_piece, [(f, str(tmp / "covered.parquet"), str(tmp / "citations" / f"part-{i:05d}.parquet"),
                                            threads) for i, f in enumerate(citations)], "s2ag-citations"))
    publish(tmp, state)
    return {"files": len(papers) + len(citations), "papers": n_papers, "covered": covered, "citations": n_cites}


def covered_ids(state: Path) -> list[str]:
    """The arXiv ids of the corpus papers a release's folder covers."""
    return pl.read_parquet(state / "covered.parquet")["arxiv"].sort().to_list()
