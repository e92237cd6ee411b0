"""What the graph stage answers from an S2AG release's folder (:mod:`revbench.warehouse.bulk_state`)
for its corpus papers, shaped in one SQL pass close to the graph tables' rows: per reference the
citing paper and its position, the cited paper's URL, title, year, DOI and arXiv id as S2 wrote
them, its external ids as the API parser's JSON text, ``isinfluential``, the count of ``contexts``
(null where S2 wrote null: unknown; 0 where not a list, as the parser's ``as_list``) and the ``intents`` flattened; per paper its fields of study.
The rules that finish each value (:func:`revbench.tasks.graph_bulk.s2ag_framed`) are the API
parsers' (``revbench.clients.s2_graph``), over whole columns instead of one row at a time.

Strings come out of DuckDB as valid UTF-8: its JSON reader refuses a line holding a lone
surrogate (``\\ud800``) or bytes that are not UTF-8, so none reaches a frame uncleaned.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from revbench.warehouse.bulk import _connect, keys_in
from revbench.warehouse.bulk_state import part

_ONE_ROW = ("url NULLS LAST, title NULLS LAST, year NULLS LAST, externalids NULLS LAST, s2fieldsofstudy NULLS LAST, "
            "publicationtypes NULLS LAST")
"""Which of two rows of one corpus id (a release that lists a paper twice) is read: a fixed choice."""
# External ids as ``json.dumps(ids, sort_keys=True, ensure_ascii=False)`` writes the non-null ones,
# read off DuckDB's own minified text of the object (the state keeps it so) without parsing it:
# where the text holds no backslash no string holds a quote, so each "key":value pair is found by
# a pattern, and those whose value is a string or an integer are written as Python writes them,
# sorted by key (a key's closing quote sorts before every character but a space and "!"). Any
# other object (an escape, a float, a list, a key twice or with a space) is the Python parser's
# (``odd_ids``), as is each value of it.
_PAIRS = f"""SELECT *, regexp_extract_all(t, '"([^"]*)":', 1) AS keys,
                    list_transform(regexp_extract_all(t, '"[^"]*":(?:"[^"]*"|-?[0-9]+)[,}}]'), lambda p: left(p, -1)) AS plain,
                    len(regexp_extract_all(t, '"[^"]*":null[,}}]')) AS nulls
             FROM (SELECT *, CASE WHEN starts_with(externalids, '{{') THEN externalids END AS t FROM papers_of_cited)"""
_ODD = ("(contains(t, '\\') OR len(keys) <> len(plain) + nulls OR len(list_distinct(keys)) <> len(keys) "
        "OR list_bool_or(list_transform(keys, lambda k: regexp_matches(k, '[ !]'))))")


def _id(name: str) -> str:
    return f"""CASE WHEN regexp_matches(t, '"{name}":"') THEN regexp_extract(t, '"{name}":"([^"]*)"', 1) END"""


_CITED = f"""SELECT corpusid, url, title, year,
                    CASE WHEN NOT odd THEN {_id('DOI')} END AS doi, CASE WHEN NOT odd THEN {_id('ArXiv')} END AS arxiv,
                    CASE WHEN NOT odd AND len(plain) > 0 THEN
                        '{{' || array_to_string(list_transform(list_sort(plain), lambda p: regexp_replace(p, '":', '": ')),
                                                ', ') || '}}' END AS external_ids,
                    CASE WHEN odd THEN t END AS odd_ids
             FROM (SELECT *, coalesce({_ODD}, false) AS odd FROM ({_PAIRS}))"""

_INTENTS = """SELECT intents, CASE WHEN json_type(intents::JSON) = 'ARRAY' THEN
                 list_filter(list_transform(list_filter(flatten(list_transform(CAST(intents::JSON AS JSON[]),
                     lambda g: CASE WHEN json_type(g) = 'ARRAY' THEN CAST(g AS JSON[]) ELSE [g] END)),
                     lambda i: json_type(i) = 'VARCHAR'), lambda i: json_extract_string(i, '$')), lambda i: i <> '')
               ELSE [] END AS flat
               FROM (SELECT DISTINCT intents FROM cites)"""
"""S2AG's intents, one list per context, as one list of strings (kept in order; each once is the
parser's), made once per distinct value: a few hundred among millions of references."""

_EDGES = """SELECT c.arxiv AS citing_arxiv_id,
                   row_number() OVER (PARTITION BY c.citingcorpusid ORDER BY c.citationid NULLS LAST,
                       c.citedcorpusid NULLS LAST, c.isinfluential NULLS LAST) - 1 AS ordinal,
                   c.citedcorpusid AS cited_corpusid, c.isinfluential AS is_influential,
                   CASE WHEN c.contexts IS NULL OR c.contexts = 'null' THEN NULL
                        ELSE json_array_length(c.contexts) END::BIGINT AS n_contexts,
                   coalesce(i.flat, []) AS intents
            FROM cites c LEFT JOIN intents i ON i.intents = c.intents"""
"""Every reference of the wanted papers, the cited paper by its corpus id (its values are
``cited``'s, once per paper however many cite it)."""


def _field(key: str) -> str:
    return f"CASE WHEN json_type(u.f, '$.{key}') = 'VARCHAR' THEN json_extract_string(u.f, '$.{key}') END"


_TOPICS = f"""SELECT m.arxiv, u.i AS idx, {_field('category')} AS category, {_field('source')} AS origin
              FROM mine m, unnest(CASE WHEN json_type(m.s2fieldsofstudy::JSON) = 'ARRAY'
                                       THEN CAST(m.s2fieldsofstudy::JSON AS JSON[]) END) WITH ORDINALITY u(f, i)
              ORDER BY m.arxiv, idx"""


def _papers_of_cited(con, state: Path, ids: str) -> str:  # noqa: ANN001
    """The temp table ``papers_of_cited``: one row of each paper ``ids`` (SQL) names, read as
    :data:`_ONE_ROW` chooses."""
    return f"""CREATE TEMP TABLE papers_of_cited AS SELECT * FROM {part(state, 'papers', keys_in(con, 'corpusid', ids))}
               QUALIFY row_number() OVER (PARTITION BY corpusid ORDER BY {_ONE_ROW}) = 1"""


def s2ag_answers(state: Path, arxiv_ids: Iterable[str]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """For the covered papers among ``arxiv_ids``, from a release's folder: ``papers`` (``arxiv``,
    ``url``), their fields of study (``arxiv, idx, category, origin``: S2's strings, null where
    not one), their references (``citing_arxiv_id, ordinal`` in each paper's ``citationid`` order,
    S2's; ``cited_corpusid, is_influential, n_contexts, intents``) and the papers they cite that
    the release holds (``corpusid``, its values as S2 wrote them: ``url, title, year, doi, arxiv``,
    ``external_ids`` as JSON text or ``odd_ids`` for the parser)."""
    con = _connect()
    try:
        con.register("wanted", pl.DataFrame({"arxiv": sorted(set(arxiv_ids))}, schema={"arxiv": pl.Utf8}))
        covered = part(state, "covered", "arxiv IN (SELECT arxiv FROM wanted)")
        con.execute(f"CREATE TEMP TABLE wanted_ids AS SELECT * FROM {covered}")
        papers, citations = part(state, "papers"), part(state, "citations")
        n_wanted, n_covered = con.execute(f"SELECT (SELECT count(*) FROM wanted_ids), count(*) FROM {part(state, 'covered')}"
                                          ).fetchall()[0]
        if n_wanted * 10 < n_covered:
            # A day's few papers: each part filtered to their keys before the join, which would
            # read every column of the release's rows (the citations' contexts most of all) for
            # the few it keeps; for most of the release the filter is only a second join.
            papers = part(state, "papers", keys_in(con, "corpusid", "SELECT corpusid FROM wanted_ids"))
            citations = part(state, "citations", keys_in(con, "citingcorpusid", "SELECT corpusid FROM wanted_ids"))
        con.execute(f"""CREATE TEMP TABLE mine AS SELECT c.arxiv, p.corpusid, p.url, p.s2fieldsofstudy
                        FROM wanted_ids c JOIN {papers} p USING (corpusid)
                        QUALIFY row_number() OVER (PARTITION BY c.arxiv ORDER BY {_ONE_ROW}) = 1""")
        con.execute(f"CREATE TEMP TABLE cites AS SELECT c.*, m.arxiv FROM {citations} c JOIN mine m ON c.citingcorpusid = m.corpusid")
        con.execute(_papers_of_cited(con, state, "SELECT citedcorpusid FROM cites"))
        con.execute(f"CREATE TEMP TABLE cited AS {_CITED}")
        con.execute(f"CREATE TEMP TABLE intents AS {_INTENTS}")
        return (con.sql("SELECT arxiv, url FROM mine ORDER BY arxiv").pl(), con.sql(_TOPICS).pl(),
                con.sql(_EDGES).pl(), con.sql("SELECT * FROM cited").pl())
    finally:
        con.close()


def s2ag_cited_papers(state: Path, corpus_ids: Iterable[int]) -> pl.DataFrame:
    """The values of these papers as references to them carry them (``corpusid, url, title, year,
    doi, arxiv, external_ids, odd_ids``: :func:`s2ag_answers`' cited papers), from a release's folder."""
    con = _connect()
    try:
        con.register("wanted", pl.DataFrame({"corpusid": sorted(set(corpus_ids))}, schema={"corpusid": pl.Int64}))
        con.execute(_papers_of_cited(con, state, "SELECT corpusid FROM wanted"))
        return con.sql(f"SELECT * FROM ({_CITED}) ORDER BY corpusid").pl()
    finally:
        con.close()
