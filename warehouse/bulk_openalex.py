"""The OpenAlex snapshot's works and authors read where they lie (``revbench.warehouse.bulk`` names
the layout), each file one piece: the entities the corpus asks for, taken apart by SQL into the
parts the graph's tables are made of, so no whole entity crosses into Python and none is parsed
there.

- ``works``: ``eid, key, id, year`` (``publication_year`` when an integer); ``refs``: ``eid,
  ordinal, ref`` (``referenced_works`` in order, a non-string element null so the others keep
  their places); ``topics``: ``eid, idx, id, label, score, domain, field, subfield`` (``topics``
  in order, then ``primary_topic``); ``authorships``: ``eid, position, author_id, orcid, raw_name,
  display_name, places`` (the authorship's ``institutions``, ``affiliations`` and
  ``raw_affiliation_strings`` as JSON text: what its institutions are made from).
- ``authors``: ``eid, key, id, orcid``; ``places``: ``eid, idx, institution`` (JSON text),
  ``years`` (the integers among them).

Each value is what the entity holds at that key when it has the type the API parsers read (a
string, a number), else null: the parsers' rules (``revbench.clients.openalex_graph``) finish them
over whole columns (:mod:`revbench.tasks.graph_bulk_openalex`). ``eid`` orders the entities: a
later file (a newer ``updated_date``) after an earlier one, so the newest copy of each wins.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from revbench.warehouse.bulk import Mapper, _connect, _files, piece_connection, serial, shards

_PER_FILE = 1 << 32
"""An entity's ``eid``: its file's place among the files read times this, plus its place in the file."""


def _text(json: str, path: str) -> str:
    return f"CASE WHEN json_type({json}, '{path}') = 'VARCHAR' THEN json_extract_string({json}, '{path}') END"


def _items(json: str, path: str) -> str:
    """A list of the JSON elements at ``path`` (none where it holds no list)."""
    return f"CASE WHEN json_type({json}, '{path}') = 'ARRAY' THEN CAST(json_extract({json}, '{path}') AS JSON[]) END"


def _string(json: str) -> str:
    return f"CASE WHEN json_type({json}) = 'VARCHAR' THEN json_extract_string({json}, '$') END"


# The shapes a list of objects is read in at once (one parse of the list, not one per key); every
# value JSON, so a value of another type than the parser reads is null, not cast to text.
_TOPIC = ('{"id": "JSON", "display_name": "JSON", "score": "JSON", "domain": {"display_name": "JSON"}, '
          '"field": {"display_name": "JSON"}, "subfield": {"display_name": "JSON"}}')
_AUTHORSHIP = ('{"author": {"id": "JSON", "orcid": "JSON", "display_name": "JSON"}, "raw_author_name": "JSON", '
               '"institutions": "JSON", "affiliations": "JSON", "raw_affiliation_strings": "JSON"}')
_INTEGER = "('BIGINT', 'UBIGINT')"
_NUMBER = "('BIGINT', 'UBIGINT', 'DOUBLE')"

KEYS: dict[str, list[str]] = {
    "works": ["id", "publication_year", "referenced_works", "topics", "primary_topic", "authorships"],
    "authors": ["id", "orcid", "affiliations"],
}
"""The keys of each dataset's entities the parts read: each entity is parsed once, into these
(``p[1]``...), and the parts read them, not the whole entity again."""

PARTS: dict[str, dict[str, str]] = {
    "works": {
        "works": f"""SELECT eid, key, {_text('p[1]', '$')} AS id,
                            CASE WHEN json_type(p[2]) IN {_INTEGER} THEN TRY_CAST(json_extract_string(p[2], '$') AS BIGINT) END
                                AS year
                     FROM hits""",
        "refs": f"""SELECT h.eid, (u.i - 1)::BIGINT AS ordinal, {_text('u.r', '$')} AS ref
                    FROM hits h, unnest({_items('h.p[3]', '$')}) WITH ORDINALITY u(r, i)""",
        "topics": f"""SELECT eid, idx::BIGINT AS idx, {_string('t.id')} AS id, {_string('t.display_name')} AS label,
                             CASE WHEN json_type(t.score) IN {_NUMBER} THEN t.score::DOUBLE END AS score,
                             {_string('t.domain.display_name')} AS domain, {_string('t.field.display_name')} AS field,
                             {_string('t.subfield.display_name')} AS subfield
                      FROM (SELECT h.eid, u.i AS idx, u.t FROM hits h,
                                   unnest(CASE WHEN json_type(h.p[4]) = 'ARRAY' THEN from_json(h.p[4], '[{_TOPIC}]') END)
                                   WITH ORDINALITY u(t, i)
                            UNION ALL SELECT eid, 1000000000 AS idx, from_json(p[5], '{_TOPIC}') FROM hits)""",
        "authorships": f"""SELECT h.eid, (u.i - 1)::BIGINT AS position, {_string('u.a.author.id')} AS author_id,
                                  {_string('u.a.author.orcid')} AS orcid, {_string('u.a.raw_author_name')} AS raw_name,
                                  {_string('u.a.author.display_name')} AS display_name,
                                  CASE WHEN u.a IS NOT NULL THEN '{{"institutions":' || coalesce(u.a.institutions::VARCHAR, 'null')
                                      || ',"affiliations":' || coalesce(u.a.affiliations::VARCHAR, 'null')
                                      || ',"raw_affiliation_strings":' || coalesce(u.a.raw_affiliation_strings::VARCHAR, 'null')
                                      || '}}' END AS places
                           FROM hits h, unnest(CASE WHEN json_type(h.p[6]) = 'ARRAY' THEN from_json(h.p[6], '[{_AUTHORSHIP}]') END)
                                WITH ORDINALITY u(a, i)""",
    },
    "authors": {
        "authors": f"SELECT eid, key, {_text('p[1]', '$')} AS id, {_text('p[2]', '$')} AS orcid FROM hits",
        "places": f"""SELECT h.eid, u.i::BIGINT AS idx,
                             CASE WHEN json_type(u.f) = 'OBJECT' THEN json_extract(u.f, '$.institution')::VARCHAR END
                                 AS institution,
                             coalesce(list_transform(list_filter({_items('u.f', '$.years')},
                                                                 lambda y: json_type(y) IN {_INTEGER}),
                                                     lambda y: TRY_CAST(json_extract_string(y, '$') AS BIGINT)),
                                      []::BIGINT[]) AS years
                      FROM hits h, unnest({_items('h.p[3]', '$')}) WITH ORDINALITY u(f, i)""",
    },
}
"""Per dataset, the parts of its entities (each a query over ``hits``: ``eid, key, p``, the
entity's :data:`KEYS` in order)."""


def snapshot_piece(file: str, index: int, dataset: str, key: str, wanted: str, lower: bool = False,
                   threads: int = 1) -> dict[str, pl.DataFrame]:
    """One snapshot file's entities whose ``key`` is one of ``wanted`` (a parquet file of ``k``;
    compared in lower case with ``lower``), taken apart into ``dataset``'s :data:`PARTS`."""
    con = piece_connection("openalex", threads)
    try:
        field = f"lower(json->>'{key}')" if lower else f"json->>'{key}'"
        paths = ", ".join(f"'$.{k}'" for k in KEYS[dataset])
        con.execute(f"""CREATE TEMP TABLE hits AS
                        SELECT {index * _PER_FILE} + row_number() OVER () AS eid, k AS key, json_extract(json, [{paths}]) AS p
                        FROM (SELECT {field} AS k, json FROM read_ndjson_objects({_files([file])},
                                     compression='auto_detect', ignore_errors=true))
                        WHERE k IN (SELECT k FROM read_parquet({_files([wanted])}))""")
        return {name: con.sql(query).pl() for name, query in PARTS[dataset].items()}
    finally:
        con.close()


def snapshot_rows(root: Path, dataset: str, key: str, wanted: Iterable[str], lower: bool = False,
                  after: str | None = None, mapper: Mapper = serial, threads: int = 1,
                  work: Path | None = None) -> dict[str, pl.DataFrame]:
    """The parts (:data:`PARTS`) of the snapshot's ``dataset`` entities whose ``key`` (``doi``,
    ``id``) is one of ``wanted``, one copy of each: the newest (an entity that changed is in the
    newest ``updated_date`` it was written to). ``after``: only the partitions written after that
    date. One piece per file (:func:`snapshot_piece`, run by ``mapper``); the keys they look for
    are written once to a file under ``work`` (a folder the pieces see; default: the system's
    temporary one)."""
    files = shards(root, dataset, after)
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in PARTS[dataset]}
    if files:
        if work is not None:
            work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            keys = Path(tmp) / "wanted.parquet"
            pl.DataFrame({"k": sorted(set(wanted))}, schema={"k": pl.Utf8}).write_parquet(keys)
            pieces = [(f, i, dataset, key, str(keys), lower, threads) for i, f in enumerate(files)]
            for got in mapper(snapshot_piece, pieces, f"openalex-{dataset}"):
                for name, frame in got.items():
                    parts[name].append(frame)
    if not files or not parts[dataset]:
        con = _connect()
        try:  # no file, no piece: the parts' columns, no rows
            con.execute("CREATE TEMP TABLE hits (eid BIGINT, key VARCHAR, p JSON[])")
            return {name: con.sql(query).pl() for name, query in PARTS[dataset].items()}
        finally:
            con.close()
    out = {name: pl.concat(frames, how="vertical_relaxed") for name, frames in parts.items()}
    newest = out[dataset].group_by("key").agg(pl.col("eid").max()).select("eid")
    return {name: frame.join(newest, on="eid", how="semi").sort(frame.columns[:2]) for name, frame in out.items()}
