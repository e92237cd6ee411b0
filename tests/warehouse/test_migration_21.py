"""Migration 21: ``citations`` without DuckDB's index of its key. A warehouse built at schema 20 keeps
every reference, value for value; the key is no constraint after it, so each writer keeps it: an
upsert replaces the rows of its keys, an insert refuses a key given twice, a saved answer replaces a
paper's list whole (inserted, not merged), and the same answer saved again adds nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from revbench.schemas.graph import CITATIONS
from revbench.warehouse.db import Warehouse
from tests.support.migrations import warehouse_at

NOW = datetime(2026, 10, 1, tzinfo=UTC)
KEY = ["citing_arxiv_id", "source", "ordinal"]


def _constraints(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT constraint_type FROM duckdb_constraints() WHERE table_name = 'citations' "
                                      "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')").fetchall()]


def _refs(citing: str, source: str, titles: list[str]) -> pl.DataFrame:
    return CITATIONS.conform(pl.DataFrame([dict(citing_arxiv_id=citing, source=source, ordinal=i, cited_title=t,
                                                intents=["background"], match_keys=[f"title:{t}"])
                                           for i, t in enumerate(titles)]))


def _fetched(arxiv_id: str, n: int) -> dict[str, object]:
    return dict(arxiv_id=arxiv_id, source="s2", kind="references", found=True, n_rows=n, fetched_at=NOW)


def test_a_schema_20_warehouse_keeps_every_reference_and_loses_only_the_index(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    con = warehouse_at(path, 20, applied_at=NOW)
    assert _constraints(con) == ["PRIMARY KEY"]
    con.register("old", _refs("2609.00001", "s2", ["one", "two"]).vstack(_refs("2609.00002", "openalex", ["three"])))
    con.execute("INSERT INTO citations SELECT * FROM old")
    before = con.execute("SELECT * FROM citations ORDER BY ALL").fetchall()
    con.close()
    with Warehouse.open(path) as wh:
        assert wh.schema_version() >= 21
        assert wh._exec("SELECT * FROM citations ORDER BY ALL") == before
        assert _constraints(wh.con) == []
        # every declared column, NOT NULL ones still refused
        assert [r[0] for r in wh._exec("DESCRIBE citations")] == CITATIONS.names
        with pytest.raises(duckdb.ConstraintException):
            wh._exec("INSERT INTO citations (citing_arxiv_id, source) VALUES ('2609.00003', 's2')")
        assert wh._exec("SELECT description FROM schema_version WHERE version = 21")[0][0].startswith("citations without")
    with Warehouse.open(path) as wh:
        assert wh.migrate() == []


def test_without_the_index_every_writer_keeps_the_key(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        assert _constraints(wh.con) == []
        # an upsert replaces the rows of its keys, the last of a key given twice kept
        wh.upsert(CITATIONS, _refs("2609.00001", "s2", ["one", "two"]))
        wh.upsert(CITATIONS, pl.concat([_refs("2609.00001", "s2", ["uno"]), _refs("2609.00001", "s2", ["eins"])]))
        assert wh.read(CITATIONS).select("ordinal", "cited_title").rows() == [(0, "eins"), (1, "two")]
        # an insert refuses a key it is given twice, naming it, and writes nothing
        with pytest.raises(duckdb.ConstraintException, match=r"citing_arxiv_id='2609.00002', source='s2', ordinal=0"):
            wh.insert(CITATIONS, pl.concat([_refs("2609.00002", "s2", ["a"]), _refs("2609.00002", "s2", ["b"])]))
        assert wh.count(CITATIONS) == 2
        # a merge by column needs the index: refused in one line, not half done
        with pytest.raises(ValueError, match="not indexed"):
            wh.upsert(CITATIONS, _refs("2609.00001", "s2", ["x"]), sets={"cited_title": "excluded.cited_title"})
        assert wh.read(CITATIONS).select("cited_title").to_series().to_list() == ["eins", "two"]


def test_an_answer_saved_again_replaces_the_list_and_adds_nothing(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        answer = dict(citations=_refs("2609.00001", "s2", ["one", "two", "three"]),
                      fetches=pl.DataFrame([_fetched("2609.00001", 3)]))
        for _ in range(2):
            wh.graph.save_graph(**answer)
            wh.graph.save_graph(citations=answer["citations"])  # without its fetch record: by key alone
        assert wh.count(CITATIONS) == 3
        # asked again, the list shrank and a key came twice in the answer: the last kept, no stale row
        wh.graph.save_graph(citations=pl.concat([_refs("2609.00001", "s2", ["uno"]), _refs("2609.00001", "s2", ["one"])]),
                            fetches=pl.DataFrame([_fetched("2609.00001", 1)]))
        refs = wh.read(CITATIONS)
        assert refs.select("ordinal", "cited_title").rows() == [(0, "one")]
        assert refs.select(KEY).is_duplicated().sum() == 0
