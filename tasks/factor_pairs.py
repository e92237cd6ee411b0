"""What the factor-aware training (UniPR) learns from: for each factor a pair of corpus papers the
factor says belong together, the first to be encoded with the factor's instruction:

- ``citation``: p cites q;
- ``topic``: p and q share their finest topic (OpenAlex's, else S2's field, else the arXiv category);
- ``semantic``: q is p's nearest other paper by BM25 over title and abstract (weak supervision).

No query paper (so no rated one) is in any pair. Pure over polars frames."""

from __future__ import annotations

import hashlib

import polars as pl

from revbench.ml.recipes import FACTORS

PAIR_SCHEMA = {"factor": pl.Utf8, "query_id": pl.Utf8, "doc_id": pl.Utf8}


def seeded_order(df: pl.DataFrame, seed: int, *cols: str) -> pl.DataFrame:
    """``df`` ordered by the sha256 of ``"seed:col1:col2..."``: the same rows, the same order, in
    whatever order they came (every training objective draws its rows so)."""
    key = pl.concat_str([pl.lit(str(seed)), *cols], separator=":").map_elements(
        lambda k: hashlib.sha256(k.encode()).hexdigest(), return_dtype=pl.Utf8)
    return df.with_columns(key.alias("_k")).sort("_k").drop("_k")


def citation_pairs(cites: pl.DataFrame, keep: pl.Series) -> pl.DataFrame:
    """p cites q, both in ``keep``."""
    return (cites.filter(pl.col("citing_id").is_in(keep.implode()) & pl.col("cited_id").is_in(keep.implode()))
            .select(pl.lit("citation").alias("factor"), pl.col("citing_id").alias("query_id"), pl.col("cited_id").alias("doc_id")))


def topic_pairs(topics: pl.DataFrame, keep: pl.Series, seed: int) -> pl.DataFrame:
    """Each paper in ``keep`` with one other paper of its topic, drawn by a seeded order."""
    t = topics.filter(pl.col("paper_id").is_in(keep.implode()))
    mates = seeded_order(t.rename({"paper_id": "doc_id"}), seed, "doc_id")
    joined = (t.join(mates, on="topic").filter(pl.col("paper_id") != pl.col("doc_id"))
              .group_by("paper_id", maintain_order=True).first())
    return joined.select(pl.lit("topic").alias("factor"), pl.col("paper_id").alias("query_id"), "doc_id")


def semantic_pairs(papers: pl.DataFrame) -> pl.DataFrame:
    """Each paper with its nearest other paper of ``papers`` by BM25 (bm25s) over title and abstract."""
    import bm25s

    if papers.height < 2:
        return pl.DataFrame(schema=PAIR_SCHEMA)
    texts = (papers["title"].fill_null("") + " " + papers["abstract"].fill_null("")).to_list()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    docs, scores = retriever.retrieve(bm25s.tokenize(texts, stopwords="en", show_progress=False), k=2, show_progress=False)
    ids = papers["paper_id"].to_list()
    rows = []
    for i, (d, sc) in enumerate(zip(docs, scores, strict=True)):
        other = [(int(j), float(x)) for j, x in zip(d, sc, strict=True) if int(j) != i and x > 0]
        if other:
            rows.append(("semantic", ids[i], ids[other[0][0]]))
    return pl.DataFrame(rows, schema=PAIR_SCHEMA, orient="row")


def factor_pairs(frames: dict[str, pl.DataFrame], topics: pl.DataFrame, per_factor: int, seed: int) -> pl.DataFrame:
    """``factor, query_id, doc_id``: at most ``per_factor`` pairs of each factor (seeded), none
    touching a query paper; shuffled so a batch mixes factors."""
    papers = frames["papers"].join(frames["queries"], on="paper_id", how="anti")
    keep = papers["paper_id"]
    parts = {"citation": citation_pairs(frames["cites"], keep), "topic": topic_pairs(topics, keep, seed),
             "semantic": semantic_pairs(papers)}
    picked = [seeded_order(parts[f].cast(PAIR_SCHEMA), seed, "query_id", "doc_id").head(per_factor)  # type: ignore[arg-type]
              for f in FACTORS]
    out = pl.concat(picked)
    return seeded_order(out, seed + 1, "factor", "query_id", "doc_id") if out.height else out


def with_texts(pairs: pl.DataFrame, papers: pl.DataFrame) -> pl.DataFrame:
    """The pairs with ``query_text`` and ``doc_text`` (title and abstract joined by a space)."""
    text = papers.select("paper_id", (pl.col("title").fill_null("") + " " + pl.col("abstract").fill_null(""))
                         .str.strip_chars().alias("text"))
    return (pairs.join(text.rename({"paper_id": "query_id", "text": "query_text"}), on="query_id", how="left", maintain_order="left")
            .join(text.rename({"paper_id": "doc_id", "text": "doc_text"}), on="doc_id", how="left", maintain_order="left"))


def counts(pairs: pl.DataFrame) -> dict[str, int]:
    """Pairs per factor (every factor named, zero where none)."""
    got = dict(pairs.group_by("factor").len().iter_rows()) if pairs.height else {}
    return {f: int(got.get(f, 0)) for f in FACTORS}

