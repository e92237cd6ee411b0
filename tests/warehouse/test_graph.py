"""The scholarly graph in the warehouse (issue 35): migration 15 on an older file, loads by key that a
re-run leaves unchanged, what a refresh still has to fetch, the stages' reads, coverage, and the
graph block of ``revbench status`` (printed only once the graph has rows)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from revbench.app.commands.operate import print_status
from revbench.app.console import console
from revbench.schemas.graph import AUTHOR_AFFILIATIONS, CITATIONS, GRAPH_FETCHES, GRAPH_TABLES, INSTITUTIONS, PAPER_TOPICS
from revbench.schemas.quality import validate_frames
from revbench.schemas.tables import MENTIONS, REJECTS
from revbench.warehouse.db import Warehouse
from revbench.warehouse.migrations import LATEST_VERSION
from revbench.warehouse.status import read_status
from tests.support.migrations import warehouse_at

NOW = datetime(2026, 10, 1, tzinfo=UTC)
GRAPH = {t.name for t in GRAPH_TABLES}


def _paper(arxiv_id: str, title: str = "A title", year: int = 2026) -> dict[str, object]:
    return dict(arxiv_id=arxiv_id, version=1, title=title, abstract="An abstract long enough", primary_category="cs.IR",
                categories=["cs.IR"], updated=NOW, year=year, pdf_sha256="a" * 64, title_similarity=1.0, n_authors=1,
                input_hash="h", loaded_at=NOW)


def _load(wh: Warehouse, *ids: str) -> None:
    wh.ingest.load_corpus(pl.DataFrame([_paper(i) for i in ids]), MENTIONS.empty(), REJECTS.empty())


def _refs(citing: str, source: str, titles: list[str], resolved: dict[int, str] | None = None) -> pl.DataFrame:
    return pl.DataFrame([dict(citing_arxiv_id=citing, source=source, ordinal=i, cited_title=t, cited_year=2024,
                              cited_arxiv_id=(resolved or {}).get(i), intents=["methodology"], is_influential=i == 0,
                              external_ids='{"CorpusId": %d}' % i) for i, t in enumerate(titles)])


def _fetched(arxiv_id: str, source: str, kind: str, n: int, found: bool = True) -> dict[str, object]:
    return dict(arxiv_id=arxiv_id, source=source, kind=kind, found=found, n_rows=n, fetched_at=NOW)


def _topics() -> pl.DataFrame:
    return pl.DataFrame([
        dict(arxiv_id="2609.00001", scheme="s2-fos", topic="Computer Science", origin="external"),
        dict(arxiv_id="2609.00001", scheme="s2-fos", topic="Computer Science", origin="s2-fos-model"),
        dict(arxiv_id="2609.00001", scheme="openalex-topic", topic="T10181", label="NLP", origin="openalex", score=0.98,
             domain="Physical Sciences", field="Computer Science", subfield="Artificial Intelligence"),
    ])


INSTITUTION_ROWS = [dict(institution_key="ror:05a28rw58", ror="05a28rw58", name="ETH Zurich", country="CH", type="education"),
                    dict(institution_key="name:universityofnowhere", name="University of Nowhere")]


def _warehouse_at_14(path: Path) -> None:
    con = warehouse_at(path, 14, applied_at=NOW)
    con.execute("INSERT INTO runs (run_id, flow, status, started_at) VALUES ('r1', 'ingest', 'completed', ?)", [NOW])
    con.close()


def test_a_schema_14_warehouse_reads_before_and_gains_the_graph_tables_on_open(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    _warehouse_at_14(path)
    # Read-only (status, doctor) before any run migrates it: no graph tables yet, and no error for them.
    before = read_status(path)
    assert before.version == 14 and before.counts["runs"] == 1 and before.graph is None
    assert GRAPH.isdisjoint(before.counts)
    with Warehouse.open(path) as wh:
        assert wh.migrate() == [] and wh.schema_version() == LATEST_VERSION
        present = {r[0] for r in wh._exec("SELECT table_name FROM information_schema.tables")}
        assert GRAPH <= present
        assert wh._exec("SELECT run_id FROM runs") == [("r1",)]
        assert wh._exec("SELECT description FROM schema_version WHERE version = 15")[0][0].startswith("the scholarly graph")
        keys = dict(wh._exec("""SELECT table_name, list_sort(constraint_column_names) FROM duckdb_constraints()
                                WHERE constraint_type = 'PRIMARY KEY'"""))
    # A key DuckDB holds no index of (citations, from 21) is no constraint: its writers keep it.
    assert {t.name: sorted(t.primary_key) for t in GRAPH_TABLES if t.key_indexed()} == {n: keys[n] for n in keys if n in GRAPH}
    assert {t.name for t in GRAPH_TABLES if not t.key_indexed()} == {"citations"} == GRAPH - set(keys)


def test_loading_the_same_answer_again_adds_nothing_and_a_refetch_replaces_the_old_list(tmp_path: Path) -> None:
    affiliations = pl.DataFrame([
        dict(person_key="openalex:A1", institution_key="ror:05a28rw58", first_year=2021, last_year=2021, source="openalex",
             arxiv_id="2609.00001"),
        dict(person_key="openalex:A1", institution_key="ror:05a28rw58", first_year=2023, last_year=2023, source="openalex",
             orcid="0000-0002-1825-0097"),
    ])
    answer = dict(citations=_refs("2609.00001", "s2", ["one", "two", "three"]), topics=_topics(),
                  institutions=pl.DataFrame(INSTITUTION_ROWS), affiliations=affiliations,
                  fetches=pl.DataFrame([_fetched("2609.00001", "s2", "references", 3)]))
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _load(wh, "2609.00001")
        wh.graph.save_graph(**answer)
        first = {t.name: wh.read(t) for t in GRAPH_TABLES}
        wh.graph.save_graph(**answer)
        wh.graph.save_graph(citations=answer["citations"], topics=answer["topics"])  # without the fetch records: by key alone
        assert all(wh.read(t).equals(first[t.name]) for t in GRAPH_TABLES)
        assert {n: df.height for n, df in first.items()} == {"citations": 3, "paper_topics": 3, "institutions": 2,
                                                             "author_affiliations": 1, "graph_fetches": 1}
        # Two sightings of one person at one institution are one row spanning both years, ids kept.
        (aff,) = first["author_affiliations"].to_dicts()
        assert (aff["first_year"], aff["last_year"], aff["orcid"], aff["arxiv_id"]) == (2021, 2023, "0000-0002-1825-0097",
                                                                                       "2609.00001")
        wh.graph.save_graph(affiliations=affiliations.head(1).with_columns(first_year=pl.lit(2019), last_year=pl.lit(2019)))
        assert wh.read(AUTHOR_AFFILIATIONS).select("first_year", "last_year", "orcid").row(0) == (
            2019, 2023, "0000-0002-1825-0097")
        # An institution seen again without its country keeps it.
        wh.graph.save_graph(institutions=pl.DataFrame([dict(institution_key="ror:05a28rw58", name="ETH Zürich")]))
        assert wh.read(INSTITUTIONS).filter(pl.col("ror") == "05a28rw58").select("name", "country").row(0) == (
            "ETH Zürich", "CH")
        # S2 asked again: its list is now two long, other sources' lists and other schemes' topics stay.
        wh.graph.save_graph(citations=_refs("2609.00001", "grobid", ["one"]))
        wh.graph.save_graph(citations=_refs("2609.00001", "s2", ["one", "two bis"]),
                      topics=_topics().filter(pl.col("origin") == "external"),
                      fetches=pl.DataFrame([_fetched("2609.00001", "s2", "references", 2),
                                            _fetched("2609.00001", "s2", "topics", 1)]))
        refs = wh.read(CITATIONS)
        assert refs.select("source", "ordinal", "cited_title").rows() == [
            ("grobid", 0, "one"), ("s2", 0, "one"), ("s2", 1, "two bis")]
        assert sorted(wh.read(PAPER_TOPICS).select("scheme", "origin").rows()) == [
            ("openalex-topic", "openalex"), ("s2-fos", "external")]


def test_a_refresh_fetches_only_papers_never_asked_even_when_they_had_nothing(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _load(wh, "2609.00001", "2609.00002", "2609.00003")
        assert wh.graph.papers_to_fetch("s2", "references") == ["2609.00001", "2609.00002", "2609.00003"]
        wh.graph.save_graph(citations=_refs("2609.00001", "s2", ["one"]), fetches=pl.DataFrame([
            _fetched("2609.00001", "s2", "references", 1), _fetched("2609.00002", "s2", "references", 0),
            _fetched("2609.00003", "s2", "references", 0, found=False)]).drop("fetched_at"))
        assert wh.graph.papers_to_fetch("s2", "references") == []
        assert wh.read(GRAPH_FETCHES)["fetched_at"].null_count() == 0
        assert wh.graph.papers_to_fetch("s2", "topics") == wh.graph.papers_to_fetch("openalex", "references") == [
            "2609.00001", "2609.00002", "2609.00003"]
        _load(wh, "2609.00004")  # a day later
        assert wh.graph.papers_to_fetch("s2", "references") == ["2609.00004"]


def test_the_stages_read_references_topics_and_dated_affiliations(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _load(wh, "2609.00001", "2609.00002")
        wh.graph.save_graph(citations=pl.concat([_refs("2609.00001", "s2", ["a", "b"], {1: "2609.00002"}),
                                           _refs("2609.00002", "s2", ["c"])]),
                      topics=_topics(), institutions=pl.DataFrame(INSTITUTION_ROWS), affiliations=pl.DataFrame([
                          dict(person_key="openalex:A1", institution_key="ror:05a28rw58", first_year=2022, last_year=2025,
                               source="openalex"),
                          dict(person_key="openalex:A1", institution_key="name:universityofnowhere", first_year=2018,
                               last_year=2020, source="grobid"),
                          dict(person_key="openalex:A2", institution_key="name:unknown", source="grobid")]))
        refs = wh.graph.references_of(["2609.00001"])
        assert refs.select("ordinal", "cited_arxiv_id").rows() == [(0, None), (1, "2609.00002")]
        assert refs.schema == CITATIONS.polars_schema and refs["intents"].to_list() == [["methodology"]] * 2
        assert wh.graph.references_of([]).height == 0 and wh.graph.topics_of(["2609.00002"]).height == 0
        assert wh.graph.topics_of(["2609.00001"]).select("scheme", "origin").rows() == [
            ("openalex-topic", "openalex"), ("s2-fos", "external"), ("s2-fos", "s2-fos-model")]
        aff = wh.graph.affiliations_of(["openalex:A1", "openalex:A2"])
        assert aff.select("person_key", "name", "ror", "first_year", "last_year", "source").rows() == [
            ("openalex:A1", "University of Nowhere", None, 2018, 2020, "grobid"),
            ("openalex:A1", "ETH Zurich", "05a28rw58", 2022, 2025, "openalex"),
            ("openalex:A2", None, None, None, None, "grobid")]
        assert wh.graph.citations_to_resolve().select("citing_arxiv_id", "ordinal").rows() == [("2609.00001", 0), ("2609.00002", 0)]
        assert wh.graph.citations_to_resolve(unresolved_only=False).height == 3
        assert wh.graph.paper_identifiers().columns == ["arxiv_id", "doi", "title", "year"]


def test_coverage_counts_papers_references_resolutions_and_topics_per_source(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _load(wh, "2609.00001", "2609.00002", "2609.00003", "2609.00004")
        wh.graph.save_graph(
            citations=pl.concat([_refs("2609.00001", "s2", ["a", "b", "c"], {0: "2609.00002", 2: "2609.00003"}),
                                 _refs("2609.00002", "s2", ["d"]),
                                 _refs("2609.00001", "grobid", ["a", "b"], {0: "2609.00002"})]),
            topics=_topics(), institutions=pl.DataFrame(INSTITUTION_ROWS),
            affiliations=pl.DataFrame([dict(person_key=f"openalex:A{i}", institution_key="ror:05a28rw58", source="openalex")
                                       for i in range(3)]))
        cov = wh.graph.graph_coverage()
    assert cov["papers"] == 4
    assert {s["source"]: (s["papers_with_references"], s["references"], s["resolved"], s["papers_with_topics"])
            for s in cov["sources"]} == {"grobid": (1, 2, 1, 0), "s2": (2, 4, 2, 1), "openalex": (0, 0, 0, 1)}
    assert (cov["institutions"], cov["with_ror"], cov["affiliations"], cov["people"], cov["affiliated_institutions"]) == (
        2, 1, 3, 3, 1)


def test_status_prints_the_graph_block_only_once_the_graph_has_rows(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse.open(path) as wh:
        _load(wh, "2609.00001", "2609.00002")
    st = read_status(path)
    assert st.graph is None
    with console.capture() as out:
        print_status(st)
    assert "Graph coverage" not in out.get() and "citations" not in out.get() and "papers" in out.get()
    with Warehouse.open(path) as wh:
        wh.graph.save_graph(citations=_refs("2609.00001", "s2", ["a", "b"], {1: "2609.00002"}),
                      institutions=pl.DataFrame(INSTITUTION_ROWS))
    st = read_status(path)
    assert st.graph is not None and st.graph["sources"] == [
        dict(source="s2", papers_with_references=1, references=2, resolved=1, papers_with_topics=0)]
    with console.capture() as out:
        print_status(st)
    text = out.get()
    assert "Graph coverage (2 papers in the corpus)" in text and "citations" in text
    lines = text.splitlines()
    if any(line.startswith("│ s2 ") for line in lines):  # a terminal wide enough: the table
        (row,) = [line for line in lines if line.startswith("│ s2 ")]
        cells = [cell.strip() for cell in row.strip("│").split("│")]
    else:  # a log at 80 columns: the row as a block, each cell under its column's name
        start = lines.index("source: s2")
        cells = ["s2", *(line.split(": ", 1)[1] for line in lines[start + 1:start + 5])]
    assert cells == ["s2", "1 (50%)", "2", "1 (50%)", "0 (0%)"]
    assert "graph institutions: 2 (1 with a ROR id)" in text


def test_the_quality_suites_accept_graph_rows_and_name_what_breaks_them() -> None:
    good = {CITATIONS: _refs("2609.00001", "s2", ["a"]).with_columns(cited_doi=pl.lit("10.1145/3589334.3645355"),
                                                                     cited_arxiv=pl.lit("2401.01234v2")),
            PAPER_TOPICS: _topics(), INSTITUTIONS: pl.DataFrame(INSTITUTION_ROWS),
            AUTHOR_AFFILIATIONS: pl.DataFrame([dict(person_key="orcid:0000-0002-1825-0097", orcid="0000-0002-1825-0097",
                                                    institution_key="ror:05a28rw58", first_year=2020, last_year=2024,
                                                    source="openalex")])}
    assert validate_frames(good).success
    bad = {CITATIONS: good[CITATIONS].with_columns(cited_doi=pl.lit("https://doi.org/10.1145/X"), source=pl.lit("crossref")),
           INSTITUTIONS: pl.DataFrame([dict(institution_key="05a28rw58", name="ETH", country="che")])}
    failed = {(o.table, o.column) for o in validate_frames(bad).failures}
    assert failed == {("citations", "cited_doi"), ("citations", "source"), ("institutions", "institution_key"),
                      ("institutions", "country")}
