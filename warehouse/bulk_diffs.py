"""An S2AG increment (the Datasets API's diffs between two releases: per dataset, ``updates``
rows of its own shape, ``deletes`` carrying the keys) applied to what the graph stage keeps of the
release it starts from (:mod:`revbench.warehouse.bulk_state`), giving the folder of the release it
leads to.

A diff's ``updates`` replace the rows of their key (``corpusid``, ``citationid``) or add them, its
``deletes`` remove them (a citation delete without a ``citationid`` matches by its two corpus
ids); deletes apply before updates. The folder it gives is a layer over the one it starts from:
that folder's parts linked, the increment's rows a part of their own, the rows they replace or
delete masked (rewritten whole only once the masks hide a large share). Applying one is a function
of the folder it starts from and the diff, so a run that applies it again writes the same folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from revbench.warehouse.bulk import (
    S2AG_CITATION_COLUMNS,
    S2AG_CITATION_SELECT,
    S2AG_PAPER_COLUMNS,
    S2AG_PAPER_SELECT,
    _scan,
    diff_shards,
    keys_in,
)
from revbench.warehouse.bulk_state import (
    Corpus,
    begin,
    best_cover,
    compact,
    copy,
    link_parts,
    mask_rows,
    part,
    piece_db,
    publish,
    q,
    register_corpus,
)

_PAPER_KEYS = {"corpusid": "BIGINT"}
S2_PAPER_URL = "(?:^|/)[0-9a-f]{40}/*$"
"""A URL a reference's ``cited_s2_id`` is read from (``tasks.graph_bulk.s2_paper_id``): without
one, the references naming the paper cannot be found by it, and their papers are answered again."""
_CITATION_KEYS = {k: S2AG_CITATION_COLUMNS[k] for k in ("citationid", "citingcorpusid", "citedcorpusid")}


class Applied(NamedTuple):
    """What an increment changed of the corpus papers' answers (arXiv ids; corpus ids)."""

    changed: list[str]
    """Covered papers to answer again: their row or a citation of theirs changed, or they are
    covered now, or a paper they cite changed past patching (deleted, or its row's URL changed)."""
    dropped: list[str]
    """Papers no longer covered (S2 deleted them)."""
    patched: list[str]
    """Covered papers not in ``changed`` that cite a paper of ``recited``: their answer differs
    only in the values of those references, patched where they are stored."""
    recited: list[int]
    """Papers the increment updated under the same URL (so the references naming them are found by
    it): a reference's values come from the cited paper's row, so only those references change."""


def apply_diff(state: Path, diff: Path, out: Path, corpus: Corpus, threads: int = 1) -> Applied:
    """The folder of the release an increment (``diff``: its ``papers`` and ``citations``
    updates and deletes) leads to from the one in ``state``, written to ``out``; a corpus paper
    (``corpus``) the increment adds is covered from then on. Returns what it changed of the
    corpus papers' answers (:class:`Applied`).

    Every join builds on the increment's side or the corpus's, never the release's; the
    release's rows are read, never written again (but when :func:`compact` rewrites a part)."""
    tmp = begin(out)
    con = piece_db(threads)
    try:
        register_corpus(con, corpus)
        for name in ("papers", "citations"):
            link_parts(state, tmp, name)
        added = _diff_papers(con, state, diff, tmp)
        _diff_citations(con, state, diff, tmp)
        covered, old_covered = part(tmp, "covered"), part(state, "covered")
        # A paper updated under the one URL it had (one row before, one after) is found where it
        # is cited by that URL's id: those references are patched, their papers not answered again.
        con.execute(f"""CREATE TEMP TABLE recited AS SELECT n.corpusid FROM read_parquet({q(added)}) n
                        JOIN (SELECT corpusid, url
                              FROM {part(state, 'papers', keys_in(con, 'corpusid', 'SELECT corpusid FROM up'))}) o
                        USING (corpusid) GROUP BY n.corpusid
                        HAVING count(*) = 1 AND bool_and(n.url = o.url AND regexp_matches(n.url, '{S2_PAPER_URL}'))""")
        con.execute(f"""CREATE TEMP TABLE citers AS SELECT citingcorpusid, citedcorpusid IN (SELECT corpusid FROM recited) AS patch
                        FROM {part(tmp, 'citations', keys_in(con, 'citedcorpusid', 'SELECT corpusid FROM changed'))}""")
        changed = con.sql(f"""SELECT DISTINCT c.arxiv FROM {covered} c
                              WHERE c.corpusid IN (SELECT corpusid FROM changed)
                                 OR c.corpusid IN (SELECT citingcorpusid FROM uc UNION SELECT citingcorpusid FROM gone)
                                 OR c.corpusid IN (SELECT citingcorpusid FROM citers WHERE NOT patch)
                                 OR NOT EXISTS (SELECT 1 FROM {old_covered} o WHERE o.arxiv = c.arxiv
                                                AND o.corpusid = c.corpusid)
                              ORDER BY 1""").pl()["arxiv"].to_list()
        patched = con.sql(f"""SELECT DISTINCT c.arxiv FROM {covered} c
                              WHERE c.corpusid IN (SELECT citingcorpusid FROM citers WHERE patch)
                              ORDER BY 1""").pl()["arxiv"].to_list()
        recited = con.sql("SELECT corpusid FROM recited ORDER BY 1").pl()["corpusid"].to_list()
        dropped = con.sql(f"SELECT arxiv FROM {old_covered} WHERE arxiv NOT IN (SELECT arxiv FROM {covered}) "
                          "ORDER BY 1").pl()["arxiv"].to_list()
        for name in ("papers", "citations"):
            compact(con, tmp, name)
    finally:
        con.close()
    publish(tmp, out)
    whole = set(changed)
    return Applied(changed, dropped, [a for a in patched if a not in whole], recited)


def _diff_papers(con, state: Path, diff: Path, tmp: Path) -> Path:  # noqa: ANN001
    """``papers`` and ``covered`` after the increment; temp tables ``up`` (its updated papers'
    ids), ``changed`` (every id it touched) and ``removed`` (deleted, not updated again).
    Returns the increment's own part of ``papers``."""
    ups = diff_shards(diff, "papers", "updates")
    con.execute(f"CREATE TEMP TABLE up AS SELECT corpusid, externalids->>'ArXiv' AS arxiv "
                f"FROM {_scan(ups, S2AG_PAPER_COLUMNS)} WHERE corpusid IS NOT NULL")
    con.execute(f"CREATE TEMP TABLE removed AS SELECT corpusid FROM {_scan(diff_shards(diff, 'papers', 'deletes'), _PAPER_KEYS)} "
                "WHERE corpusid IS NOT NULL EXCEPT SELECT corpusid FROM up")
    con.execute("CREATE TEMP TABLE changed AS SELECT corpusid FROM up UNION SELECT corpusid FROM removed")
    mask_rows(con, state, tmp, "papers", "corpusid IN (SELECT corpusid FROM changed)")
    added = tmp / "papers" / f"diff-{diff.name}.parquet"
    copy(con, f"SELECT {S2AG_PAPER_SELECT} FROM {_scan(ups, S2AG_PAPER_COLUMNS)} WHERE corpusid IS NOT NULL", added)
    con.execute(f"CREATE TEMP TABLE kept AS SELECT * FROM {part(state, 'covered')} ANTI JOIN removed USING (corpusid)")
    # A kept paper stays covered as its row is now; a paper the increment adds (one the release did
    # not hold, so all its citations are in the increment) is covered when the corpus has it and it
    # is the better record of its arXiv id. A paper the release held uncovered is not: what the
    # stage keeps has none of its citations.
    con.execute(f"CREATE TEMP TABLE candidates AS SELECT * FROM read_parquet({q(added)}) "
                "WHERE arxiv IN (SELECT arxiv FROM corpus)")
    # Only an arXiv id the increment touched (its covered paper changed, or a record of it came)
    # may be covered otherwise: the choice is made again for those alone, each from the same
    # contenders as over the whole release; every other covered paper stays as it was.
    con.execute("""CREATE TEMP TABLE touched AS SELECT arxiv FROM kept WHERE corpusid IN (SELECT corpusid FROM changed)
                   UNION SELECT arxiv FROM candidates""")
    copy(con, f"""SELECT arxiv, corpusid FROM kept
                  WHERE arxiv NOT IN (SELECT arxiv FROM touched) AND arxiv IN (SELECT arxiv FROM corpus)
                  UNION ALL """ + best_cover(
        f"""SELECT k.arxiv, p.* EXCLUDE (arxiv) FROM (SELECT * FROM kept WHERE arxiv IN (SELECT arxiv FROM touched)) k
                JOIN {part(tmp, 'papers', 'corpusid IN (SELECT corpusid FROM kept WHERE arxiv IN (SELECT arxiv FROM touched))')} p
                USING (corpusid)
            UNION ALL BY NAME
            SELECT * FROM candidates
            WHERE corpusid NOT IN (SELECT corpusid
                                   FROM {part(state, 'papers', 'corpusid IN (SELECT corpusid FROM candidates)')})"""),
         tmp / "covered.parquet")
    return added


def _diff_citations(con, state: Path, diff: Path, tmp: Path) -> None:  # noqa: ANN001
    """``citations`` after the increment; temp tables ``uc`` (its updated citations of covered
    papers) and ``gone`` (the kept citations it deletes, by all three ids)."""
    covered, old_citations = f"(SELECT corpusid FROM {part(tmp, 'covered')})", part(state, "citations")
    con.execute(f"CREATE TEMP TABLE uc AS SELECT {S2AG_CITATION_SELECT} "
                f"FROM {_scan(diff_shards(diff, 'citations', 'updates'), S2AG_CITATION_COLUMNS)} "
                f"WHERE citingcorpusid IN {covered}")
    con.execute(f"CREATE TEMP TABLE deletes AS SELECT * FROM {_scan(diff_shards(diff, 'citations', 'deletes'), _CITATION_KEYS)}")
    # the release's rows probed for the increment's few keys (a hash of those), not the increment's
    # keys tested against a hash of the release's millions
    con.execute(f"""CREATE TEMP TABLE dc AS SELECT * FROM deletes
                    WHERE citationid IN (SELECT o.citationid FROM {old_citations} o SEMI JOIN deletes USING (citationid))
                       OR citingcorpusid IN (SELECT corpusid FROM {part(state, 'covered')})""")
    con.execute(f"""CREATE TEMP TABLE gone AS
                    SELECT o.citationid, o.citingcorpusid, o.citedcorpusid FROM {old_citations} o SEMI JOIN dc USING (citationid)
                    UNION
                    SELECT o.citationid, o.citingcorpusid, o.citedcorpusid FROM {old_citations} o
                    SEMI JOIN (SELECT * FROM dc WHERE citationid IS NULL) d USING (citingcorpusid, citedcorpusid)""")
    # A row S2 wrote without a citationid is matched by its two corpus ids alone. Kept: a row of a
    # covered paper neither deleted nor replaced (by its citationid); the rest is masked.
    mask_rows(con, state, tmp, "citations",
              f"""NOT coalesce(r.citingcorpusid IN {covered}, false)
                  OR EXISTS (SELECT 1 FROM gone g WHERE g.citationid IS NOT DISTINCT FROM r.citationid
                             AND g.citingcorpusid IS NOT DISTINCT FROM r.citingcorpusid
                             AND g.citedcorpusid IS NOT DISTINCT FROM r.citedcorpusid)
                  OR coalesce(r.citationid IN (SELECT citationid FROM uc WHERE citationid IS NOT NULL), false)""")
    copy(con, "SELECT * FROM uc", tmp / "citations" / f"diff-{diff.name}.parquet")
