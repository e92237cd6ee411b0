"""S2AG's incremental diffs: what the graph stage keeps of a release (every paper's graph keys,
the corpus papers covered, their citations) brought to the next release by an increment is what
reading that release whole gives; applying it again gives the same; deletes remove (a citation
by its id or, without one, by its two corpus ids; a paper with what it covered); the papers an
increment did not touch are not given again. Built from the published format (the Datasets
API's ``update_files`` and ``delete_files`` of each increment: rows of the dataset's own shape,
deletes carrying the keys)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

from revbench.synth.bulk_files import revise, s2ag_rows, write_s2ag
from revbench.tasks.graph_bulk import s2ag_framed
from revbench.warehouse.bulk import s2ag_diff_chain, s2ag_releases
from revbench.warehouse.bulk_diffs import apply_diff
from revbench.warehouse.bulk_answers import s2ag_answers
from revbench.warehouse import bulk, bulk_state
from revbench.warehouse.bulk_state import MASKS, build_state, covered_ids, part
from tests.support.worlds import week_world

R0, R1, R2 = "2026-09-08", "2026-09-15", "2026-09-22"
SHA = "https://www.semanticscholar.org/paper/"


def _shard(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))


PARTS = ("papers", "covered", "citations")


def _tables(state: Path) -> dict[str, pl.DataFrame]:
    out = {}
    con = duckdb.connect()
    for name in PARTS:
        df = con.sql(f"SELECT * FROM {part(state, name)}").pl()
        out[name] = df.sort(df.columns)
    return out


def _same(a: Path, b: Path) -> None:
    ta, tb = _tables(a), _tables(b)
    for name in PARTS:
        assert ta[name].equals(tb[name]), name


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A world written as release R0, then (the same world, S2's corrections applied) as R1 with
    the increment R0 -> R1; and its corpus."""
    w, root = tmp_path / "world", tmp_path / "s2ag"
    week_world(w, n_papers=24, seed=3)
    write_s2ag(w, root, release=R0)
    counts = write_s2ag(w, root, release=R1, since=R0, revised=True)
    assert counts["papers_updates"] and counts["papers_deletes"] and counts["citations_updates"] and counts["citations_deletes"]
    return w, root, pl.read_parquet(w / "s2_papers.parquet")["arxiv_id"].to_list()


def test_an_increment_gives_what_the_release_read_whole_gives(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    w, root, corpus = world
    assert s2ag_releases(root) == [R0, R1] and [(f, t) for f, t, _ in s2ag_diff_chain(root, R0)] == [(R0, R1)]
    state = tmp_path / "state"
    build_state(root / R0, state / R0, corpus)
    step = apply_diff(state / R0, root / "diffs" / f"{R0}_{R1}", state / R1, corpus)
    changed, dropped = step.changed, step.dropped
    build_state(root / R1, state / "whole", corpus)
    _same(state / R1, state / "whole")
    # the answers too, paper by paper
    for s in (state / R1, state / "whole"):
        assert covered_ids(s) == covered_ids(state / "whole")
    ids = covered_ids(state / R1)
    a, b = (s2ag_framed(ids, *s2ag_answers(s, ids)) for s in (state / R1, state / "whole"))
    assert a.citations.equals(b.citations) and a.topics.equals(b.topics) and a.fetches.equals(b.fetches)
    # only the papers S2's corrections touched are given again (the world did not grow)
    before, after = s2ag_rows(w), revise(s2ag_rows(w))
    corpus_rows = sorted((p for p in before["papers"] if p["publicationtypes"]), key=lambda p: p["externalids"]["ArXiv"])
    assert dropped == [corpus_rows[1]["externalids"]["ArXiv"]]
    # those citing a paper S2 updated under its URL are patched, not answered again
    assert set(changed) | set(step.patched) == _touched(before, after) and 0 < len(changed) < len(ids)
    assert not set(changed) & set(step.patched) and step.patched and step.recited


def _touched(before: dict, after: dict) -> set[str]:
    """The corpus papers of ``after`` whose row, citations or cited papers differ from ``before``."""
    rows = [{p["corpusid"]: p for p in r["papers"]} for r in (before, after)]
    edited = {k for k in rows[0].keys() | rows[1].keys() if rows[0].get(k) != rows[1].get(k)}
    cites: list[dict[int, list[dict]]] = [{}, {}]
    for i, r in enumerate((before, after)):
        for c in r["citations"]:
            cites[i].setdefault(c["citingcorpusid"], []).append(c)
    return {p["externalids"]["ArXiv"] for cid, p in rows[1].items() if p["publicationtypes"]
            and (cid in edited or cites[0].get(cid) != cites[1].get(cid)
                 or any(c["citedcorpusid"] in edited for c in cites[1].get(cid, [])))}


def test_applying_an_increment_again_gives_the_same(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, root, corpus = world
    state = tmp_path / "state"
    build_state(root / R0, state / R0, corpus)
    first = apply_diff(state / R0, root / "diffs" / f"{R0}_{R1}", state / R1, corpus)
    again = apply_diff(state / R0, root / "diffs" / f"{R0}_{R1}", state / "again", corpus)
    assert first == again
    _same(state / R1, state / "again")
    # and an increment with nothing in it changes nothing
    (root / "diffs" / f"{R1}_{R2}").mkdir()
    assert apply_diff(state / R1, root / "diffs" / f"{R1}_{R2}", state / R2, corpus) == ([], [], [], [])
    _same(state / R1, state / R2)


def _small_release(root: Path) -> tuple[Path, list[str], list[dict]]:
    """Release R0 of three papers and four citations, and the increment R0 -> R1: paper 9
    retitled; a paper new to S2 (and to the corpus) with its citation; paper 2 deleted; citation
    12 deleted by its id, the id-less one by its corpus ids; 11 updated. (diff, corpus, papers)"""
    papers = [{"corpusid": 1, "externalids": {"ArXiv": "2101.00001"}, "url": SHA + "a" * 40, "title": "A", "year": 2021},
              {"corpusid": 2, "externalids": {"ArXiv": "2101.00002"}, "url": SHA + "b" * 40, "title": "B", "year": 2021},
              {"corpusid": 9, "externalids": {"DOI": "10.1234/x"}, "url": SHA + "c" * 40, "title": "Cited", "year": 2001}]
    cites = [{"citationid": 11, "citingcorpusid": 1, "citedcorpusid": 9, "isinfluential": False},
             {"citationid": 12, "citingcorpusid": 1, "citedcorpusid": 2, "isinfluential": True},
             {"citationid": None, "citingcorpusid": 2, "citedcorpusid": 9, "isinfluential": None},
             {"citationid": 21, "citingcorpusid": 2, "citedcorpusid": 1, "isinfluential": None}]
    _shard(root / R0 / "papers" / "p.jsonl.gz", papers)
    _shard(root / R0 / "citations" / "c.jsonl.gz", cites)
    diff = root / "diffs" / f"{R0}_{R1}"
    _shard(diff / "papers" / "updates" / "u.jsonl.gz", [{**papers[2], "title": "Cited, retitled"},
                                                        {"corpusid": 3, "externalids": {"ArXiv": "2101.00003"}, "title": "C"}])
    _shard(diff / "papers" / "deletes" / "d.jsonl.gz", [{"corpusid": 2}])
    _shard(diff / "citations" / "updates" / "u.jsonl.gz", [{**cites[0], "isinfluential": True},
                                                           {"citationid": 31, "citingcorpusid": 3, "citedcorpusid": 9}])
    _shard(diff / "citations" / "deletes" / "d.jsonl.gz", [{"citationid": 12}, {"citingcorpusid": 2, "citedcorpusid": 9}])
    return diff, ["2101.00001", "2101.00002", "2101.00003"], papers


def test_deletes_remove_and_updates_replace(tmp_path: Path) -> None:
    root, state = tmp_path / "s2ag", tmp_path / "state"
    diff, corpus, _ = _small_release(root)
    build_state(root / R0, state / R0, corpus)
    assert covered_ids(state / R0) == ["2101.00001", "2101.00002"]
    changed, dropped, patched, recited = apply_diff(state / R0, diff, state / R1, corpus)
    # paper 1's own citation changed: it is answered again whole, not patched
    assert changed == ["2101.00001", "2101.00003"] and dropped == ["2101.00002"] and patched == [] and recited == [9]
    t = _tables(state / R1)
    assert sorted(t["papers"]["corpusid"].to_list()) == [1, 3, 9]
    assert t["papers"].filter(pl.col("corpusid") == 9)["title"].to_list() == ["Cited, retitled"]
    assert t["citations"].select("citationid", "citingcorpusid", "isinfluential").rows() == [(11, 1, True), (31, 3, None)]
    got = s2ag_framed(corpus, *s2ag_answers(state / R1, corpus))
    refs = {r["citing_arxiv_id"]: r for r in got.citations.to_dicts()}
    assert refs["2101.00001"]["cited_title"] == "Cited, retitled" and refs["2101.00001"]["is_influential"] is True
    assert refs["2101.00003"]["cited_doi"] == "10.1234/x"
    assert not any(f["found"] for f in got.fetches.to_dicts() if f["arxiv_id"] == "2101.00002")


def _rows(path: Path) -> int:
    return int(duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchall()[0][0])


def _layered(tmp_path: Path, monkeypatch) -> tuple[Path, Path, Path, list[str], list[dict]]:  # type: ignore[no-untyped-def]
    """The small release (R0) and its increment (R1) as state folders (a release this small is mostly
    masked by any increment: kept as layers here however much); (root, state, diff, corpus, papers)."""
    root, state = tmp_path / "s2ag", tmp_path / "state"
    diff, corpus, papers = _small_release(root)
    monkeypatch.setattr(bulk_state, "COMPACT_SHARE", 1.01)
    build_state(root / R0, state / R0, corpus)
    apply_diff(state / R0, diff, state / R1, corpus)
    return root, state, diff, corpus, papers


def test_an_increment_is_a_layer_linking_the_release_it_starts_from(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    root, state, diff, corpus, papers = _layered(tmp_path, monkeypatch)
    for name in ("papers", "citations"):
        base = sorted((state / R0 / name).glob("*.parquet"))
        # the release's parts linked, never copied; the increment's rows in a part of their own
        assert base and all(os.path.samefile(f, state / R1 / name / f.name) for f in base)
        own = sorted(set((state / R1 / name).glob("*.parquet")) - {state / R1 / name / f.name for f in base})
        assert [f.name for f in own] == [f"diff-{diff.name}.parquet"]
    assert _rows(state / R1 / "papers" / f"diff-{diff.name}.parquet") == 2
    assert _rows(state / R1 / "citations" / f"diff-{diff.name}.parquet") == 2
    # what the increment replaced or deleted is masked: papers 2 and 9; citations 11, 12, the id-less
    # one, and 21 (of paper 2, no longer covered)
    assert _rows(state / R1 / MASKS["papers"]) == 2 and _rows(state / R1 / MASKS["citations"]) == 4
    # A second increment over the layer: paper 9 retitled again, citation 31 (the first increment's
    # own row) deleted; then the release it started from goes, as the graph stage removes it.
    later = root / "diffs" / f"{R1}_{R2}"
    _shard(later / "papers" / "updates" / "u.jsonl.gz", [{**papers[2], "title": "Cited, retitled twice"}])
    _shard(later / "citations" / "deletes" / "d.jsonl.gz", [{"citationid": 31}])
    changed, dropped, patched, recited = apply_diff(state / R1, later, state / R2, corpus)
    # paper 3 lost its citation; paper 1's references to paper 9 are patched
    assert changed == ["2101.00003"] and dropped == [] and patched == ["2101.00001"] and recited == [9]
    shutil.rmtree(state / R0)
    t = _tables(state / R2)
    assert t["papers"].filter(pl.col("corpusid") == 9)["title"].to_list() == ["Cited, retitled twice"]
    assert sorted(t["papers"]["corpusid"].to_list()) == [1, 3, 9]
    assert t["citations"].select("citationid", "citingcorpusid", "isinfluential").rows() == [(11, 1, True)]
    assert _rows(state / R2 / MASKS["papers"]) == 3 and _rows(state / R2 / MASKS["citations"]) == 5


def test_a_layer_masked_enough_is_rewritten_whole(world, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _, root, corpus = world
    state = tmp_path / "state"
    build_state(root / R0, state / R0, corpus)
    build_state(root / R1, state / "whole", corpus)
    layered = apply_diff(state / R0, root / "diffs" / f"{R0}_{R1}", state / R1, corpus)
    assert all((state / R1 / MASKS[n]).is_file() for n in MASKS)  # a share below the threshold: kept as a layer
    monkeypatch.setattr(bulk_state, "COMPACT_SHARE", 0.0)
    assert apply_diff(state / R0, root / "diffs" / f"{R0}_{R1}", state / "compacted", corpus) == layered
    for name in MASKS:
        assert not (state / "compacted" / MASKS[name]).exists()
        assert [f.name for f in (state / "compacted" / name).glob("*.parquet")] == ["part-00000.parquet"]
        assert not os.path.samefile(state / "compacted" / name / "part-00000.parquet", state / R0 / name / "part-00000.parquet")
    _same(state / "compacted", state / "whole")
    _same(state / R1, state / "whole")


def test_a_release_streamed_to_its_shards_holds_what_the_rows_dealt_out_would(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # ``write_s2ag`` streams a release (never held whole); the rows a shard holds, in order, are
    # what dealing the release's rows out to the shards gives.
    w, _, _ = world
    counts = write_s2ag(w, tmp_path / "sharded", release=R0, parts=3)
    rows = s2ag_rows(w)
    assert counts == {d: len(items) for d, items in rows.items()} and counts["citations"] > 3
    for dataset, items in rows.items():
        for i in range(3):
            with gzip.open(tmp_path / "sharded" / R0 / dataset / f"part{i}.jsonl.gz", "rt") as f:
                assert [json.loads(line) for line in f] == items[i::3], (dataset, i)


def test_two_papers_sharing_a_corpus_id_are_refused_not_merged(world, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Corpus ids come from the S2 ids' first hex digits; where two papers share them (at 40 bits
    # two of a 160k world's 1.2 million did), S2AG would hold one paper for two and the bulk path
    # would rewire their citations: the writer refuses, naming both.
    import revbench.synth.bulk_files as bulk_files

    w, _, _ = world
    monkeypatch.setattr(bulk_files, "CORPUS_ID_HEX", 1)
    with pytest.raises(bulk_files.CorpusIdClash, match=r"S2 papers [0-9a-f]{40} and [0-9a-f]{40} share corpus id"):
        write_s2ag(w, tmp_path / "clash", release=R0)


def test_a_part_read_for_some_rows_holds_those_the_whole_part_holds(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    state = _layered(tmp_path, monkeypatch)[1]
    assert (state / R1 / MASKS["papers"]).is_file() and (state / R1 / MASKS["citations"]).is_file()
    con = duckdb.connect()
    # Each picks a masked row (paper 2 deleted, paper 9's first row replaced; citations 11 and 12)
    # beside rows the masks keep: the rows picked are those the masks keep, once each.
    for folder in (state / R0, state / R1):
        for name, where in (("papers", "corpusid IN (2, 9, 3)"), ("citations", "citingcorpusid IN (1, 2)"),
                            ("covered", "arxiv = '2101.00001'")):
            whole = con.sql(f"SELECT * FROM {part(folder, name)} WHERE {where}").pl()
            some = con.sql(f"SELECT * FROM {part(folder, name, where)}").pl()
            assert some.height and some.sort(some.columns).equals(whole.sort(whole.columns)), (folder.name, name)
    assert con.sql(f"SELECT title FROM {part(state / R1, 'papers', 'corpusid = 9')}").fetchall() == [("Cited, retitled",)]
    assert con.sql(f"SELECT count(*) FROM {part(state / R1, 'papers', 'corpusid = 2')}").fetchall() == [(0,)]


def test_the_keys_a_part_is_read_for_are_listed_up_to_a_bound_then_asked_as_a_query(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    state = _layered(tmp_path, monkeypatch)[1]
    con = duckdb.connect()
    keys = "SELECT * FROM (VALUES (2), (9), (3), (NULL), (9)) t(k)"
    listed = bulk.keys_in(con, "corpusid", keys)
    assert listed == "corpusid IN (2, 3, 9)"  # each once, the null left out (IN never matches it)
    monkeypatch.setattr(bulk, "LISTED_KEYS", 2)
    asked = bulk.keys_in(con, "corpusid", keys)
    assert asked == f"corpusid IN ({keys})"
    rows = [sorted(con.sql(f"SELECT corpusid, title FROM {part(state / R1, 'papers', w)}").fetchall()) for w in (listed, asked)]
    assert rows[0] == rows[1] == [(3, "C"), (9, "Cited, retitled")]
    assert bulk.keys_in(con, "corpusid", "SELECT 1 WHERE false") == "FALSE"
    assert con.sql(f"SELECT count(*) FROM {part(state / R1, 'papers', 'FALSE')}").fetchall() == [(0,)]
