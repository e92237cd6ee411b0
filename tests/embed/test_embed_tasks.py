"""The embed flow's texts and export rows."""

from __future__ import annotations

import numpy as np
import polars as pl

from revbench.settings import Settings
from revbench.tasks.embed import VECTOR_SCHEMA, benchmark_texts, counts_by_kind, vector_frame
from tests.support.evaluation import bench


def test_texts_of_a_benchmark_by_kind(settings: Settings) -> None:
    texts = benchmark_texts(settings, bench(), "hashing")
    assert counts_by_kind(texts) == {"keyword_profile": 2, "profile_paper": 3, "submission": 2}
    assert set(texts.filter(pl.col("kind") == "keyword_profile")["id"]) == {"ir@1", "gnn@1"}
    assert texts.select("kind", "id").is_duplicated().sum() == 0


def test_vector_rows_keep_the_texts_order() -> None:
    texts = pl.DataFrame({"kind": ["submission", "profile_paper"], "id": ["s1", "a"], "text": ["x", "y"]})
    frame = vector_frame(texts, ["h1", "h2"], np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    assert frame.schema == pl.Schema(VECTOR_SCHEMA)
    assert frame.select("id", "text_hash").rows() == [("s1", "h1"), ("a", "h2")]
    assert frame["vector"].to_list() == [[1.0, 0.0], [0.0, 1.0]]
