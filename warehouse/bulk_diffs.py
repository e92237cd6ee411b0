"""An S2AG increment (the Datasets API's diffs between two releases: per dataset, ``updates``
rows of its own shape, ``deletes`` carrying the keys) applied to what the graph stage keeps of the
release it starts from (:mod:`revbench.warehouse.bulk_state`), giving the folder of the release it
leads to.

A diff's ``updates`` replace the rows of their key (``corpusid``, ``citationid``) or add them, its
``deletes`` remove them (a citation delete without a ``citationid`` matches by its two corpus
ids); deletes apply before updates. Applying one is a function of the folder it starts from and
the diff, so a run that applies it again writes the same folder.
"""

from __future__ import annotations

from pathlib import Path

from revbench.warehouse.bulk import (
    S2AG_CITATION_COLUMNS,
    S2AG_CITATION_SELECT,
    S2AG_PAPER_COLUMNS,
    S2AG_PAPER_SELECT,
    Mapper,
    _scan,
    diff_shards,
    serial,
)
from revbench.warehouse.bulk_state import Corpus, begin, best_cover, copy, part, piece_db, publish, q, register_corpus

_PAPER_KEYS = {"corpusid": "BIGINT"}
_CITATION_KEYS = {k: S2AG_CITATION_COLUMNS[k] for k in ("citationid", "citingcorpusid", "citedcorpusid")}


def kept_papers_piece(papers: str, changed: str, out: str, threads: int = 1) -> int:
    """One part of a release's papers (the parquet file ``papers``) less those an increment
    changed (``changed``: a parquet of their corpus ids), to ``out``; returns how many."""
    con = piece_db(threads)
    try:
        return copy(con, f"SELECT p.* FROM read_parquet({q(papers)}) p ANTI JOIN read_parquet({q(changed)}) c USING (corpusid)",
                    out)
    finally:
        con.close()


def apply_diff(state: Path, diff: Path, out: Path, corpus: Corpus, mapper: Mapper = serial, threads: int = 1
               ) -> tuple[list[str], list[str]]:
    """The folder of the release an increment (``diff``: its ``papers`` and ``citations``
    updates and deletes) leads to from the one in ``state``, written to ``out``; a corpus paper
    (``corpus``) the increment adds is covered from then on. Returns the covered papers whose
    answer may have changed (their row, a citation of theirs, or a paper they cite changed; or
    covered now) and those no longer covered (S2 deleted them), as arXiv ids.

    Every join builds on the increment's side or the corpus's, never the release's: its papers
    are read through once, a piece per part (run by ``mapper``), less what the increment changed."""
    tmp = begin(out)
    con = piece_db(threads)
    try:
        register_corpus(con, corpus)
        _diff_papers(con, state, diff, tmp, mapper, threads)
        _diff_citations(con, state, diff, tmp)
        covered, old_covered = part(tmp, "covered"), part(state, "covered")
        changed = con.sql(f"""SELECT DISTINCT c.arxiv FROM {covered} c
                              WHERE c.corpusid IN (SELECT corpusid FROM changed)
                                 OR c.corpusid IN (SELECT citingcorpusid FROM uc UNION SELECT citingcorpusid FROM gone)
                                 OR c.corpusid IN (SELECT citingcorpusid FROM {part(tmp, 'citations')}
                                                   WHERE citedcorpusid IN (SELECT corpusid FROM changed))
                                 OR NOT EXISTS (SELECT 1 FROM {old_covered} o WHERE o.arxiv = c.arxiv
                                                AND o.corpusid = c.corpusid)
                              ORDER BY 1""").pl()["arxiv"].to_list()
        dropped = con.sql(f"SELECT arxiv FROM {old_covered} WHERE arxiv NOT IN (SELECT arxiv FROM {covered}) "
                          "ORDER BY 1").pl()["arxiv"].to_list()
    finally:
        con.close()
    (tmp / "changed.parquet").unlink()
    publish(tmp, out)
    return changed, dropped


def _diff_papers(con, state: Path, diff: Path, tmp: Path, mapper: Mapper, threads: int) -> None:  # noqa: ANN001
    """``papers`` and ``covered`` after the increment; temp tables ``up`` (its updated papers'
    ids), ``changed`` (every id it touched) and ``removed`` (deleted, not updated again)."""
    ups = diff_shards(diff, "papers", "updates")
    con.execute(f"CREATE TEMP TABLE up AS SELECT corpusid, externalids->>'ArXiv' AS arxiv "
                f"FROM {_scan(ups, S2AG_PAPER_COLUMNS)} WHERE corpusid IS NOT NULL")
    con.execute(f"CREATE TEMP TABLE removed AS SELECT corpusid FROM {_scan(diff_shards(diff, 'papers', 'deletes'), _PAPER_KEYS)} "
                "WHERE corpusid IS NOT NULL EXCEPT SELECT corpusid FROM up")
    con.execute("CREATE TEMP TABLE changed AS SELECT corpusid FROM up UNION SELECT corpusid FROM removed")
    copy(con, "SELECT corpusid FROM changed", tmp / "changed.parquet")
    parts = sorted((state / "papers").glob("*.parquet"))
    list(mapper(kept_papers_piece, [(str(p), str(tmp / "changed.parquet"), str(tmp / "papers" / p.name), threads)
                                    for p in parts], "s2ag-papers-kept"))
    added = tmp / "papers" / f"diff-{diff.name}.parquet"
    copy(con, f"SELECT {S2AG_PAPER_SELECT} FROM {_scan(ups, S2AG_PAPER_COLUMNS)} WHERE corpusid IS NOT NULL", added)
    con.execute(f"CREATE TEMP TABLE kept AS SELECT * FROM {part(state, 'covered')} ANTI JOIN removed USING (corpusid)")
    # A kept paper stays covered as its row is now; a paper the increment adds (one the release did
    # not hold, so all its citations are in the increment) is covered when the corpus has it and it
    # is the better record of its arXiv id. A paper the release held uncovered is not: what the
    # stage keeps has none of its citations.
    con.execute(f"CREATE TEMP TABLE candidates AS SELECT * FROM read_parquet({q(added)}) "
                "WHERE arxiv IN (SELECT arxiv FROM corpus)")
    copy(con, best_cover(f"""SELECT k.arxiv, p.* EXCLUDE (arxiv) FROM kept k JOIN {part(tmp, 'papers')} p USING (corpusid)
                             UNION ALL BY NAME
                             SELECT * FROM candidates
                             WHERE corpusid NOT IN (SELECT corpusid FROM {part(state, 'papers')}
                                                    WHERE corpusid IN (SELECT corpusid FROM candidates))"""),
         tmp / "covered.parquet")


def _diff_citations(con, state: Path, diff: Path, tmp: Path) -> None:  # noqa: ANN001
    """``citations`` after the increment; temp tables ``uc`` (its updated citations of covered
    papers) and ``gone`` (the kept citations it deletes, by all three ids)."""
    covered, old_citations = f"(SELECT corpusid FROM {part(tmp, 'covered')})", part(state, "citations")
    con.execute(f"CREATE TEMP TABLE uc AS SELECT {S2AG_CITATION_SELECT} "
                f"FROM {_scan(diff_shards(diff, 'citations', 'updates'), S2AG_CITATION_COLUMNS)} "
                f"WHERE citingcorpusid IN {covered}")
    con.execute(f"""CREATE TEMP TABLE dc AS SELECT * FROM {_scan(diff_shards(diff, 'citations', 'deletes'), _CITATION_KEYS)}
                    WHERE citationid IN (SELECT citationid FROM {old_citations})
                       OR citingcorpusid IN (SELECT corpusid FROM {part(state, 'covered')})""")
    con.execute(f"""CREATE TEMP TABLE gone AS
                    SELECT o.citationid, o.citingcorpusid, o.citedcorpusid FROM {old_citations} o SEMI JOIN dc USING (citationid)
                    UNION
                    SELECT o.citationid, o.citingcorpusid, o.citedcorpusid FROM {old_citations} o
                    SEMI JOIN (SELECT * FROM dc WHERE citationid IS NULL) d USING (citingcorpusid, citedcorpusid)""")
    # a row S2 wrote without a citationid is matched by its two corpus ids alone
    copy(con, f"""SELECT * FROM {old_citations} o
                  WHERE citingcorpusid IN {covered}
                    AND NOT EXISTS (SELECT 1 FROM gone g WHERE g.citationid IS NOT DISTINCT FROM o.citationid
                                    AND g.citingcorpusid IS NOT DISTINCT FROM o.citingcorpusid
                                    AND g.citedcorpusid IS NOT DISTINCT FROM o.citedcorpusid)
                    AND (citationid IS NULL OR citationid NOT IN (SELECT citationid FROM uc WHERE citationid IS NOT NULL))
                  UNION ALL SELECT * FROM uc""", tmp / "citations" / "part-00000.parquet")
