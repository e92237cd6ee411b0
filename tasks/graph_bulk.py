"""The bulk datasets' rows as the graph stage's answers: the same rows the API pieces return, with
the same values, made over whole columns. At 160k papers the bulk files hold millions of
references: one Python parser call per row would cost more than the API path's own parsing, so
the rules of the API parsers (``revbench.clients.s2_graph``, ``revbench.clients.openalex_graph``)
are written here once more as polars expressions, and the tests hold the two to the same rows
(``tests/graph/test_bulk_vector.py``).

S2AG (:func:`s2ag_framed`, over ``revbench.warehouse.bulk_answers``): a citation is a
``/references`` edge: the cited paper's S2 id (the 40-hex id its ``url`` ends in), DOI, arXiv id,
title and year from the ``papers`` dataset, its external ids as the parser's JSON text;
``isinfluential``; ``n_contexts`` null where S2 wrote null contexts (unknown), and the intents
flattened. A cited paper the ``papers`` dataset does not hold keeps its corpus id
(``{"CorpusId": ...}``), so no edge loses what the bulk file said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from revbench.clients import s2_graph
from revbench.clients.optional import as_dict
from revbench.schemas.graph import CITATIONS, GRAPH_FETCHES, PAPER_TOPICS

PY_SPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
           "\u2028\u2029\u202f\u205f\u3000"
"""What Python's ``str.strip()`` strips (``str.isspace``): the parsers' ``as_text`` strips these,
and polars' own whitespace leaves out ``\\x1c``-``\\x1f``."""
_NOT_SPACE = "[^" + "".join(f"\\x{{{ord(c):x}}}" for c in PY_SPACE) + "]"
"""Python's ``\\S``, for the regular expressions the parsers match with it."""
FETCH_COLUMNS = [c for c in GRAPH_FETCHES.names if c not in ("run_id", "fetched_at")]


def as_text(column: pl.Expr) -> pl.Expr:
    """``optional.as_text`` over a column of strings: stripped as Python strips, null when blank."""
    stripped = column.str.strip_chars(PY_SPACE)
    return pl.when(stripped.str.len_bytes() > 0).then(stripped)


def normalise_doi(column: pl.Expr) -> pl.Expr:
    """``s2_graph.normalise_doi``: lower case, no resolver prefix, null unless shaped as a DOI."""
    doi = as_text(column).str.replace(r"(?i)^(?:https?://(?:dx\.)?doi\.org/|doi:)", "").str.to_lowercase()
    return pl.when(doi.str.contains(rf"^10\.\d{{4,9}}/{_NOT_SPACE}+$")).then(doi)


def arxiv_id_of(column: pl.Expr) -> pl.Expr:
    """``s2_graph.arxiv_id_of``: no ``arXiv:`` prefix, no version, null unless shaped as an arXiv id."""
    text = as_text(column).str.strip_prefix("arXiv:").str.strip_prefix("arxiv:").str.replace(r"v\d+$", "")
    return pl.when(text.str.contains(r"^(?:\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})$")).then(text)


def s2_paper_id(url: pl.Expr) -> pl.Expr:
    """The 40-hex paper id an S2 paper URL ends in (``.../paper/<sha>``, trailing slashes aside)."""
    return url.str.extract(r"(?:^|/)([0-9a-f]{40})/*$", 1)


@dataclass
class Framed:
    """What a source's bulk files answered, as the graph tables' frames: the bulk path's
    ``Fetched`` (``citations`` in the source's columns, ``fetches`` without the run's stamps)."""

    source: str
    citations: pl.DataFrame
    topics: pl.DataFrame
    fetches: pl.DataFrame
    institutions: pl.DataFrame | None = None
    affiliations: pl.DataFrame | None = None
    authorships: pl.DataFrame | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)
    """``arxiv_id, source, kind, error``: as ``Fetched.failures``."""
    work_ids: dict[str, str] = field(default_factory=dict)
    """OpenAlex only: each paper's own work id -> its arXiv id."""
    patched: pl.DataFrame | None = None
    """S2AG only: stored references of papers not answered again whose cited paper an increment
    updated, its new values in place (:func:`patched_references`), to resolve and write back."""

    def answered(self) -> set[str]:
        """The papers this answer is for."""
        return set(self.fetches["arxiv_id"].to_list())

    def held(self) -> Framed:
        """This answer less the papers the files do not hold (no answer: the API is asked for them)."""
        held = set(self.fetches.filter(pl.col("found"))["arxiv_id"].to_list())
        self.fetches = self.fetches.filter(pl.col("arxiv_id").is_in(list(held)))
        self.failures = [f for f in self.failures if f["arxiv_id"] in held]
        return self


def citations_of(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (the source's citation columns, any of them) as the ``citations`` table's frame."""
    return CITATIONS.conform(rows)


def fetches_of(ids: list[str], source: str, kinds: dict[str, pl.DataFrame], found: pl.DataFrame) -> pl.DataFrame:
    """One fetch record per paper of ``ids`` and kind (in ``kinds``' order, a paper's together):
    found where ``found`` (``arxiv_id, source_paper_id``) has it, ``n_rows`` its rows of the kind
    (``kinds``: each kind's rows, by ``arxiv_id``); a paper not found has none and no paper id."""
    order = pl.DataFrame({"arxiv_id": ids}, schema={"arxiv_id": pl.Utf8}).with_row_index("_i")
    base = order.join(found.select("arxiv_id", "source_paper_id", found=pl.lit(True)), on="arxiv_id", how="left",
                      maintain_order="left").with_columns(pl.col("found").fill_null(False))
    frames = []
    for k, (kind, rows) in enumerate(kinds.items()):
        counts = rows.group_by("arxiv_id").len("n_rows")
        frames.append(base.join(counts, on="arxiv_id", how="left", maintain_order="left").with_columns(
            source=pl.lit(source), kind=pl.lit(kind), n_rows=pl.col("n_rows").fill_null(0).cast(pl.Int64), _k=pl.lit(k)))
    return pl.concat(frames).sort("_i", "_k").select(FETCH_COLUMNS)


def _odd_ids(texts: pl.Series) -> pl.DataFrame:
    """The parser's own ``external_ids``, DOI and arXiv id of external ids SQL does not write as
    Python would (an escape, a float, a nested value, a key twice: :mod:`revbench.warehouse.bulk_answers`)."""
    rows = []
    for text in texts.unique().to_list():
        ids = as_dict(json.loads(text))
        rows.append((text, s2_graph.external_ids_text(ids), s2_graph.normalise_doi(ids.get("DOI")),
                     s2_graph.arxiv_id_of(ids.get("ArXiv"))))
    return pl.DataFrame(rows, schema={"odd_ids": pl.Utf8, "_ids": pl.Utf8, "_doi": pl.Utf8, "_arxiv": pl.Utf8},
                        orient="row")


def s2ag_cited(cited: pl.DataFrame) -> pl.DataFrame:
    """The cited papers' values (``revbench.warehouse.bulk_answers.s2ag_answers``) by
    ``s2_graph.reference_row``'s rules, once per paper however many references name it."""
    odd = cited["odd_ids"].drop_nulls()
    if odd.len():
        cited = cited.join(_odd_ids(odd), on="odd_ids", how="left", maintain_order="left")
    else:
        cited = cited.with_columns(_ids=pl.lit(None, pl.Utf8), _doi=pl.lit(None, pl.Utf8), _arxiv=pl.lit(None, pl.Utf8))
    plain = pl.col("odd_ids").is_null()
    return cited.select(
        pl.col("corpusid").alias("cited_corpusid"), s2_paper_id(pl.col("url")).alias("cited_s2_id"),
        pl.when(plain).then(normalise_doi(pl.col("doi"))).otherwise("_doi").alias("cited_doi"),
        pl.when(plain).then(arxiv_id_of(pl.col("arxiv"))).otherwise("_arxiv").alias("cited_arxiv"),
        as_text(pl.col("title")).alias("cited_title"), pl.col("year").alias("cited_year"),
        pl.when(plain).then(pl.col("external_ids")).otherwise("_ids").alias("external_ids"), pl.lit(True).alias("_in_release"))


def s2ag_citations(edges: pl.DataFrame, cited: pl.DataFrame) -> pl.DataFrame:
    """``citations`` rows of S2AG's references: each value by ``s2_graph.reference_row``'s rule. A
    cited paper the release does not hold is known by its corpus id alone (``externalIds.CorpusId``)."""
    rows = edges.join(s2ag_cited(cited), on="cited_corpusid", how="left", maintain_order="left")
    unheld = pl.format('{{"CorpusId": "{}"}}', pl.col("cited_corpusid"))
    return citations_of(rows.select(
        "citing_arxiv_id", pl.lit(s2_graph.SOURCE).alias("source"), "ordinal", "cited_s2_id", "cited_doi", "cited_arxiv",
        "cited_title", "cited_year", "is_influential", pl.col("intents").list.unique(maintain_order=True).alias("intents"),
        "n_contexts", pl.when(pl.col("_in_release")).then(pl.col("external_ids")).otherwise(unheld).alias("external_ids")))


def cited_s2_ids(cited: pl.DataFrame) -> list[str]:
    """The S2 ids references carry of these cited papers (their rows, as :func:`patched_references` takes them)."""
    return cited.select(s2_paper_id(pl.col("url")).alias("i")).drop_nulls()["i"].unique().sort().to_list()


PATCH_READS = ("citing_arxiv_id", "source", "ordinal", "cited_arxiv_id", "cited_s2_id", "cited_openalex_id")
"""What a patch reads of a stored reference: its key, the S2 id its new values are found by, and what
resolving it again reads besides them; every other column stays as stored when it is written back."""


def patched_references(stored: pl.DataFrame, cited: pl.DataFrame) -> pl.DataFrame:
    """The ``stored`` references (``citations`` rows, whole or :data:`PATCH_READS`) naming one of the
    ``cited`` papers (their rows, ``revbench.warehouse.bulk_answers.s2ag_cited_papers``) by its S2
    id, with that paper's values as an answer given now carries them; each other column as stored."""
    values = s2ag_cited(cited).drop("cited_corpusid", "_in_release").unique("cited_s2_id", keep="first")
    replaced = [c for c in values.columns if c != "cited_s2_id"]
    out = stored.drop(replaced, strict=False).join(values, on="cited_s2_id", how="inner", maintain_order="left")
    return out.select([c for c in CITATIONS.names if c in stored.columns or c in replaced])


def s2ag_topics(topics: pl.DataFrame) -> pl.DataFrame:
    """``paper_topics`` rows of S2AG's fields of study (``arxiv, idx, category, origin``): each
    category with its source as origin (``unknown`` without one), once per (topic, origin)."""
    rows = topics.select(pl.col("arxiv").alias("arxiv_id"), as_text(pl.col("category")).alias("topic"),
                         pl.coalesce(as_text(pl.col("origin")), pl.lit("unknown")).alias("origin"))
    rows = rows.drop_nulls("topic").unique(["arxiv_id", "topic", "origin"], keep="first", maintain_order=True)
    return PAPER_TOPICS.conform(rows.with_columns(scheme=pl.lit(s2_graph.SCHEME), label=pl.col("topic")))


def s2ag_framed(arxiv_ids: list[str], papers: pl.DataFrame, topics: pl.DataFrame, edges: pl.DataFrame,
                cited: pl.DataFrame) -> Framed:
    """The ``s2`` answers for ``arxiv_ids`` from S2AG
    (``revbench.warehouse.bulk_answers.s2ag_answers``): each paper's fields of study and
    references. A paper S2AG does not hold is recorded as not found, as the API's 404 is."""
    ids = list(dict.fromkeys(arxiv_ids))
    citations, rows = s2ag_citations(edges, cited), s2ag_topics(topics)
    found = papers.select(pl.col("arxiv").alias("arxiv_id"), s2_paper_id(pl.col("url")).alias("source_paper_id"))
    fetches = fetches_of(ids, s2_graph.SOURCE, {"topics": rows, "references": citations.rename({"citing_arxiv_id": "arxiv_id"})},
                         found)
    return Framed(s2_graph.SOURCE, in_order(citations, ids, "citing_arxiv_id", "ordinal"), in_order(rows, ids), fetches)


def in_order(rows: pl.DataFrame, ids: list[str], by: str = "arxiv_id", then: str | None = None) -> pl.DataFrame:
    """``rows`` of the papers ``ids``, a paper's together in the order of ``ids``, theirs by
    ``then`` (or as they are)."""
    order = pl.DataFrame({by: ids}, schema={by: pl.Utf8}).with_row_index("_i")
    return rows.join(order, on=by, maintain_order="left").sort(["_i", *([then] if then else [])],
                                                                 maintain_order=True).drop("_i")
