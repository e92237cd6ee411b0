"""Keyword profiles for training: which papers need keywords, which keywords extracted before can
be reused, and the rows the warehouse keeps of both. Pure over frames: the train flow reads the
warehouse, asks the extractor, and writes what these functions return.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from revbench.schemas.tables import KEYWORD_PROFILES


def papers_to_profile(papers: pl.DataFrame, recent: pl.DataFrame) -> pl.DataFrame:
    """The ``papers`` that are in some reviewer's ``recent`` papers (``reviewer_id, paper_id``)."""
    return papers.filter(pl.col("paper_id").is_in(recent["paper_id"].unique().implode()))


def reusable_keywords(stored: pl.DataFrame, extractor: str, model: str, template_version: str | None) -> pl.DataFrame:
    """The ``paper_keywords`` rows this run may reuse, as ``paper_id, keywords, extractor,
    template_version``: those of ``extractor`` and, for the LLM, of this ``model`` and prompt
    ``template_version`` (answers of another model or prompt are asked again)."""
    stored = stored.filter(pl.col("extractor") == extractor)
    if extractor == "llm":
        stored = stored.filter((pl.col("model") == model) & (pl.col("template_version") == template_version))
    return stored.select(pl.col("arxiv_id").alias("paper_id"), "keywords", "extractor", "template_version")


def without_keywords(papers: pl.DataFrame, known: pl.DataFrame) -> pl.DataFrame:
    """The ``papers`` with no row in ``known``."""
    return papers.filter(~pl.col("paper_id").is_in(known["paper_id"].implode()))


def keyword_rows(fresh: pl.DataFrame, model: str, run_id: str, now: datetime) -> pl.DataFrame:
    """``paper_keywords`` rows of keywords extracted now (``paper_id, keywords, extractor,
    template_version``); ``model`` is recorded for the LLM's, left empty for YAKE's."""
    return fresh.select(
        pl.col("paper_id").alias("arxiv_id"), "extractor", "keywords",
        pl.when(pl.col("extractor") == "llm").then(pl.lit(model)).otherwise(pl.lit("")).alias("model"),
        "template_version", pl.lit(run_id).alias("run_id"), pl.lit(now).alias("extracted_at"))


def profile_rows(profiles: pl.DataFrame, recent: pl.DataFrame, keywords: pl.DataFrame, run_id: str,
                 now: datetime) -> pl.DataFrame:
    """``keyword_profiles`` rows: each profile with the extractors its papers' ``keywords`` came
    from (``llm+yake`` when some answers were rejected) and their prompt versions."""
    used = recent.join(keywords.select("paper_id", "extractor", "template_version"), on="paper_id")
    mix = used.group_by("reviewer_id").agg(
        pl.col("extractor").unique().sort().str.join("+").alias("extractor"),
        pl.col("template_version").filter(pl.col("template_version") != "").unique().sort().str.join(",")
        .alias("template_version"))
    rows = profiles.join(mix, on="reviewer_id", how="left").with_columns(
        pl.lit(run_id).alias("run_id"), pl.lit(now).alias("built_at"))
    return rows.select(KEYWORD_PROFILES.names)


def extracted(fresh: pl.DataFrame, extractor: str) -> dict[str, int]:
    """Keywords extracted now: by ``extractor`` and by YAKE (the fallback of a rejected answer)."""
    return {extractor: fresh.filter(pl.col("extractor") == extractor).height,
            "yake": fresh.filter(pl.col("extractor") == "yake").height}
