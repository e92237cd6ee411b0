"""Migration 13 on a warehouse built at schema 12: documents, papers and mentions keep their rows;
the new affiliation and ORCID fields start null (rows extracted before kept only the first affiliation)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from revbench.schemas.tables import DOCUMENTS, PDF_AUTHOR
from revbench.warehouse.db import Warehouse
from revbench.warehouse.ddl import create_table_sql, duckdb_type
from tests.support.migrations import warehouse_at

NOW = datetime(2026, 10, 1, tzinfo=UTC)
OLD_AUTHOR = ('STRUCT("forename" VARCHAR, "surname" VARCHAR, "email" VARCHAR, "department" VARCHAR, '
              '"institution" VARCHAR, "affiliation" VARCHAR)[]')


def _warehouse_at_12(path: Path) -> None:
    con = warehouse_at(path, 12, applied_at=NOW)
    # documents as version 12 declared it: pdf_authors items without affiliations or orcid.
    new_author = duckdb_type(DOCUMENTS.polars_schema["pdf_authors"])
    assert new_author != OLD_AUTHOR and duckdb_type(PDF_AUTHOR) in new_author
    con.execute("DROP TABLE documents")
    con.execute(create_table_sql(DOCUMENTS, version=12).replace(new_author, OLD_AUTHOR))
    con.execute("""INSERT INTO documents (arxiv_id, version, status, attempts, pdf_sha256, pdf_authors, extracted_at)
                   VALUES ('2609.00001', 1, 'ok', 1, repeat('a', 64),
                           [{'forename': 'Zoë', 'surname': 'Müller', 'email': 'z@eth.example', 'department': 'CS',
                             'institution': 'ETH', 'affiliation': 'CS, ETH'}], ?)""", [NOW])
    con.execute("""INSERT INTO papers (arxiv_id, version, title, abstract, primary_category, categories, updated, year,
                                       pdf_sha256, title_similarity, n_authors, input_hash, loaded_at)
                   VALUES ('2609.00001', 1, 'T', 'A', 'cs.IR', ['cs.IR'], ?, 2026, repeat('a', 64), 1.0, 1, 'h', ?)""",
                [NOW, NOW])
    con.execute("""INSERT INTO mentions (arxiv_id, position, name, email, affiliation, department, institution)
                   VALUES ('2609.00001', 0, 'Zoë Müller', 'z@eth.example', 'CS, ETH', 'CS', 'ETH')""")
    con.close()


def test_a_schema_12_warehouse_migrates_in_place_keeping_rows(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    _warehouse_at_12(path)
    with Warehouse.open(path) as wh:
        assert wh.schema_version() >= 13
        m = wh._frame("SELECT * FROM mentions").to_dicts()
        assert len(m) == 1 and m[0]["institution"] == "ETH" and m[0]["affiliation"] == "CS, ETH"
        assert m[0]["affiliations"] is None and m[0]["orcid"] is None
        p = wh._frame("SELECT * FROM papers").to_dicts()
        assert len(p) == 1 and p[0]["title"] == "T" and p[0]["orphan_affiliations"] is None
        d = wh._frame("SELECT * FROM documents").to_dicts()
        assert len(d) == 1 and d[0]["pdf_orphan_affiliations"] is None and d[0]["pdf_dropped_authors"] is None
        (author,) = d[0]["pdf_authors"]
        assert author["surname"] == "Müller" and author["institution"] == "ETH"
        assert author["affiliations"] is None and author["orcid"] is None
        # The rebuilt documents table takes the new shape: a row with every affiliation saves and reads back.
        row = {**author, "affiliations": [{"department": None, "institution": "MIT", "country": "USA", "text": "MIT, USA"}],
               "orcid": "0000-0002-1825-0097"}
        wh.ingest.save_documents(DOCUMENTS.conform(wh._frame("SELECT * FROM documents").with_columns(
            pl.Series("pdf_authors", [[row]], dtype=DOCUMENTS.polars_schema["pdf_authors"]))))
        again = wh._frame("SELECT pdf_authors FROM documents").item()
        assert again[0]["affiliations"][0]["institution"] == "MIT" and again[0]["orcid"] == "0000-0002-1825-0097"
    with Warehouse.open(path) as wh:
        assert wh.migrate() == []
