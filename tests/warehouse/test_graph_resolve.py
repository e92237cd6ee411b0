"""Which stored references a day later resolves again, and what it writes back: a new paper's
title counts for a reference only within the years a title can resolve in (a DOI or an arXiv id
at any year), so the many references to other works of one title are not read again; a reference
resolved before is read again when a new paper shares its name (a namesake makes the name name no
one); the choice reads only the columns asked; the resolutions written back leave every other
column as it was."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from revbench.schemas.graph import CITATIONS
from revbench.schemas.tables import MENTIONS, REJECTS
from revbench.tasks.graph import TITLE_YEAR_SLACK, new_paper_key_windows, resolve_citations
from revbench.tasks.graph_fetch import resolve_changed
from revbench.warehouse.db import Warehouse

LOADED = datetime(2026, 10, 1, tzinfo=UTC)
NEW = dict(arxiv_id="2610.00002", doi="10.1234/new", title="On the role of a title many works share", year=2026)
OLD = dict(arxiv_id="2609.00001", doi=None, title="An older paper of ours", year=2025)


def _corpus(wh: Warehouse, *papers: dict[str, object]) -> None:
    rows = [dict(p, version=1, abstract="An abstract long enough", primary_category="cs.IR", categories=["cs.IR"],
                 updated=LOADED, pdf_sha256="a" * 64, title_similarity=1.0, n_authors=1, input_hash="h",
                 loaded_at=LOADED) for p in papers or (OLD, NEW)]
    wh.ingest.load_corpus(pl.DataFrame(rows), MENTIONS.empty(), REJECTS.empty())


def _keyed_refs() -> pl.DataFrame:
    """References of the older paper, keyed as a run before the new paper left them (unresolved)."""
    refs = [dict(cited_title=NEW["title"], cited_year=2026),           # 0: the new paper's title, its year
            dict(cited_title=NEW["title"], cited_year=2026 + TITLE_YEAR_SLACK),  # 1: within the slack
            dict(cited_title=NEW["title"], cited_year=2011),           # 2: another work of that title
            dict(cited_title=NEW["title"]),                            # 3: no year: a title cannot resolve it
            dict(cited_title="Something else", cited_doi=NEW["doi"], cited_year=1999),  # 4: its DOI, any year
            dict(cited_title="A work none of ours is", cited_year=2026)]  # 5: nothing new names it
    frame = CITATIONS.conform(pl.DataFrame(
        [dict(citing_arxiv_id=OLD["arxiv_id"], source="s2", ordinal=i, intents=["background"], n_contexts=i,
              external_ids='{"CorpusId": %d}' % i, is_influential=i % 2 == 0, **r) for i, r in enumerate(refs)],
        infer_schema_length=None))
    before = pl.DataFrame([OLD], schema={"arxiv_id": pl.Utf8, "doi": pl.Utf8, "title": pl.Utf8, "year": pl.Int64})
    return resolve_citations(frame, before).citations


def test_a_new_papers_title_counts_only_within_the_years_it_can_resolve_in() -> None:
    papers = pl.DataFrame([OLD, NEW, dict(arxiv_id="2610.00003", doi=None, title="A new paper without a year here",
                                          year=None)], schema={"arxiv_id": pl.Utf8, "doi": pl.Utf8, "title": pl.Utf8,
                                                               "year": pl.Int64})
    w = new_paper_key_windows(papers, ["2610.00002", "2610.00003"])
    rows = {r["k"]: (r["lo"], r["hi"]) for r in w.to_dicts()}
    assert rows["title:ontheroleofatitlemanyworksshare"] == (2026 - TITLE_YEAR_SLACK, 2026 + TITLE_YEAR_SLACK)
    assert rows["doi:10.1234/new"] == rows["arxiv:2610.00002"] == (None, None)
    assert not any(k.startswith("title:anewpaperwithout") for k in rows)
    # every key of the two but a title without a year
    assert set(rows) == {"doi:10.1234/new", "arxiv:2610.00002", "arxiv:2610.00003", "doi:10.48550/arxiv.2610.00002",
                         "doi:10.48550/arxiv.2610.00003", "title:ontheroleofatitlemanyworksshare"}


def test_a_day_later_reads_again_only_references_a_new_paper_can_resolve(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _corpus(wh)
        wh.graph.save_graph(citations=_keyed_refs())
        papers = wh.graph.paper_identifiers()
        since = LOADED - timedelta(days=1)
        windows = new_paper_key_windows(papers, [NEW["arxiv_id"]])
        cols = ["citing_arxiv_id", "source", "ordinal", "cited_title", "cited_year", "match_keys"]
        picked = wh.graph.citations_to_resolve(since=since, keys=windows, columns=cols)
        assert picked["ordinal"].to_list() == [0, 1, 4]
        assert picked.columns == cols
        # Keys without windows count at any year (as before the windows).
        assert wh.graph.citations_to_resolve(since=since, keys=windows["k"].to_list())["ordinal"].to_list() == [0, 1, 2, 3, 4]
        # What is left out resolves to nothing against every paper: nothing was missed.
        everything = resolve_citations(wh.graph.citations_to_resolve(), papers).citations
        assert everything.filter(pl.col("cited_arxiv_id").is_not_null())["ordinal"].to_list() == [0, 1, 4]


def test_resolutions_written_back_leave_the_other_columns_as_they_were(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _corpus(wh)
        wh.graph.save_graph(citations=_keyed_refs())
        before = wh.graph.references_of([OLD["arxiv_id"]]).sort("ordinal")
        resolved = resolve_citations(wh.graph.citations_to_resolve(), wh.graph.paper_identifiers()).citations
        changed = resolved.filter(pl.col("cited_arxiv_id").is_not_null())
        assert wh.graph.rewrite_references(changed.select("citing_arxiv_id", "source", "ordinal", "cited_arxiv_id",
                                                       "cited_arxiv", "match_keys")) == 3
        after = wh.graph.references_of([OLD["arxiv_id"]]).sort("ordinal")
        assert after.height == before.height == 6
        assert after["cited_arxiv_id"].to_list() == [NEW["arxiv_id"]] * 2 + [None, None, NEW["arxiv_id"], None]
        untouched = [c for c in CITATIONS.names if c != "cited_arxiv_id"]
        assert after.select(untouched).equals(before.select(untouched))
        assert wh.graph.rewrite_references(changed.head(0)) == 0


def test_a_namesake_arriving_unresolves_what_the_name_resolved_to(tmp_path: Path) -> None:
    twin = dict(arxiv_id="2609.00003", doi=None, title=NEW["title"], year=2026)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _corpus(wh, OLD, twin, NEW)
        refs = CITATIONS.conform(pl.DataFrame([
            dict(citing_arxiv_id=OLD["arxiv_id"], source="s2", ordinal=0, cited_title=NEW["title"], cited_year=2026),
            dict(citing_arxiv_id=OLD["arxiv_id"], source="s2", ordinal=1, cited_title="An older paper of ours", cited_year=2025)]))
        day1 = pl.DataFrame([OLD, twin], schema={"arxiv_id": pl.Utf8, "doi": pl.Utf8, "title": pl.Utf8, "year": pl.Int64})
        keyed = resolve_citations(refs, day1).citations
        assert keyed["cited_arxiv_id"].to_list() == [twin["arxiv_id"], None]  # the title named the twin alone; 1 cites itself
        wh.graph.save_graph(citations=keyed)
        papers = wh.graph.paper_identifiers()
        picked = wh.graph.citations_to_resolve(since=LOADED - timedelta(days=1),
                                               keys=new_paper_key_windows(papers, [NEW["arxiv_id"]]))
        # resolved, yet looked at again: the new paper shares the name it resolved by
        assert picked.select("ordinal", "cited_arxiv_id").rows() == [(0, twin["arxiv_id"])]
        changed, res = resolve_changed(picked, papers)
        assert changed.select("ordinal", "cited_arxiv_id").rows() == [(0, None)] and res.counts["unresolved"] == 1


def test_a_runs_settled_references_are_left_out_whether_it_reads_all_or_since(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _corpus(wh)
        refs = _keyed_refs()
        other = refs.with_columns(source=pl.lit("openalex"))  # the same list from a source not settled
        fetch = pl.DataFrame([dict(arxiv_id=OLD["arxiv_id"], source="s2", kind="references", found=True, n_rows=6,
                                   run_id="r1")])
        wh.graph.save_graph(citations=pl.concat([refs, other]), fetches=fetch)
        windows = new_paper_key_windows(wh.graph.paper_identifiers(), [NEW["arxiv_id"]])
        since = LOADED - timedelta(days=1)
        for scope in ({}, {"since": since, "keys": windows}):
            every = wh.graph.citations_to_resolve(**scope)
            left = wh.graph.citations_to_resolve(**scope, settled=("r1", ("s2",)))
            assert set(every["source"]) == {"s2", "openalex"}
            assert set(left["source"]) == {"openalex"} and left.height == every.height // 2
            # another run's papers, or another source, are not settled by r1's
            assert wh.graph.citations_to_resolve(**scope, settled=("r2", ("s2",))).height == every.height
            assert wh.graph.citations_to_resolve(**scope, settled=("r1", ("openalex",))).height == every.height


def test_a_reference_its_arxiv_id_resolves_is_read_again_for_a_new_papers_arxiv_id_not_its_title(tmp_path: Path) -> None:
    by_id = dict(arxiv_id="2609.00004", doi=None, title="A paper cited by its arXiv id here", year=2025)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        _corpus(wh, OLD, by_id, NEW)
        refs = CITATIONS.conform(pl.DataFrame([
            # 0: its arXiv id names by_id, its title the new paper: the id comes first, whatever the title
            dict(citing_arxiv_id=OLD["arxiv_id"], source="s2", ordinal=0, cited_arxiv=by_id["arxiv_id"] + "v2",
                 cited_title=NEW["title"], cited_year=2026),
            # 1: the same, by arXiv's DOI for it with no arXiv id given: read again (not known sure from its row)
            dict(citing_arxiv_id=OLD["arxiv_id"], source="s2", ordinal=1, cited_doi=f"10.48550/arXiv.{by_id['arxiv_id']}",
                 cited_title=NEW["title"], cited_year=2026),
            # 2: its arXiv id is the new paper's, its title another's: read again
            dict(citing_arxiv_id=OLD["arxiv_id"], source="s2", ordinal=2, cited_arxiv=NEW["arxiv_id"],
                 cited_title=by_id["title"], cited_year=2025)]))
        day1 = pl.DataFrame([OLD, by_id], schema={"arxiv_id": pl.Utf8, "doi": pl.Utf8, "title": pl.Utf8, "year": pl.Int64})
        keyed = resolve_citations(refs, day1).citations
        assert keyed["cited_arxiv_id"].to_list() == [by_id["arxiv_id"], by_id["arxiv_id"], by_id["arxiv_id"]]
        wh.graph.save_graph(citations=keyed)
        papers = wh.graph.paper_identifiers()
        picked = wh.graph.citations_to_resolve(unresolved_only=False, since=LOADED - timedelta(days=1),
                                               keys=new_paper_key_windows(papers, [NEW["arxiv_id"]]))
        assert picked["ordinal"].to_list() == [1, 2]
        # what was left out resolves today as it did: nothing was missed
        every = resolve_changed(wh.graph.citations_to_resolve(unresolved_only=False), papers)[0]
        assert every["ordinal"].to_list() == [2]
