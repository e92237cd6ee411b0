"""Resolving cited works to warehouse papers: one rule for the S2, OpenAlex and GROBID reference lists.

A cited work is a warehouse paper when its DOI is the paper's (arXiv's DOI of the published version,
or the DataCite DOI 10.48550/arXiv.<id> every arXiv paper has), else when its arXiv id is the
paper's, else when its normalised title is the paper's and the years differ by at most one (a
preprint's arXiv year and its venue's year often do). A key that names more than one paper resolves
nothing: a wrong edge would put the wrong people in a pool, a missing one only fails to add them.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

RESOLUTION_METHODS: tuple[str, ...] = ("doi", "arxiv", "title_year")
"""In order of trust; a reference takes the first that resolves it."""
MIN_TITLE_CHARS = 16
"""Normalised titles shorter than this ("introduction", "appendix", "deep learning") say too little to be evidence."""
TITLE_YEAR_SLACK = 1


@dataclass(frozen=True)
class Resolution:
    """The citations with ``cited_arxiv_id`` set where a reference resolved, and how many by each method."""

    citations: pl.DataFrame
    counts: dict[str, int]
    """``doi``, ``arxiv``, ``title_year`` and ``unresolved``: references resolved by each method, and not at all."""

    @property
    def resolved(self) -> int:
        return sum(self.counts[m] for m in RESOLUTION_METHODS)


def normalise_doi(doi: pl.Expr) -> pl.Expr:
    """The bare DOI, lower-case: no resolver prefix (https://doi.org/, doi:) and no spaces, which
    some sources keep and PDFs break lines with; null when there is none."""
    return doi.str.to_lowercase().str.replace_all(r"\s+", "").str.extract(r"(10\.\d{4,9}/\S+)", 1)


def bare_arxiv_id(arxiv: pl.Expr) -> pl.Expr:
    """An arXiv id as the warehouse keys papers: no ``arXiv:`` prefix, no version."""
    return arxiv.str.strip_chars().str.replace(r"(?i)^arxiv:\s*", "").str.replace(r"v\d+$", "").replace("", None)


def normalise_title(title: pl.Expr) -> pl.Expr:
    """Case-folded letters and digits only: no punctuation, spaces or accents (GROBID loses some,
    S2 keeps them), so one title matches under every source's spelling of it."""
    return (title.str.normalize("NFKD").str.to_lowercase().str.replace_all("ß", "ss")
            .str.replace_all(r"[^\p{L}\p{N}]+", "").replace("", None))


def _unique_keys(papers: pl.DataFrame, key: str) -> pl.DataFrame:
    """``key -> _match`` for keys that name exactly one paper."""
    return (papers.drop_nulls(key).unique([key, "_match"])
            .filter(pl.len().over(key) == 1).select(key, "_match"))


@dataclass(frozen=True)
class PaperIndex:
    """The warehouse papers' normalised keys, made once and used for every batch of references
    (normalising 150k titles costs more than resolving a piece's references against them)."""

    dois: pl.DataFrame
    """``_doi -> _match``: DOIs (the paper's own and arXiv's DataCite one) naming exactly one paper."""
    arxiv: pl.DataFrame
    """``_arxiv -> _match``: every paper's arXiv id."""
    titled: pl.DataFrame
    """``_title, _match, _paper_year``: papers whose normalised title is long enough to be evidence."""


def index_papers(papers: pl.DataFrame) -> PaperIndex:
    """Index ``papers`` (``arxiv_id, doi, title, year``) by the keys a reference can name them by."""
    known = papers.select(pl.col("arxiv_id").alias("_match"), normalise_doi(pl.col("doi").cast(pl.Utf8)).alias("_doi"),
                          normalise_title(pl.col("title").cast(pl.Utf8)).alias("_title"),
                          pl.col("year").cast(pl.Int64).alias("_paper_year"))
    dois = _unique_keys(pl.concat([
        known.select("_doi", "_match"),
        known.select(("10.48550/arxiv." + pl.col("_match").str.to_lowercase()).alias("_doi"), "_match"),
    ]), "_doi")
    return PaperIndex(dois, known.select(pl.col("_match").alias("_arxiv"), "_match"),
                      known.filter(pl.col("_title").str.len_chars() >= MIN_TITLE_CHARS).select("_title", "_match", "_paper_year"))


KEY_WINDOWS = {"k": pl.Utf8, "lo": pl.Int64, "hi": pl.Int64}
"""A key a new paper can be named by, and the cited years a reference must give for that key to
resolve it (null: any year, a DOI or an arXiv id)."""


def new_paper_key_windows(papers: pl.DataFrame, new_ids: list[str]) -> pl.DataFrame:
    """The keys (``doi:``, ``arxiv:``, ``title:``, as in ``match_keys``) by which a reference can
    name one of the papers loaded since the last graph run (``new_ids`` among ``papers``:
    ``arxiv_id, doi, title, year``), with, per key, the cited years (``lo``..``hi``) under which a
    reference naming the key can resolve to the new paper (an older reference is looked at again
    only when one of its keys is among them): a title resolves only within
    :data:`TITLE_YEAR_SLACK` of the paper's year (never without one), a DOI or an arXiv id at any
    year. Where many works share a title, most references to it are out of every window."""
    index = index_papers(papers.filter(pl.col("arxiv_id").is_in(pl.Series("new", new_ids, dtype=pl.Utf8))))
    anyyear = (pl.lit(None, pl.Int64).alias("lo"), pl.lit(None, pl.Int64).alias("hi"))
    year = pl.col("_paper_year")
    keys = pl.concat([index.dois.select(("doi:" + pl.col("_doi")).alias("k"), *anyyear),
                      index.arxiv.select(("arxiv:" + pl.col("_arxiv")).alias("k"), *anyyear),
                      index.titled.drop_nulls("_paper_year").select(("title:" + pl.col("_title")).alias("k"),
                                                                    (year - TITLE_YEAR_SLACK).alias("lo"),
                                                                    (year + TITLE_YEAR_SLACK).alias("hi"))])
    return keys.unique().sort(keys.columns, nulls_last=True).cast(KEY_WINDOWS)  # type: ignore[arg-type]


REFERENCE_KEYS: tuple[str, ...] = ("cited_doi", "cited_arxiv", "cited_title", "cited_year")
"""What a reference names its work by: a reference's resolution depends on these alone (and on
who cites it, for the self-reference rule, applied per row after the lookup)."""


def _lookups(works: pl.DataFrame, index: PaperIndex) -> pl.DataFrame:
    """For each distinct ``REFERENCE_KEYS`` row of ``works``: the paper each method names and its
    ``match_keys``. The same work is cited by many papers (about three references per distinct
    work in a year of arXiv), and normalising titles is most of the cost, so it is done once per work."""
    text = {c: pl.col(c).cast(pl.Utf8) for c in ("cited_doi", "cited_arxiv", "cited_title")}
    refs = works.with_row_index("_key").with_columns(
        normalise_doi(text["cited_doi"]).alias("_doi"),
        bare_arxiv_id(text["cited_arxiv"]).alias("_arxiv"),
        normalise_title(text["cited_title"]).alias("_title"),
        pl.col("cited_year").cast(pl.Int64).alias("_year"),
    )
    by_doi = refs.join(index.dois, on="_doi").select("_key", pl.col("_match").alias("doi"))
    by_arxiv = refs.join(index.arxiv, on="_arxiv").select("_key", pl.col("_match").alias("arxiv"))
    # Between namesakes within the slack, the closest year decides (a 2020 reference to the 2020 one);
    # namesakes equally close name no one.
    by_title = (refs.join(index.titled, on="_title")
                .with_columns(_gap=(pl.col("_year") - pl.col("_paper_year")).abs())
                .filter(pl.col("_gap") <= TITLE_YEAR_SLACK).filter(pl.col("_gap") == pl.col("_gap").min().over("_key"))
                .unique(["_key", "_match"]).filter(pl.len().over("_key") == 1)
                .select("_key", pl.col("_match").alias("title_year")))
    keys = pl.concat_list("doi:" + pl.col("_doi"), "arxiv:" + pl.col("_arxiv"), "title:" + pl.col("_title"))
    out = refs.select("_key", *REFERENCE_KEYS, keys.list.drop_nulls().alias("match_keys"))
    for found in (by_doi, by_arxiv, by_title):
        out = out.join(found, on="_key", how="left")
    return out.drop("_key")


def resolve_citations(citations: pl.DataFrame, papers: pl.DataFrame | PaperIndex) -> Resolution:
    """Set each citation's ``cited_arxiv_id`` to the warehouse paper it names (null when none) from
    ``papers`` (``arxiv_id, doi, title, year``, or their ``index_papers``), and its ``match_keys``
    to the keys it was looked up by; every other column is left as the source gave it."""
    columns = citations.columns + [c for c in ("cited_arxiv_id", "match_keys") if c not in citations.columns]
    index = papers if isinstance(papers, PaperIndex) else index_papers(papers)
    works = citations.select(*REFERENCE_KEYS).unique()
    found = _lookups(works, index)
    matched = citations.select("citing_arxiv_id", *REFERENCE_KEYS).join(
        found, on=list(REFERENCE_KEYS), how="left", nulls_equal=True, maintain_order="left")
    # A paper's reference to itself is a parsing slip (its own title in the list), not a citation.
    matched = matched.with_columns(pl.when(pl.col(m) != pl.col("citing_arxiv_id")).then(pl.col(m))
                                   for m in RESOLUTION_METHODS)
    matched = matched.with_columns(
        pl.coalesce(RESOLUTION_METHODS).alias("_resolved"),
        pl.when(pl.col("doi").is_not_null()).then(pl.lit("doi"))
        .when(pl.col("arxiv").is_not_null()).then(pl.lit("arxiv"))
        .when(pl.col("title_year").is_not_null()).then(pl.lit("title_year")).alias("_method"),
    )
    out = citations.with_columns(matched["_resolved"].alias("cited_arxiv_id"), matched["match_keys"]).select(columns)
    by_method = dict(matched.group_by("_method").len().iter_rows())
    counts = {m: int(by_method.get(m, 0)) for m in RESOLUTION_METHODS} | {"unresolved": int(by_method.get(None, 0))}
    return Resolution(out, counts)
