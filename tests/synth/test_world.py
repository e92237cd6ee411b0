from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from revbench.synth.draw import BAD_KINDS, WorldSpec
from revbench.synth.world import ensure_world, generate_world, grow_world


def _digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*.parquet")):
        h.update(pl.read_parquet(p).hash_rows().to_numpy().tobytes())
    return h.hexdigest()


def test_same_seed_same_world(tmp_path: Path) -> None:
    spec = WorldSpec(n_papers=80, seed=4)
    generate_world(tmp_path / "a", spec)
    generate_world(tmp_path / "b", spec)
    generate_world(tmp_path / "c", WorldSpec(n_papers=80, seed=5))
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b") != _digest(tmp_path / "c")


def test_world_has_what_later_stages_need(small_world: Path) -> None:
    manifest = json.loads((small_world / "world.json").read_text())
    assert manifest["synthetic"] is True and "SYNTHETIC" in manifest["notice"]
    persons = pl.read_parquet(small_world / "truth" / "persons.parquet")
    mentions = pl.read_parquet(small_world / "truth" / "mentions.parquet")
    assert manifest["counts"]["mentions"] == mentions.height
    assert persons["name"].is_duplicated().any(), "homonyms expected"
    homonyms = persons.filter(pl.col("name").is_duplicated())
    assert homonyms.group_by("name").agg(pl.col("institution").n_unique()).filter(pl.col("institution") > 1).height > 0
    assert (persons["emails"].list.len() > 1).any(), "people with several emails expected"
    assert all(e.endswith(".example") for es in persons["emails"] for e in es), "no deliverable addresses"
    bad = pl.read_parquet(small_world / "truth" / "bad_records.parquet")
    assert set(bad["kind"]) == set(BAD_KINDS)
    docs = pl.read_parquet(small_world / "documents.parquet")
    tei = b"".join(docs["tei"].to_list())
    assert b"MIT CSAIL" in tei or b">MIT<" in tei, "institution aliases expected in PDFs"
    assert b"SYNTHETIC" in tei and b"SYNTHETIC" in docs["pdf"][0]
    for row in pl.read_parquet(small_world / "arxiv.parquet").head(3).iter_rows(named=True):
        assert "SYNTHETIC" in row["versions"][0]["entry"]


def test_ensure_world_reuses(tmp_path: Path) -> None:
    spec = WorldSpec(n_papers=40, seed=1)
    m1 = ensure_world(tmp_path, spec)
    stamp = (tmp_path / "arxiv.parquet").stat().st_mtime_ns
    assert ensure_world(tmp_path, spec) == m1
    assert (tmp_path / "arxiv.parquet").stat().st_mtime_ns == stamp


GROW_SPEC = WorldSpec(n_papers=72, seed=9, start=date(2026, 9, 1), end=date(2026, 9, 30))
"""A small world whose window ends on a month's last day, so growth opens a new id month."""

ID_FILES = ["arxiv.parquet", "s2_papers.parquet", "documents.parquet", "mentions.parquet",
            "truth/mentions.parquet", "truth/paper_topics.parquet"]


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The same world with 0, 1 and 2 growth days."""
    root = tmp_path_factory.mktemp("grown")
    for n in (0, 1, 2):
        generate_world(root / str(n), dataclasses.replace(GROW_SPEC, extra_days=n))
    return {n: root / str(n) for n in (0, 1, 2)}


def _ids(world: Path) -> list[str]:
    return pl.read_parquet(world / "arxiv.parquet")["arxiv_id"].to_list()


def _histories(world: Path) -> dict[str, list[dict[str, object]]]:
    df = pl.read_parquet(world / "s2_authors.parquet")
    return {a: json.loads(j) for a, j in df.iter_rows()}


def test_growth_keeps_the_base_world(grown: dict[int, Path]) -> None:
    base, one = grown[0], grown[1]
    base_ids = _ids(base)
    for name in ID_FILES:
        old = pl.read_parquet(base / name)
        kept = pl.read_parquet(one / name).filter(pl.col("arxiv_id").is_in(base_ids))
        assert kept.equals(old), name
    for name in ["truth/persons.parquet", "truth/bad_records.parquet"]:
        assert pl.read_parquet(one / name).equals(pl.read_parquet(base / name)), name
    k = GROW_SPEC.papers_per_day()
    assert k == round(72 / 30)
    new = pl.read_parquet(one / "arxiv.parquet").filter(~pl.col("arxiv_id").is_in(base_ids))
    ids = new["arxiv_id"].to_list()
    assert len(ids) == k and len(set(_ids(one))) == len(base_ids) + k
    day = GROW_SPEC.end + timedelta(days=1)
    for row in new.iter_rows(named=True):
        assert [v["version"] for v in row["versions"]] == [1]
        assert row["versions"][0]["date"].date() == day
        assert row["arxiv_id"].startswith(day.strftime("%y%m") + ".")
    assert set(pl.read_parquet(one / "mentions.parquet")["arxiv_id"]) >= set(ids)
    assert set(pl.read_parquet(one / "documents.parquet")["arxiv_id"]) >= set(ids)
    assert set(pl.read_parquet(one / "truth/mentions.parquet")["arxiv_id"]) >= set(ids)
    # New papers land at the end of existing authors' histories, base entries unchanged.
    before, after = _histories(base), _histories(one)
    grew = 0
    for author, hist in before.items():
        assert after[author][: len(hist)] == hist
        extra = after[author][len(hist):]
        assert all(e["externalIds"].get("ArXiv") in ids for e in extra)
        grew += bool(extra)
    assert grew > 0
    manifest = json.loads((one / "world.json").read_text())
    assert manifest["counts"]["papers"] == len(base_ids) + k
    assert manifest["days"] == {"base_end": "2026-09-30", "extra_days": 1, "last_day": "2026-10-01",
                                "papers_per_day": k}


def test_growth_is_the_same_day_by_day(grown: dict[int, Path]) -> None:
    one, two = grown[1], grown[2]
    ids_one, ids_two = _ids(one), _ids(two)
    assert ids_two[: len(ids_one)] == ids_one and len(set(ids_two)) == len(ids_two)
    assert len(ids_two) == len(ids_one) + GROW_SPEC.papers_per_day()
    for name in ID_FILES:
        kept = pl.read_parquet(two / name).filter(pl.col("arxiv_id").is_in(ids_one))
        assert kept.equals(pl.read_parquet(one / name)), name
    day2 = pl.read_parquet(two / "arxiv.parquet").filter(~pl.col("arxiv_id").is_in(ids_one))
    assert {r["versions"][0]["date"].date() for r in day2.iter_rows(named=True)} == {date(2026, 10, 2)}


def test_grow_world_equals_generating_grown(grown: dict[int, Path], tmp_path: Path) -> None:
    world = tmp_path / "world"
    generate_world(world, GROW_SPEC)
    manifest = grow_world(world, 1)
    assert manifest == json.loads((grown[1] / "world.json").read_text())
    assert _digest(world) == _digest(grown[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["world"], "no temporary folders left behind"


def test_keys_of_grown_worlds() -> None:
    d = dict(GROW_SPEC.__dict__)
    del d["extra_days"]
    del d["graph"]  # added later still: a world with its graph keeps the key it had before
    del d["citation_link"]  # and the calibrated citation link (1) keeps it too
    legacy = hashlib.sha256(json.dumps(d, default=str, sort_keys=True).encode()).hexdigest()[:16]
    one = dataclasses.replace(GROW_SPEC, extra_days=1)
    assert GROW_SPEC.key() == legacy == GROW_SPEC.base_key() == one.base_key()
    assert one.key() != legacy


def test_world_has_the_real_quirks_at_real_rates(tmp_path: Path) -> None:
    """Second affiliations (~20% of people), ORCIDs (~30%, the same on every paper that shows
    one, missing on some), orphan affiliations in the TEI, null S2 author ids."""
    from revbench.clients.tei import parse_tei_header

    world = tmp_path / "w"
    generate_world(world, WorldSpec(n_papers=400, seed=3))
    persons = pl.read_parquet(world / "truth" / "persons.parquet")
    second = (persons["institutions"].list.len() > 1).mean()
    with_orcid = persons["orcid"].is_not_null().mean()
    assert 0.15 <= second <= 0.25 and 0.25 <= with_orcid <= 0.35
    mentions = pl.read_parquet(world / "mentions.parquet").join(
        pl.read_parquet(world / "truth" / "mentions.parquet"), on=["arxiv_id", "position"])
    shown = mentions.join(persons.select("person_id", pl.col("orcid").alias("true_orcid")), on="person_id")
    assert shown.filter(pl.col("orcid").is_not_null() & (pl.col("orcid") != pl.col("true_orcid"))).height == 0
    having = shown.filter(pl.col("true_orcid").is_not_null())
    assert 0.7 < having["orcid"].is_not_null().mean() < 1.0
    assert (mentions["affiliations"].list.len() > 1).sum() > 0
    assert 0 < mentions["s2_author_id"].is_null().mean() < 0.06
    docs = pl.read_parquet(world / "documents.parquet")
    parsed = [parse_tei_header(t) for t in docs["tei"].to_list() if b"r\xe9sum" not in t]
    orphaned = {p.arxiv_id for p in parsed if p.orphan_affiliations}
    assert 0.01 < len(orphaned) / docs["arxiv_id"].n_unique() < 0.12
    multi = [a for p in parsed for a in p.authors if len(a.affiliations) > 1]
    assert multi and all(a.affiliations[0].institution or a.affiliations[0].department for a in multi)
    assert any(a.orcid for p in parsed for a in p.authors)


def test_a_world_of_an_older_format_is_regenerated(tmp_path: Path) -> None:
    from revbench.synth.world import WORLD_FORMAT

    spec = WorldSpec(n_papers=40, seed=2, documents=False)
    manifest = ensure_world(tmp_path / "w", spec)
    assert manifest["format"] == WORLD_FORMAT >= 4
    old = {**manifest, "format": 3}
    (tmp_path / "w" / "world.json").write_text(json.dumps(old))
    (tmp_path / "w" / "truth" / "planted_conflicts.parquet").unlink()
    assert ensure_world(tmp_path / "w", spec)["format"] == WORLD_FORMAT
    assert (tmp_path / "w" / "truth" / "planted_conflicts.parquet").exists()


def test_the_planted_conflict_only_a_second_affiliation_reveals(tmp_path: Path) -> None:
    """The planted person's first institution is none of the query authors', their second is
    one author's; they never wrote with them; and the pools draw that query first."""
    from revbench.synth.draw import PLANTED_QUERY_SEED, query_rank
    from revbench.tasks.pools import _rank, sample_queries

    world = tmp_path / "w"
    generate_world(world, WorldSpec(n_papers=120, seed=9, documents=False))
    planted = pl.read_parquet(world / "truth" / "planted_conflicts.parquet").to_dicts()
    assert len(planted) == 1 and planted[0]["kind"] == "second_affiliation"
    q, person = planted[0]["query_id"], planted[0]["person_id"]
    persons = {r["person_id"]: r for r in pl.read_parquet(world / "truth" / "persons.parquet").to_dicts()}
    truth = pl.read_parquet(world / "truth" / "mentions.parquet")
    query_people = truth.filter(pl.col("arxiv_id") == q)["person_id"].to_list()
    theirs = {i for p in query_people for i in persons[p]["institutions"]}
    first, second = persons[person]["institutions"]
    assert first not in theirs and second in theirs
    own_papers = set(truth.filter(pl.col("person_id") == person)["arxiv_id"])
    assert q not in own_papers and not truth.filter(pl.col("arxiv_id").is_in(own_papers)
                                                    & pl.col("person_id").is_in(query_people)).height
    assert query_rank(3, "cs.AI", "2610.00001") == _rank(3, "cs.AI", "2610.00001")
    arxiv = pl.read_parquet(world / "arxiv.parquet").select("arxiv_id", "primary_category")
    bad = set(pl.read_parquet(world / "truth" / "bad_records.parquet")["arxiv_id"])
    cat = arxiv.filter(pl.col("arxiv_id") == q)["primary_category"][0]
    drawn = sample_queries(arxiv.filter(~pl.col("arxiv_id").is_in(bad)), [cat], 1, PLANTED_QUERY_SEED, set())
    assert drawn["arxiv_id"].to_list() in ([q], [min(own_papers)])
    # Their paper's mention shows both institutions, so the COI check can see the second.
    shown = pl.read_parquet(world / "mentions.parquet").filter(pl.col("arxiv_id").is_in(own_papers))
    assert [a["institution"] for a in shown["affiliations"][0]] == [first, second]
