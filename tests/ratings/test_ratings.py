"""Hand-built cases that pin de-duplication, every flag rule, decisions and the tuple construction."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from revbench.settings import RatingsSettings
from revbench.tasks import ratings as r
from revbench.tasks.rating_stats import agreement, statistics

T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)


def events(rows: list[tuple]) -> pl.DataFrame:
    """(event_id, invitation, paper, rating or None for a skip, source, seconds after T0)."""
    return pl.DataFrame(
        [{"event_id": e, "invitation_id": i, "paper_id": p, "rating": v, "skipped": v is None, "source": s,
          "created_at": T0 + timedelta(seconds=t)} for e, i, p, v, s, t in rows],
        schema={"event_id": pl.Int64, "invitation_id": pl.Utf8, "paper_id": pl.Utf8, "rating": pl.Int64,
                "skipped": pl.Boolean, "source": pl.Utf8, "created_at": pl.Datetime("us", "UTC")})


INVITATIONS = pl.DataFrame({
    "invitation_id": ["inv_a", "inv_b", "inv_c"], "reviewer_id": ["alice", "bob", "carol"], "round": [1, 1, 2],
    "paper_ids": [["p1", "p2", "p3"], ["p1", "p2"], ["p1", "p3"]],
})
CATEGORIES = pl.DataFrame({"paper_id": ["p1", "p2", "p3"], "category": ["cs.CL", "cs.LG", "cs.CL"]})


def ratings_of(rows: list[tuple[str, str, int]], invitation: dict[str, str] | None = None) -> pl.DataFrame:
    """Kept ratings (reviewer, paper, rating), one invitation per reviewer."""
    return pl.DataFrame([{"reviewer_id": a, "paper_id": p, "rating": v, "invitation_id": (invitation or {}).get(a, f"inv_{a}"),
                          "round": 1, "category": "cs.CL", "event_id": k + 1, "rated_at": T0, "n_events": 1,
                          "status": "kept", "flags": []} for k, (a, p, v) in enumerate(rows)],
                        schema=r.RATINGS.polars_schema)


def test_latest_answer_wins_history_kept_and_skips_are_not_ratings() -> None:
    ev = events([
        (1, "inv_a", "p1", 2, "click", 0), (2, "inv_a", "p1", 4, "click", 5),  # changed: 4 wins, 2 superseded
        (3, "inv_a", "p2", 3, "click", 9), (4, "inv_a", "p2", None, "form", 30),  # rated then skipped: no rating
        (5, "inv_b", "p1", 5, "click", 1), (6, "inv_b", "p1", 5, "click", 2),  # the same value twice: one rating
        (7, "inv_zzz", "p1", 3, "click", 3),  # an invitation the warehouse never made
        (8, "inv_b", "p3", 1, "form", 4),  # a paper inv_b did not ask about
        (9, "inv_c", "p3", 1, "form", 4),
        (10, "inv_c", "p1", 7, "click", 5),  # a rating off the scale (a store edited by hand)
    ])
    resolved = r.resolve_events(ev, INVITATIONS)
    assert dict(resolved.select("event_id", "disposition").iter_rows()) == {
        1: "superseded", 2: "latest", 3: "superseded", 4: "skip", 5: "superseded", 6: "latest",
        7: "unknown_invitation", 8: "unknown_paper", 9: "latest", 10: "invalid_rating"}
    out = r.latest_ratings(resolved, INVITATIONS, CATEGORIES)
    assert out.select("reviewer_id", "paper_id", "rating", "n_events", "round", "category").rows() == [
        ("alice", "p1", 4, 2, 1, "cs.CL"), ("bob", "p1", 5, 2, 1, "cs.CL"), ("carol", "p3", 1, 1, 2, "cs.CL")]
    assert out["event_id"].to_list() == [2, 6, 9]


def test_a_later_event_resolves_again_to_the_same_answer_whatever_the_pull_order() -> None:
    ev = events([(1, "inv_a", "p1", 2, "click", 0), (2, "inv_a", "p1", 4, "click", 5), (3, "inv_a", "p2", 1, "click", 6)])
    once = r.latest_ratings(r.resolve_events(ev, INVITATIONS), INVITATIONS, CATEGORIES)
    shuffled = ev.sample(fraction=1.0, shuffle=True, seed=3)
    again = r.latest_ratings(r.resolve_events(shuffled, INVITATIONS), INVITATIONS, CATEGORIES)
    assert once.equals(again)


CFG = RatingsSettings(variance_min_ratings=3, variance_max=0.25, straight_line_min_papers=3, content_min_items=4,
                      content_max_rho=-0.3, content_min_spread=0.2, burst_window_seconds=10, burst_min_papers=3,
                      min_seconds_per_paper=2)


def test_near_zero_variance_needs_enough_ratings_and_low_variance() -> None:
    rt = ratings_of([("ann", "p1", 3), ("ann", "p2", 3), ("ann", "p3", 4),  # variance 2/9 = 0.222 <= 0.25
                     ("ben", "p1", 5), ("ben", "p2", 5),  # only two ratings: the rule does not apply
                     ("cat", "p1", 1), ("cat", "p2", 3), ("cat", "p3", 5)])
    flags = r.near_zero_variance(rt, CFG)
    assert [f["flag_id"] for f in flags] == ["near_zero_variance:ann"]
    ev = json.loads(flags[0]["evidence"])
    assert ev["n"] == 3 and ev["variance"] == pytest.approx(2 / 9, abs=1e-6)
    assert flags[0]["paper_ids"] == ["p1", "p2", "p3"]
    assert r.near_zero_variance(rt, CFG.model_copy(update={"variance_max": 0.2})) == []


def test_straight_lining_is_one_value_for_every_paper_of_an_invitation() -> None:
    rt = ratings_of([("ann", "p1", 2), ("ann", "p2", 2), ("ann", "p3", 2), ("ben", "p1", 4), ("ben", "p2", 4),
                     ("cat", "p1", 4), ("cat", "p2", 4), ("cat", "p3", 5)])
    flags = r.straight_lining(rt, CFG)
    assert [(f["flag_id"], json.loads(f["evidence"])) for f in flags] == [("straight_lining:inv_ann", {"n": 3, "value": 2})]


def test_content_insensitivity_by_rank_correlation_and_by_extremes() -> None:
    sim = pl.DataFrame({"reviewer_id": ["ann"] * 4 + ["ben"] * 4 + ["cat"] * 4 + ["dan"] * 3,
                        "paper_id": ["p1", "p2", "p3", "p4"] * 3 + ["p1", "p2", "p3"],
                        "similarity": [0.9, 0.8, 0.7, 0.6, 0.9, 0.8, 0.7, 0.6, 0.9, 0.8, 0.7, 0.6, 0.9, 0.5, 0.1]})
    rt = ratings_of([("ann", "p1", 1), ("ann", "p2", 2), ("ann", "p3", 3), ("ann", "p4", 4),  # rho = -1: against the evidence
                     ("ben", "p1", 5), ("ben", "p2", 4), ("ben", "p3", 3), ("ben", "p4", 2),  # rho = +1: follows it
                     ("cat", "p1", 5), ("cat", "p2", 5), ("cat", "p3", 5), ("cat", "p4", 5),  # all 5, spread 0.3
                     ("dan", "p1", 1), ("dan", "p2", 2), ("dan", "p3", 3)])  # too few items
    flags = {f["flag_id"]: json.loads(f["evidence"]) for f in r.content_insensitive(rt, sim, CFG)}
    assert set(flags) == {"content_insensitive:ann", "content_insensitive:cat"}
    assert flags["content_insensitive:ann"]["rho"] == pytest.approx(-1.0)
    assert flags["content_insensitive:cat"]["all_extreme"] is True and flags["content_insensitive:cat"]["rho"] is None


def test_bursts_count_first_clicks_not_form_submits() -> None:
    inv = pl.DataFrame({"invitation_id": ["inv_f", "inv_s", "inv_m", "inv_w"], "reviewer_id": ["fast", "slow", "form", "win"],
                        "round": [1, 1, 1, 1], "paper_ids": [["p1", "p2", "p3"]] * 4})
    ev = events([
        (1, "inv_f", "p1", 3, "click", 0), (2, "inv_f", "p2", 4, "click", 1), (3, "inv_f", "p3", 2, "click", 2.5),
        (4, "inv_f", "p1", 5, "click", 40),  # a later change does not move the first click
        (5, "inv_s", "p1", 3, "click", 0), (6, "inv_s", "p2", 4, "click", 12), (7, "inv_s", "p3", 2, "click", 30),
        (8, "inv_m", "p1", 3, "form", 0), (9, "inv_m", "p2", 4, "form", 0), (10, "inv_m", "p3", 2, "form", 0),
        (11, "inv_w", "p1", 3, "click", 0), (12, "inv_w", "p2", 4, "click", 4), (13, "inv_w", "p3", 2, "click", 9),
    ])
    resolved = r.resolve_events(ev, inv)
    rt = r.latest_ratings(resolved, inv, CATEGORIES)
    flags = {f["flag_id"]: json.loads(f["evidence"]) for f in r.bursts(rt, resolved, CFG)}
    assert set(flags) == {"burst:inv_f", "burst:inv_w"}
    assert flags["burst:inv_f"] == {"papers": 3, "span_seconds": 2.5, "seconds_per_paper": 1.25, "max_in_window": 3}
    assert flags["burst:inv_w"]["seconds_per_paper"] == 4.5 and flags["burst:inv_w"]["max_in_window"] == 3


def test_decisions_apply_by_evidence_and_drop_wins() -> None:
    rt = ratings_of([("ann", "p1", 2), ("ann", "p2", 2), ("ann", "p3", 2), ("ben", "p1", 4)])
    flags = r.find_flags(rt, r.resolve_events(events([]), INVITATIONS), pl.DataFrame(schema={"reviewer_id": pl.Utf8, "paper_id": pl.Utf8,
                                                               "similarity": pl.Float64}), CFG)
    assert set(flags["flag_id"]) == {"near_zero_variance:ann", "straight_lining:inv_ann"}
    none = pl.DataFrame(schema={"flag_id": pl.Utf8, "evidence_hash": pl.Utf8, "decision": pl.Utf8})
    pending = r.apply_decisions(rt, flags, none)
    assert dict(pending.select("reviewer_id", "status").unique().iter_rows()) == {"ann": "pending", "ben": "kept"}
    assert r.undecided(flags, none).height == 2
    keep_one = pl.DataFrame({"flag_id": ["near_zero_variance:ann"], "evidence_hash": [flags["evidence_hash"][0]],
                             "decision": ["keep"]})
    assert r.apply_decisions(rt, flags, keep_one).filter(pl.col("reviewer_id") == "ann")["status"].unique().to_list() == ["pending"]
    both = pl.concat([keep_one, pl.DataFrame({"flag_id": ["straight_lining:inv_ann"], "evidence_hash": [flags["evidence_hash"][1]],
                                              "decision": ["drop"]})])
    out = r.apply_decisions(rt, flags, both)
    assert out.filter(pl.col("reviewer_id") == "ann")["status"].unique().to_list() == ["dropped"]
    assert out.filter(pl.col("reviewer_id") == "ann")["flags"][0].to_list() == ["near_zero_variance:ann", "straight_lining:inv_ann"]
    # A decision on older evidence does not count: the flag is asked again.
    stale = both.with_columns(pl.lit("0" * 16).alias("evidence_hash"))
    assert r.undecided(flags, stale).height == 2


def test_tuples_exact_sets_ties_dropped_and_only_kept_ratings() -> None:
    rt = ratings_of([("r1", "p1", 5), ("r2", "p1", 3), ("r3", "p1", 3), ("r1", "p2", 2), ("r2", "p2", 2),
                     ("r4", "p1", 1)])
    rt = rt.with_columns(pl.when(pl.col("reviewer_id") == "r4").then(pl.lit("dropped")).otherwise(pl.col("status")).alias("status"))
    out = r.tuples(rt)
    assert out.rows() == [
        ("paper_centric", "p1", "r1", "r2", 5, 3, 2),
        ("paper_centric", "p1", "r1", "r3", 5, 3, 2),
        ("reviewer_centric", "r1", "p1", "p2", 5, 2, 3),
        ("reviewer_centric", "r2", "p1", "p2", 3, 2, 1),
    ]
    assert r.tuples(rt.sample(fraction=1.0, shuffle=True, seed=1)).equals(out)


def test_statistics_counts_and_agreement() -> None:
    rt = ratings_of([("r1", "p1", 5), ("r2", "p1", 5), ("r1", "p2", 1), ("r2", "p2", 1), ("r3", "p3", 3)])
    st = statistics(rt)
    assert (st.ratings, st.annotators, st.papers) == (5, 3, 3)
    assert st.alpha == pytest.approx(1.0) and st.alpha_papers == 2
    assert st.annotators_per_paper.rows() == [(1, 1), (2, 2)]
    assert st.papers_per_annotator.rows() == [(1, 1), (2, 2)]
    disagree = statistics(ratings_of([("r1", "p1", 5), ("r2", "p1", 1), ("r1", "p2", 1), ("r2", "p2", 5)]))
    assert disagree.alpha is not None and disagree.alpha < 0
    assert statistics(ratings_of([("r1", "p1", 5)])).alpha is None
    assert "By category" in st.markdown()


def test_agreement_from_counts_equals_the_dense_reliability_matrix() -> None:
    import krippendorff
    import numpy as np

    rng = np.random.default_rng(5)
    rows = [(f"r{i}", f"p{j}", int(rng.integers(1, 6))) for i in range(30) for j in range(12) if rng.random() < 0.3]
    rt = ratings_of(rows)
    alpha, n = agreement(rt)
    multi = rt.filter(pl.len().over("paper_id") >= 2)
    dense = multi.pivot(on="paper_id", index="reviewer_id", values="rating").drop("reviewer_id").to_numpy().astype(float)
    assert n == dense.shape[1]
    assert alpha == pytest.approx(krippendorff.alpha(reliability_data=dense, value_domain=[1, 2, 3, 4, 5],
                                                     level_of_measurement="ordinal"), abs=1e-12)
