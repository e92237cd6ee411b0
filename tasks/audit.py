"""Checks of what the pipeline produced against a SYNTHETIC world's hidden truth."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from revbench.settings import Settings
from schemas.tables import ASSIGNMENTS, AUTHOR_LINKS
from warehouse import Warehouse


def coi_violations(settings: Settings, world_dir: Path, round_: int) -> int:
    """Invitations whose real person wrote the query paper or co-wrote any paper with one of its
    real authors (judged by the truth, not by our own disambiguation)."""
    truth = pl.read_parquet(world_dir / "truth" / "mentions.parquet")
    with Warehouse.open(settings.warehouse_path) as wh:
        assign = wh.read(ASSIGNMENTS).filter(pl.col("round") == round_)
        links = wh.read(AUTHOR_LINKS)
    person_of_author = (links.join(truth, on=["arxiv_id", "position"]).select("author_id", "person_id").unique())
    writers = truth.select("arxiv_id", "person_id")
    coauthors = writers.join(writers, on="arxiv_id").select(pl.col("person_id").alias("a"), pl.col("person_id_right").alias("b")).unique()
    invited = assign.join(person_of_author, on="author_id").select("query_id", "person_id")
    query_people = writers.rename({"arxiv_id": "query_id", "person_id": "qp"})
    pairs = invited.join(query_people, on="query_id")
    bad = pairs.join(coauthors, left_on=["person_id", "qp"], right_on=["a", "b"], how="semi")
    return bad.select("query_id", "person_id").unique().height
