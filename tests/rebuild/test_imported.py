"""A replay world imported from a benchmark's files: the same files and seed give the same bytes,
query papers' authors are never reviewers, a reviewer who lists a query paper wrote it, every
rated pair is a person and an arXiv paper of the world, and the samples' counts."""

from __future__ import annotations

import hashlib
import html
import json
import re
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from revbench.evaluation.importers.registry import load_benchmark
from revbench.evaluation.model import Benchmark
from revbench.synth.imported import (
    IMPORT_FORMAT,
    PROFILE_CATEGORY,
    QUERY_CATEGORY,
    ensure_imported_world,
    held_ratings,
    import_world,
    plan_world,
    survey_level,
    title_key,
)
from tests.support.cli import write_gold
from tests.support.rebuild import tiny_items, write_lrbench

SINCE, UNTIL = date(2026, 9, 1), date(2026, 9, 20)
SAMPLES = {"lrbench": "lrbench-sample", "goldstandard": "goldstandard-sample"}
# (queries, reviewers, publications, rated pairs), counted by hand from the sample files.
COUNTS = {"lrbench": (13, 28, 145, 29), "goldstandard": (49, 6, 90, 53)}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digests(world: Path) -> dict[str, str]:
    return {str(p.relative_to(world)): _sha(p) for p in sorted(world.rglob("*")) if p.is_file()}


def _titles(arxiv: pl.DataFrame) -> dict[str, str]:
    """Each paper's title as the world's arXiv feed gives it."""
    out = {}
    for a, versions in arxiv.select("arxiv_id", "versions").iter_rows():
        found = re.search(r"<title>(.*?)</title>", versions[-1]["entry"], re.DOTALL)
        assert found, a
        out[a] = html.unescape(found.group(1))
    return out


def _import(out: Path, kind: str, source: Path, seed: int = 7) -> tuple[Benchmark, dict]:
    bench = load_benchmark(kind, source, strict=True)
    return bench, import_world(out, kind, source, bench, seed, SINCE, UNTIL)


@pytest.fixture(params=sorted(SAMPLES))
def sample(request: pytest.FixtureRequest, external: Path) -> tuple[str, Path]:
    return request.param, external / SAMPLES[request.param]


@pytest.mark.parametrize(("rating", "level"), [
    (1.0, 1), (1.25, 1), (1.5, 2), (2.75, 3), (3.0, 3), (4.25, 4), (4.5, 5), (4.75, 5), (5.0, 5), (0.6, 1), (5.4, 5),
])
def test_survey_level_rounds_half_up_within_the_scale(rating: float, level: int) -> None:
    assert survey_level(rating) == level


def test_title_key_ignores_case_and_spacing() -> None:
    assert title_key("  Sparse\tAttention  for\nLONG documents ") == "sparse attention for long documents"
    assert title_key("A-B") != title_key("A B")


def test_the_samples_counts(sample: tuple[str, Path], tmp_path: Path) -> None:
    kind, source = sample
    queries, reviewers, publications, pairs = COUNTS[kind]
    bench = load_benchmark(kind, source, strict=True)
    assert held_ratings(bench).height == pairs
    _, papers, person_of = plan_world(bench, 7)
    assert (sum(p.query for p in papers), len(person_of), sum(not p.query for p in papers)) == (queries, reviewers,
                                                                                                 publications)
    manifest = import_world(tmp_path / "w", kind, source, bench, 7, SINCE, UNTIL)
    imp = manifest["imported"]
    assert (imp["queries"], imp["reviewers"], imp["publications"], imp["rated_pairs"]) == COUNTS[kind]
    assert imp["kind"] == kind and imp["benchmark_version"] == bench.version
    arxiv = pl.read_parquet(tmp_path / "w" / "arxiv.parquet")
    assert arxiv.height == queries + publications
    assert arxiv.filter(pl.col("primary_category") == QUERY_CATEGORY).height == queries
    assert arxiv.filter(pl.col("primary_category") == PROFILE_CATEGORY).height == publications
    assert json.loads((tmp_path / "w" / "world.json").read_text())["imported"] == imp


def test_the_same_files_and_seed_give_the_same_bytes(sample: tuple[str, Path], tmp_path: Path) -> None:
    kind, source = sample
    _import(tmp_path / "a", kind, source)
    _import(tmp_path / "b", kind, source)
    assert _sha(tmp_path / "a" / "arxiv.parquet") == _sha(tmp_path / "b" / "arxiv.parquet")
    first, second = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert "truth/benchmark_ratings.parquet" in first and first == second
    _import(tmp_path / "c", kind, source, seed=8)
    assert _sha(tmp_path / "c" / "arxiv.parquet") != first["arxiv.parquet"]


def test_the_order_of_the_tuples_does_not_matter(external: Path, tmp_path: Path) -> None:
    items = json.loads((external / "lrbench-sample" / "evaluations_pc.sample.json").read_text())
    forward = write_lrbench(tmp_path / "forward", items)
    backward = write_lrbench(tmp_path / "backward", items[::-1])
    _import(tmp_path / "a", "lrbench", forward)
    _import(tmp_path / "b", "lrbench", backward)
    first, second = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    del first["world.json"], second["world.json"]  # it names the source folder and its digest
    assert first == second


def _query_authors_are_never_reviewers(world: Path) -> None:
    truth = world / "truth"
    reviewers = set(pl.read_parquet(truth / "reviewers.parquet")["person_id"].to_list())
    mentions = pl.read_parquet(truth / "mentions.parquet")
    category = dict(pl.read_parquet(world / "arxiv.parquet").select("arxiv_id", "primary_category").iter_rows())
    held = pl.read_parquet(truth / "benchmark_ratings.parquet")
    others = set(mentions["person_id"].to_list()) - reviewers
    assert others, "every query paper has synthesised authors"
    for person in others:  # they write the query papers and nothing else
        assert {category[a] for a in mentions.filter(pl.col("person_id") == person)["arxiv_id"].to_list()} == {QUERY_CATEGORY}
    assert not set(held["person_id"].to_list()) & others
    for a in [a for a, c in category.items() if c == QUERY_CATEGORY]:
        assert set(mentions.filter(pl.col("arxiv_id") == a)["person_id"].to_list()) & others


def test_on_the_samples_query_authors_are_never_reviewers_and_every_pair_maps(sample: tuple[str, Path], tmp_path: Path) -> None:
    kind, source = sample
    bench, _ = _import(tmp_path / "w", kind, source)
    _query_authors_are_never_reviewers(tmp_path / "w")
    truth = tmp_path / "w" / "truth"
    held = pl.read_parquet(truth / "benchmark_ratings.parquet")
    assert held.height == COUNTS[kind][3]
    assert held.null_count().row(0) == (0,) * held.width
    arxiv = pl.read_parquet(tmp_path / "w" / "arxiv.parquet")
    queries = set(arxiv.filter(pl.col("primary_category") == QUERY_CATEGORY)["arxiv_id"].to_list())
    assert set(held["arxiv_id"].to_list()) == queries  # the world's queries are exactly the rated papers
    persons = set(pl.read_parquet(truth / "persons.parquet")["person_id"].to_list())
    assert set(held["person_id"].to_list()) <= persons
    reviewers = dict(pl.read_parquet(truth / "reviewers.parquet").select("reviewer_id", "person_id").iter_rows())
    assert all(reviewers[r] == p for r, p in held.select("reviewer_id", "person_id").iter_rows())
    assert held["level"].to_list() == [survey_level(x) for x in held["rating"].to_list()]
    # One benchmark paper, one arXiv id, and back.
    pairs = held.select("paper_id", "arxiv_id").unique()
    assert pairs["paper_id"].n_unique() == pairs["arxiv_id"].n_unique() == pairs.height
    # The world shows each rated paper under its real title.
    title_of = dict(bench.submissions.select("paper_id", "title").iter_rows())
    shown = _titles(arxiv)
    for paper_id, arxiv_id in pairs.iter_rows():
        assert title_key(shown[arxiv_id]) == title_key(title_of[paper_id])


def test_a_gold_standard_reviewer_who_lists_a_query_paper_wrote_it(external: Path, tmp_path: Path) -> None:
    source = external / "goldstandard-sample"
    bench = load_benchmark("goldstandard", source, strict=True)
    _, papers, person_of = plan_world(bench, 7)
    query_keys = {title_key(p.title): p for p in papers if p.query}
    listed = bench.draws[0].filter(pl.col("title").map_elements(title_key, return_dtype=pl.Utf8).is_in(list(query_keys)))
    assert listed.height >= 1  # the sample has one: a participant's profile holds a paper another one rated
    for r, title in listed.select("reviewer_id", "title").iter_rows():
        assert person_of[r] in query_keys[title_key(title)].team
    _import(tmp_path / "w", "goldstandard", source)
    held = pl.read_parquet(tmp_path / "w" / "truth" / "benchmark_ratings.parquet")
    mentions = pl.read_parquet(tmp_path / "w" / "truth" / "mentions.parquet")
    arxiv_of = dict(held.select("paper_id", "arxiv_id").unique().iter_rows())
    reviewers = dict(pl.read_parquet(tmp_path / "w" / "truth" / "reviewers.parquet").iter_rows())
    by_title = {title_key(t): p for p, t in bench.submissions.select("paper_id", "title").iter_rows()}
    for r, title in listed.select("reviewer_id", "title").iter_rows():
        authors = set(mentions.filter(pl.col("arxiv_id") == arxiv_of[by_title[title_key(title)]])["person_id"].to_list())
        assert reviewers[r] in authors


def test_a_hand_written_lrbench_folder(tiny_lrbench: Path, tmp_path: Path) -> None:
    bench = load_benchmark("lrbench", tiny_lrbench, strict=True)
    held = held_ratings(bench)
    assert held.rows() == [("r1", "q1", 5.0), ("r1", "q2", 1.0), ("r2", "q1", 2.0), ("r2", "q2", 5.0), ("r3", "q1", 4.0)]
    people, papers, person_of = plan_world(bench, 7)
    assert sorted(person_of) == ["r1", "r2", "r3"] and sorted(person_of.values()) == [0, 1, 2]
    queries = {p.source_id: p for p in papers if p.query}
    assert sorted(queries) == ["q1", "q2"]
    # r3 lists "sparse  attention for LONG documents": the query paper q1, not a publication of its own.
    assert person_of["r3"] in queries["q1"].team and person_of["r3"] not in queries["q2"].team
    assert all(person_of[r] not in queries["q1"].team for r in ("r1", "r2"))
    synthesised = [m for q in queries.values() for m in q.team if m not in person_of.values()]
    assert 2 <= len(synthesised) <= 6 and len(set(synthesised)) == len(synthesised)
    assert len(people) == 3 + len(synthesised)
    pubs = {p.title: p for p in papers if not p.query}
    assert sorted(pubs) == ["Efficient transformers", "Long-range attention", "Message passing for chemistry",
                            "Protein folding with graphs", "Retrieval over documents"]
    # One paper per distinct title, written by every reviewer who lists it.
    assert pubs["Efficient transformers"].team == [person_of["r1"]]
    assert pubs["Protein folding with graphs"].team == [person_of["r2"]]
    # Reviewers' S2 ids are the digits of the benchmark's ids.
    assert [people[person_of[r]].s2_ids for r in ("r1", "r2", "r3")] == [["1"], ["2"], ["3"]]
    out = tmp_path / "w"
    manifest = import_world(out, "lrbench", tiny_lrbench, bench, 7, SINCE, UNTIL)
    assert manifest["imported"] | {"source": None} == {
        "kind": "lrbench", "source": None, "benchmark_version": bench.version, "format": IMPORT_FORMAT, "query_category": QUERY_CATEGORY,
        "profile_category": PROFILE_CATEGORY, "queries": 2, "reviewers": 3, "publications": 5, "rated_pairs": 5}
    _query_authors_are_never_reviewers(out)
    truth = pl.read_parquet(out / "truth" / "benchmark_ratings.parquet")
    assert truth.null_count().row(0) == (0,) * truth.width
    assert truth.select("reviewer_id", "paper_id", "level").rows() == [
        ("r1", "q1", 5), ("r1", "q2", 1), ("r2", "q1", 2), ("r2", "q2", 5), ("r3", "q1", 4)]
    mentions = pl.read_parquet(out / "truth" / "mentions.parquet")
    q1 = truth.filter(pl.col("paper_id") == "q1")["arxiv_id"][0]
    r3 = truth.filter(pl.col("reviewer_id") == "r3")["person_id"][0]
    assert r3 in mentions.filter(pl.col("arxiv_id") == q1)["person_id"].to_list()
    arxiv = pl.read_parquet(out / "arxiv.parquet")
    assert arxiv.height == 7 and arxiv["arxiv_id"].str.contains(r"^\d{4}\.\d{5}$").all()


def test_a_tuple_order_or_a_new_tuple_keeps_each_persons_name(tiny_lrbench: Path, tmp_path: Path) -> None:
    """Names are drawn from the reviewer's id, not from the position: adding a tuple for a new
    reviewer leaves the others' names alone."""
    bench = load_benchmark("lrbench", tiny_lrbench, strict=True)
    people, _, person_of = plan_world(bench, 7)
    items = tiny_items()
    items.append({**items[0], "negative": {**items[0]["negative"], "author_id": "r0", "score": 1}})
    more = load_benchmark("lrbench", write_lrbench(tmp_path / "more", items), strict=True)
    people2, _, person_of2 = plan_world(more, 7)
    assert person_of2["r0"] == 0 and person_of2["r1"] == 1  # r0 sorts first: indices move...
    for r in ("r1", "r2", "r3"):  # ...names and S2 ids do not
        a, b = people[person_of[r]], people2[person_of2[r]]
        assert (a.first, a.last, a.emails, a.inst, a.s2_ids) == (b.first, b.last, b.emails, b.inst, b.s2_ids)


def test_an_imported_world_is_reused_until_its_key_changes(tiny_lrbench: Path, tmp_path: Path) -> None:
    bench = load_benchmark("lrbench", tiny_lrbench, strict=True)
    out = tmp_path / "w"
    first = ensure_imported_world(out, "lrbench", tiny_lrbench, bench, 7, SINCE, UNTIL)
    stamp = (out / "arxiv.parquet").stat().st_mtime_ns
    assert ensure_imported_world(out, "lrbench", tiny_lrbench, bench, 7, SINCE, UNTIL) == first
    assert (out / "arxiv.parquet").stat().st_mtime_ns == stamp
    other = ensure_imported_world(out, "lrbench", tiny_lrbench, bench, 8, SINCE, UNTIL)
    assert other["spec_key"] != first["spec_key"] and other["spec_key"].endswith(f"-s8-f{IMPORT_FORMAT}")
    assert json.loads((out / "world.json").read_text())["spec_key"] == other["spec_key"]


def test_an_edited_archive_gives_another_world(tmp_path: Path) -> None:
    source = write_gold(tmp_path / "gold")
    out = tmp_path / "w"
    first = ensure_imported_world(out, "goldstandard", source, load_benchmark("goldstandard", source, strict=True), 7,
                                  SINCE, UNTIL)
    archive = source / "d_20_1" / "archives" / "~ir.jsonl"
    archive.write_text(archive.read_text().replace("Dense passage retrieval", "Sparse passage retrieval"))
    second = ensure_imported_world(out, "goldstandard", source, load_benchmark("goldstandard", source, strict=True), 7,
                                   SINCE, UNTIL)
    assert second["spec_key"] != first["spec_key"]
    assert "Sparse passage retrieval" in {t for t in _titles(pl.read_parquet(out / "arxiv.parquet")).values()}


def test_synthesised_names_use_no_word_of_the_real_text(tmp_path: Path) -> None:
    """A real abstract that names people ("Michael S. Jordan") or happens to hold a given name or a
    surname must not give a synthesised respondent that name: the release's privacy audit would
    stop on public text. Here the abstract holds every given name the generator has but three."""
    from revbench.synth.vocab import FIRST_NAMES

    spared = sorted(FIRST_NAMES)[:3]
    items = tiny_items()
    items[0]["anchor"]["abstract"] += " We thank " + ", ".join(n for n in FIRST_NAMES if n not in spared) + "."
    bench = load_benchmark("lrbench", write_lrbench(tmp_path / "lr", items), strict=True)
    people, _papers, _ = plan_world(bench, 7)
    text = " ".join([*bench.submissions["abstract"].to_list(), *bench.submissions["title"].to_list(),
                     *bench.draws[0]["title"].to_list(), *bench.draws[0]["abstract"].drop_nulls().to_list()]).casefold()
    words = set(re.findall(r"[^\W_]+", text))
    assert {p.first for p in people} <= set(spared)
    assert not any(w in words for p in people for w in re.findall(r"[^\W_]+", f"{p.first} {p.last}".casefold()))
