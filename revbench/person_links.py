"""How a person of the scholarly graph is tied to the warehouse's author ids: one rule for the
pools' institution COI (``tasks.coi``) and the benchmark graph the evaluation reads
(``warehouse.ratings``), kept here because neither layer may import the other.
"""

from __future__ import annotations

import polars as pl

HOW: tuple[str, ...] = ("orcid", "s2", "paper_position")
"""How a graph person is tied to a warehouse author, in order of trust."""
LINK_SCHEMA = {"person_key": pl.Utf8, "author_id": pl.Utf8, "how": pl.Utf8}


def person_links(mentions: pl.DataFrame, affiliations: pl.DataFrame) -> pl.DataFrame:
    """``person_key, author_id, how``: each graph person tied to the warehouse authors they are.

    ``mentions`` holds ``author_id, arxiv_id, position, orcid, s2_author_id`` (the author links
    with their mentions); ``affiliations`` the graph's ``person_key, orcid, arxiv_id, position``.
    A person is an author when they share an ORCID (the row's, or an ``orcid:`` key), when an
    ``s2:`` key is the mention's S2 author id, or when the row's paper and place in its author
    list are the mention's. A person tied to several author ids keeps them all: disambiguation
    keeps people apart when unsure, and a conflict must reach every id of the person."""
    orcid = (pl.when(pl.col("person_key").str.starts_with("orcid:"))
             .then(pl.col("person_key").str.strip_prefix("orcid:")).otherwise(pl.col("orcid")))
    position = pl.col("position") if "position" in affiliations.columns else pl.lit(None, pl.Int64)
    people = affiliations.select("person_key", orcid.alias("_orcid"), "arxiv_id", position.alias("position")).unique()
    m = mentions.select("author_id", "arxiv_id", "position", "orcid", "s2_author_id")
    by_orcid = (people.drop_nulls("_orcid").join(m.drop_nulls("orcid"), left_on="_orcid", right_on="orcid")
                .select("person_key", "author_id", pl.lit("orcid").alias("how")))
    by_s2 = (people.filter(pl.col("person_key").str.starts_with("s2:"))
             .with_columns(pl.col("person_key").str.strip_prefix("s2:").alias("_s2"))
             .join(m.drop_nulls("s2_author_id"), left_on="_s2", right_on="s2_author_id")
             .select("person_key", "author_id", pl.lit("s2").alias("how")))
    by_paper = (people.drop_nulls(["arxiv_id", "position"]).join(m, on=["arxiv_id", "position"])
                .select("person_key", "author_id", pl.lit("paper_position").alias("how")))
    order = {h: i for i, h in enumerate(HOW)}
    links = pl.concat([by_orcid, by_s2, by_paper]).cast(LINK_SCHEMA)  # type: ignore[arg-type]
    return (links.with_columns(pl.col("how").replace_strict(order, return_dtype=pl.Int64).alias("_o"))
            .sort("person_key", "author_id", "_o").unique(["person_key", "author_id"], keep="first")
            .drop("_o").sort("person_key", "author_id"))
