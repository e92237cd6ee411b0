"""Migration 14 on a warehouse built at schema 13: documents and mentions keep their rows, every
PDF author and mention gains ``emails`` (null where extracted before: the one ``email`` stands in)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from revbench.schemas.tables import DOCUMENTS
from revbench.tasks.reconcile import clean_emails
from revbench.warehouse.db import Warehouse
from revbench.warehouse.ddl import create_table_sql, duckdb_type
from tests.support.migrations import warehouse_at

NOW = datetime(2026, 10, 1, tzinfo=UTC)


def _warehouse_at_13(path: Path) -> None:
    con = warehouse_at(path, 13, applied_at=NOW)
    # documents and mentions as version 13 declared them: no emails anywhere.
    new_author = duckdb_type(DOCUMENTS.polars_schema["pdf_authors"])
    old_author = new_author.replace(', "emails" VARCHAR[]', "")
    assert old_author != new_author
    con.execute("DROP TABLE documents")
    con.execute(create_table_sql(DOCUMENTS, version=13).replace(new_author, old_author))
    con.execute("""INSERT INTO documents (arxiv_id, version, status, attempts, pdf_sha256, pdf_authors, extracted_at)
                   VALUES ('2609.00001', 1, 'ok', 1, repeat('a', 64),
                           [{'forename': 'Zoë', 'surname': 'Müller', 'email': 'Z@eth.example', 'department': 'CS',
                             'institution': 'ETH', 'affiliation': 'CS, ETH', 'affiliations': NULL, 'orcid': NULL}], ?)""",
                [NOW])
    con.execute("INSERT INTO mentions (arxiv_id, position, name, email) "
                "VALUES ('2609.00001', 0, 'Zoë Müller', 'z@eth.example')")
    con.close()


def test_a_schema_13_warehouse_migrates_in_place_keeping_rows(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    _warehouse_at_13(path)
    with Warehouse.open(path) as wh:
        assert wh.schema_version() >= 14
        (m,) = wh._frame("SELECT * FROM mentions").to_dicts()
        assert m["email"] == "z@eth.example" and m["emails"] is None
        (author,) = wh._frame("SELECT pdf_authors FROM documents").item()
        assert author["surname"] == "Müller" and author["emails"] is None
        # Reconciled again, the old row's one address stands in for the list.
        assert clean_emails(author) == ["z@eth.example"]
        row = {**author, "emails": ["z@eth.example", "zoe@gmail.example"]}
        wh.ingest.save_documents(DOCUMENTS.conform(wh._frame("SELECT * FROM documents").with_columns(
            pl.Series("pdf_authors", [[row]], dtype=DOCUMENTS.polars_schema["pdf_authors"]))))
        assert wh._frame("SELECT pdf_authors FROM documents").item()[0]["emails"] == ["z@eth.example", "zoe@gmail.example"]
    with Warehouse.open(path) as wh:
        assert wh.migrate() == []
