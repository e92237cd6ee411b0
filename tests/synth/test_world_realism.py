"""The default SYNTHETIC world holds the targets measured on real data (revbench/reference/world_targets.txt)
that its truth gives: pool-like pairs rate as LR-bench's did, people cite those who know the citing
paper's subject, references per paper and self-citation as in real reference lists."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from revbench.app.entry import DEMO_SINCE, DEMO_UNTIL
from revbench.synth import citations
from revbench.synth.draw import WorldSpec
from revbench.synth.realism import Row, judge, load_targets, pipeline_measures, realism_rows, world_measures
from revbench.synth.world import generate_world

DEMO_SPEC = WorldSpec(n_papers=300, seed=7, start=DEMO_SINCE, end=DEMO_UNTIL)
"""The demo's world (``revbench demo``'s defaults)."""


@pytest.fixture(scope="module")
def demo_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo-world")
    generate_world(out, DEMO_SPEC)
    return out


@pytest.fixture(scope="module")
def measured(demo_world: Path) -> dict[str, object]:
    return world_measures(demo_world)


def _row(measured: dict[str, object], target_id: str) -> Row:
    [row] = [r for r in realism_rows(measured) if r.id == target_id]
    return row


def test_every_target_has_its_source_method_and_tolerance() -> None:
    targets = load_targets()
    ids = [t.id for t in targets]
    assert len(ids) == len(set(ids))
    assert {t.measured_on for t in targets} == {"truth", "demo"}
    for t in targets:
        assert t.source and t.method and t.what and t.tolerance, t.id
        assert t.check in ("tv", "abs", "range", "min", "rising"), t.id
    lr = [t for t in targets if t.check == "tv"]
    assert lr and all(abs(sum(t.target) - 1) <= 0.002 and len(t.target) == 5 for t in lr)  # rounded to 0.1%


def test_the_default_world_holds_what_its_truth_gives(measured: dict[str, object]) -> None:
    rows = [r for r in realism_rows(measured) if r.measured_on == "truth"]
    assert rows and all(r.world is not None for r in rows)
    assert [(r.id, r.world, r.tolerance) for r in rows if not r.holds] == []


def test_pool_like_pairs_rate_as_lr_bench_did(measured: dict[str, object]) -> None:
    row = _row(measured, "ratings.pool_levels")
    assert row.holds and row.tolerance.startswith("TV ")
    low = row.world[0] + row.world[1]
    assert 0.2 <= low <= 0.4, row.world  # LR-bench: 29.7% at levels 1-2 (the demo of format 7: 9%)


def test_people_cite_those_who_know_the_citing_papers_subject(measured: dict[str, object]) -> None:
    by_level = measured["graph.cites_by_level"]
    assert all(b >= a for a, b in zip(by_level, by_level[1:], strict=False)), by_level
    assert by_level[4] >= 3 * by_level[0]
    assert measured["graph.coupling_tau"] >= 0.1
    assert measured["works.with_topics"] == 1.0


def test_references_and_self_citation_as_in_real_reference_lists(measured: dict[str, object]) -> None:
    for target in ("graph.references_per_paper", "graph.self_citation_share", "graph.same_field_share"):
        assert _row(measured, target).holds, (target, measured[target])


def test_the_checks_can_fail(demo_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph drawn as before the calibration (citations blind to topic and expertise, from a
    uniform sample of earlier works, 10-30 references, a quarter of them to the authors' own)
    fails the targets the calibrated one holds."""
    for name, value in (("SAME_SUBTOPIC_WEIGHT", 1.0), ("SAME_CATEGORY_WEIGHT", 2.0), ("FOCUS_BOOST", 0.0),
                        ("EXPERT_BOOST", 0.0), ("OWN_SHARE", 0.24), ("COAUTHOR_SHARE", 0.2), ("REFERENCES", (10, 30)),
                        ("POOL", 300), ("POOL_TOPIC", 0), ("POOL_CATEGORY", 0)):
        monkeypatch.setattr(citations, name, value)
    generate_world(tmp_path / "w", DEMO_SPEC)
    flat = world_measures(tmp_path / "w")
    failed = {r.id for r in realism_rows(flat) if r.holds is False}
    assert {"graph.cites_by_level", "graph.coupling_tau", "graph.same_field_share"} <= failed, failed
    assert _row(flat, "ratings.pool_levels").holds  # the ratings are not the graph's


def test_titles_as_drawn_before_their_endings_repeat_as_no_real_ones_do(measured: dict[str, object], tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the ending each work's id picks (world format 8), the few drawn titles repeat across
    works: the target the default world holds fails."""
    from revbench.synth import answers, draw

    for module in (answers, citations, draw):
        monkeypatch.setattr(module, "distinct_title", lambda title, ident: title)
    generate_world(tmp_path / "w", DEMO_SPEC)
    drawn = world_measures(tmp_path / "w")
    assert not _row(drawn, "graph.title_shared_share").holds, drawn["graph.title_shared_share"]
    assert _row(measured, "graph.title_shared_share").holds, measured["graph.title_shared_share"]
    assert drawn["graph.title_shared_share"] > 10 * measured["graph.title_shared_share"]


def test_judging() -> None:
    [tv] = [t for t in load_targets() if t.id == "ratings.kept_levels"]
    assert judge(tv, tv.target)[0] and not judge(tv, [0.03, 0.06, 0.34, 0.33, 0.24])[0]  # the demo of format 7
    assert judge(tv, None) == (None, "")
    [loss] = [t for t in load_targets() if t.id == "loss.embedding"]
    assert judge(loss, 0.27)[0] and not judge(loss, 0.335)[0]
    [rising] = [t for t in load_targets() if t.check == "rising"]
    assert not judge(rising, [0.0325, 0.033, 0.034, 0.0335, 0.034])[0]  # flat, as before
    assert judge(rising, [0.02, 0.1, 0.3, 0.5, 0.7])[0]


def test_the_pipeline_values_are_read_from_a_demo_folder(tmp_path: Path) -> None:
    assert pipeline_measures(tmp_path) == {}  # no demo ran here: the rows say so, nothing fails
    (tmp_path / "reports" / "warehouse").mkdir(parents=True)
    rows = [{"split": "average", "metric": "loss", "scorer": s, "value": v}
            for s, v in (("tpms", 0.26), ("bm25:pooling=mean", 0.31), ("embedding:pooling=mean", 0.24))]
    rows.append({"split": "pointwise", "metric": "loss", "scorer": "tpms", "value": 0.9})
    (tmp_path / "reports" / "warehouse" / "results.json").write_text(json.dumps(rows))
    got = pipeline_measures(tmp_path)
    assert got == {"loss.embedding": 0.24, "loss.tpms": 0.26, "loss.bm25": 0.31}
    judged = {r.id: r.holds for r in realism_rows(got)}
    assert judged["loss.embedding"] and judged["loss.tpms"] and not judged["loss.bm25"]
    assert judged["ratings.kept_levels"] is None
    # The warehouse benchmark's frames (the application reads them): levels and profile sizes.
    ratings = pl.DataFrame({"reviewer_id": ["a", "a", "b", "b"], "paper_id": ["p", "q", "p", "r"],
                            "rating": [1.0, 3.0, 3.0, 5.0]})
    profiles = pl.DataFrame({"reviewer_id": ["a"] * 6 + ["b"] * 4, "paper_id": [f"x{i}" for i in range(10)]})
    got = pipeline_measures(tmp_path, {"ratings": ratings, "profiles": profiles})
    assert got["ratings.kept_levels"] == [0.25, 0.0, 0.5, 0.0, 0.25] and got["profiles.rated_papers"] == 5.0


def test_same_world_same_measures(demo_world: Path, measured: dict[str, object]) -> None:
    assert world_measures(demo_world) == measured


def test_the_citation_link_is_a_strength_the_default_world_does_not_see(tmp_path: Path) -> None:
    """``WorldSpec.citation_link`` (``revbench demo --citation-link``) scales how much whom a paper
    cites follows its subject and expertise; at 1 the world is the calibrated one, same key."""
    import dataclasses

    assert dataclasses.replace(DEMO_SPEC, citation_link=1.0).key() == DEMO_SPEC.key()
    assert dataclasses.replace(DEMO_SPEC, citation_link=0.0).key() != DEMO_SPEC.key()
    small = dataclasses.replace(DEMO_SPEC, n_papers=150)
    by_link = {}
    for link in (0.0, 2.0):
        out = tmp_path / f"link{link:g}"
        generate_world(out, dataclasses.replace(small, citation_link=link))
        by_link[link] = world_measures(out)
    blind, sharp = by_link[0.0], by_link[2.0]
    # blind to subject: references land in the citing paper's field about as often as chance (5 fields)
    assert blind["graph.same_field_share"] < 0.45 < 0.8 < sharp["graph.same_field_share"]
    assert blind["graph.coupling_tau"] < 0.1 < sharp["graph.coupling_tau"]
    lo, hi = blind["graph.cites_by_level"], sharp["graph.cites_by_level"]
    assert hi[4] / max(hi[0], 1e-9) > 3 * lo[4] / max(lo[0], 1e-9)
