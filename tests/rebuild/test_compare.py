"""The rebuild's comparison with its original, on small frames written by hand: why each rated pair
was or was not invited, recall by stratum and rating, tuples from ratings, labels kept or
reversed, scorers' rows and Kendall's tau."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from revbench.tasks import rebuild as rb
from revbench.tasks.rebuild import (
    MISS_REASONS,
    TUPLE_SCHEMA,
    compare_tuples,
    kendall_tau,
    pair_fates,
    recall_summary,
    scorer_rows,
    tuples_of_ratings,
)

HELD = {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "rating": pl.Float64, "person_id": pl.Utf8, "arxiv_id": pl.Utf8}
PAIR = {"query_id": pl.Utf8, "author_id": pl.Utf8}
EXCL = {**PAIR, "reason": pl.Utf8, "detail": pl.Utf8}

# reviewer, benchmark paper, rating, person, arXiv id, similarity; the reviewer's name says its fate.
PAIRS = [
    ("r_not_ingested", "b_none", 2.0, "p_ni", None, None),
    ("r_not_in_corpus", "b_gone", 3.0, "p_nc", "9999.00001", 0.9),
    ("r_not_linked", "b_q1", 4.0, "p_nl", "2609.00001", 0.7),
    ("r_not_sampled", "b_other", 5.0, "p_ns", "2609.00009", 0.65),
    ("r_invited", "b_q1", 5.0, "p_inv", "2609.00001", 0.82),
    ("r_invited_second_id", "b_q1", 3.0, "p_two", "2609.00001", 0.55),
    ("r_invited_despite_coi", "b_q2", 1.0, "p_both", "2609.00002", 0.5),
    ("r_coi", "b_q1", 2.0, "p_coi", "2609.00001", 0.61),
    ("r_screening", "b_q2", 3.0, "p_scr", "2609.00002", 0.45),
    ("r_cap", "b_q2", 4.0, "p_cap", "2609.00002", 0.41),
    ("r_below_tau", "b_q1", 1.0, "p_bt", "2609.00001", 0.25),
]
EXPECTED = {
    "r_not_ingested": "not_ingested", "r_not_in_corpus": "not_ingested", "r_not_linked": "not_linked",
    "r_not_sampled": "not_sampled", "r_invited": None, "r_invited_second_id": None, "r_invited_despite_coi": None,
    "r_coi": "coi", "r_screening": "screening", "r_cap": "cap", "r_below_tau": "below_tau",
}


def _fates() -> pl.DataFrame:
    held = pl.DataFrame([p[:5] for p in PAIRS], schema=HELD, orient="row")
    identities = pl.DataFrame(
        [("p_ni", "a_ni"), ("p_nc", "a_nc"), ("p_ns", "a_ns"), ("p_inv", "a_inv"), ("p_two", "a_two_x"),
         ("p_two", "a_two_y"), ("p_both", "a_both"), ("p_coi", "a_coi"), ("p_scr", "a_scr"), ("p_cap", "a_cap"),
         ("p_bt", "a_bt")], schema=["person_id", "author_id"], orient="row")
    corpus = {"2609.00001", "2609.00002", "2609.00009"}
    queries = {"2609.00001", "2609.00002"}
    evidence = pl.DataFrame([("2609.00001", "a_inv"), ("2609.00001", "a_two_y"), ("2609.00002", "a_cap"),
                             ("2609.00002", "a_both"), ("2609.00001", "a_coi")], schema=PAIR, orient="row")
    exclusions = pl.DataFrame([("2609.00001", "a_coi", "coauthor", "co-authored 2025"),
                               ("2609.00002", "a_scr", "screening", "1 recent papers < 2"),
                               ("2609.00002", "a_both", "same_affiliation", "MIT")], schema=EXCL, orient="row")
    assignments = pl.DataFrame([("2609.00001", "a_inv"), ("2609.00001", "a_two_y"), ("2609.00002", "a_both")],
                               schema=PAIR, orient="row")
    similarity = pl.DataFrame([(p[3], p[4], p[5]) for p in PAIRS if p[4] is not None and p[5] is not None],
                              schema=["person_id", "arxiv_id", "similarity"], orient="row")
    return pair_fates(held, identities, corpus, queries, evidence, exclusions, assignments, similarity)


def test_every_miss_reason_and_the_recalled_pairs() -> None:
    fates = _fates()
    assert fates.height == len(PAIRS)
    got = dict(fates.select("reviewer_id", "reason").iter_rows())
    assert got == EXPECTED
    assert set(EXPECTED.values()) - {None} == set(MISS_REASONS)  # the fixture reaches every reason
    recalled = dict(fates.select("reviewer_id", "recalled").iter_rows())
    assert recalled == {r: reason is None for r, reason in EXPECTED.items()}
    detail = dict(fates.select("reviewer_id", "detail").iter_rows())
    assert detail["r_coi"] == "coauthor: co-authored 2025"
    assert detail["r_screening"] == "screening: 1 recent papers < 2"
    assert all(detail[r] is None for r, reason in EXPECTED.items() if reason is None)
    sims = dict(fates.select("reviewer_id", "similarity").iter_rows())
    assert sims["r_invited"] == pytest.approx(0.82) and sims["r_not_ingested"] is None


def test_recall_summary() -> None:
    s = recall_summary(_fates(), tau=0.4)
    assert (s["pairs"], s["recalled"], s["tau"]) == (11, 3, 0.4)
    assert s["recall"] == pytest.approx(3 / 11)
    assert s["missed_by_reason"] == {"not_ingested": 2, "not_linked": 1, "not_sampled": 1, "below_tau": 1, "coi": 1,
                                     "screening": 1, "cap": 1}
    assert list(s["missed_by_reason"]) == list(MISS_REASONS)
    assert s["recalled"] + sum(s["missed_by_reason"].values()) == s["pairs"]
    strata = {r["stratum"]: r for r in s["by_stratum"]}
    # 0.25 | none at 0.3-0.4 | 0.41 0.45 | 0.5 (left-closed) 0.55 | 0.61 0.65 | 0.7 | 0.82 0.9 | no similarity
    assert {k: (r["pairs"], r["recalled"]) for k, r in strata.items()} == {
        "0.0-0.3": (1, 0), "0.4-0.5": (2, 0), "0.5-0.6": (2, 2), "0.6-0.7": (2, 0), "0.7-0.8": (1, 0),
        "0.8-1.0": (2, 1), "no paper": (1, 0)}
    assert [r["stratum"] for r in s["by_stratum"]] == ["0.0-0.3", "0.4-0.5", "0.5-0.6", "0.6-0.7", "0.7-0.8", "0.8-1.0",
                                                      "no paper"]
    assert {k: r["below_tau"] for k, r in strata.items()} == {
        "0.0-0.3": True, "0.4-0.5": False, "0.5-0.6": False, "0.6-0.7": False, "0.7-0.8": False, "0.8-1.0": False,
        "no paper": False}
    assert (strata["0.4-0.5"]["recall"], strata["0.5-0.6"]["recall"], strata["0.8-1.0"]["recall"]) == (0.0, 1.0, 0.5)
    by_rating = {r["rating"]: (r["pairs"], r["recalled"]) for r in s["by_rating"]}
    assert by_rating == {1.0: (2, 1), 2.0: (2, 0), 3.0: (3, 1), 4.0: (2, 0), 5.0: (2, 1)}
    assert [r["rating"] for r in s["by_rating"]] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert len(s["missed"]) == 8 and all(not m["recalled"] for m in s["missed"])
    assert [m["reason"] for m in s["missed"]] == sorted(m["reason"] for m in s["missed"])


def test_recall_summary_of_nothing() -> None:
    empty = _fates().head(0)
    s = recall_summary(empty, tau=0.6)
    assert (s["pairs"], s["recalled"], s["recall"]) == (0, 0, None)
    assert s["by_stratum"] == [] and s["by_rating"] == [] and s["missed"] == []
    assert set(s["missed_by_reason"].values()) == {0}


RATINGS = pl.DataFrame([("r1", "p1", 5.0), ("r1", "p2", 3.0), ("r1", "p3", 3.0), ("r2", "p1", 2.0), ("r2", "p2", 4.0)],
                       schema=["reviewer_id", "paper_id", "rating"], orient="row")


def test_tuples_of_ratings_reviewer_centric() -> None:
    t = tuples_of_ratings(RATINGS, "reviewer_centric")
    assert t.schema == pl.Schema(TUPLE_SCHEMA)
    assert t.rows() == [("reviewer_centric", "r1", "p1", "p2", 5.0, 3.0), ("reviewer_centric", "r1", "p1", "p3", 5.0, 3.0),
                        ("reviewer_centric", "r2", "p2", "p1", 4.0, 2.0)]  # r1's p2 and p3 tie: no tuple


def test_tuples_of_ratings_paper_centric() -> None:
    t = tuples_of_ratings(RATINGS, "paper_centric")
    assert t.schema == pl.Schema(TUPLE_SCHEMA)
    assert t.rows() == [("paper_centric", "p1", "r1", "r2", 5.0, 2.0), ("paper_centric", "p2", "r2", "r1", 4.0, 3.0)]


def _tuples(kind: str, rows: list[tuple[str, str, str, float, float]]) -> pl.DataFrame:
    return pl.DataFrame([(kind, *r) for r in rows], schema=TUPLE_SCHEMA, orient="row")


# The original's paper-centric tuples (anchor paper, better reviewer, worse reviewer) and what the rebuild rated.
ORIGINAL = [("p1", "a", "b", 5.0, 3.0), ("p1", "a", "c", 5.0, 2.0), ("p2", "a", "b", 4.0, 2.0),
            ("p3", "d", "e", 4.25, 4.0), ("p4", "f", "g", 5.0, 1.0)]
REBUILT_RATINGS = pl.DataFrame([("a", "p1", 5.0), ("b", "p1", 3.0), ("c", "p1", 2.0), ("a", "p2", 4.0), ("b", "p2", 2.0),
                                ("d", "p3", 4.0), ("e", "p3", 4.0), ("f", "p4", 5.0)],
                               schema=["reviewer_id", "paper_id", "rating"], orient="row")


def test_compare_tuples_labels_identical() -> None:
    original = _tuples("paper_centric", ORIGINAL)
    rebuilt = tuples_of_ratings(REBUILT_RATINGS, "paper_centric")
    c = compare_tuples(original, rebuilt, REBUILT_RATINGS, "paper_centric")
    # p4's g was not rated: not recalled; p3's two quarter steps are one survey level: tied.
    assert (c.original, c.recalled, c.rebuilt, c.matched, c.reversed, c.tied) == (5, 4, 4, 3, 0, 1)
    assert c.extra == 1  # (p1, b, c): both rated by the original, never paired there
    assert c.labels_identical and c.disagreements == []
    assert c.as_dict()["kind"] == "paper_centric" and c.as_dict()["labels_identical"] is True


def test_a_planted_label_change_is_found() -> None:
    original = _tuples("paper_centric", ORIGINAL)
    planted = (pl.col("reviewer_id") == "b") & (pl.col("paper_id") == "p2")  # b now rates p2 above a
    ratings = REBUILT_RATINGS.with_columns(pl.when(planted).then(5.0).otherwise(pl.col("rating")).alias("rating"))
    rebuilt = tuples_of_ratings(ratings, "paper_centric")
    c = compare_tuples(original, rebuilt, ratings, "paper_centric")
    assert (c.recalled, c.matched, c.reversed, c.tied) == (4, 2, 1, 1)
    assert c.labels_identical is False
    assert c.disagreements == [{"anchor": "p2", "positive": "a", "negative": "b", "original": [4.0, 2.0], "rebuilt": [4.0, 5.0]}]


def test_compare_tuples_reviewer_centric_and_other_kinds_ignored() -> None:
    ratings = pl.DataFrame([("r", "x", 5.0), ("r", "y", 2.0), ("r", "z", 2.0)], schema=["reviewer_id", "paper_id", "rating"],
                           orient="row")
    original = pl.concat([_tuples("reviewer_centric", [("r", "y", "x", 4.0, 1.0), ("r", "x", "z", 3.0, 2.0)]),
                          _tuples("paper_centric", ORIGINAL)])
    rebuilt = pl.concat([tuples_of_ratings(ratings, "reviewer_centric"), _tuples("paper_centric", [("p9", "u", "v", 5.0, 1.0)])])
    c = compare_tuples(original, rebuilt, ratings, "reviewer_centric")
    assert (c.original, c.recalled, c.rebuilt, c.matched, c.reversed, c.tied, c.extra) == (2, 2, 2, 1, 1, 0, 0)
    assert c.disagreements == [{"anchor": "r", "positive": "y", "negative": "x", "original": [4.0, 1.0], "rebuilt": [2.0, 5.0]}]
    assert not c.labels_identical


def _row(scorer: str, value: float | None, bench: str = "lrbench", split: str = "lr_paper_centric",
         metric: str = "loss", n: int = 16) -> dict[str, Any]:
    return {"benchmark": bench, "split": split, "scorer": scorer, "metric": metric, "value": value,
            "ci_low": None if value is None else value - 0.1, "ci_high": None if value is None else value + 0.1, "n": n}


def test_scorer_rows_pick_the_loss_of_each_scorer() -> None:
    rows = [
        _row("tpms", 0.4), _row("trivial", 0.5), _row("only_original", 0.3),
        _row("tpms", 0.9, metric="accuracy"), _row("tpms - trivial", -0.1),
        _row("tpms", 0.45, "release", "paper_centric", n=13), _row("trivial", 0.5, "release", "paper_centric", n=13),
        _row("tpms - trivial", -0.05, "release", "paper_centric"), _row("tpms", 0.2, "release", "reviewer_centric"),
        _row("tpms", 0.1, "goldstandard", "lr_paper_centric"),
    ]
    out = scorer_rows(rows, ("lrbench", "lr_paper_centric"), ("release", "paper_centric"))
    assert [s["name"] for s in out] == ["only_original", "tpms", "trivial"]
    by = {s["name"]: s for s in out}
    assert by["tpms"] == {"name": "tpms", "original_loss": 0.4, "original_ci": [pytest.approx(0.3), pytest.approx(0.5)],
                          "original_n": 16, "rebuilt_loss": 0.45, "rebuilt_ci": [pytest.approx(0.35), pytest.approx(0.55)],
                          "rebuilt_n": 13}
    assert by["only_original"]["rebuilt_loss"] is None and by["only_original"]["rebuilt_ci"] == [None, None]
    assert by["only_original"]["rebuilt_n"] is None


def test_the_comparison_leaves_out_paired_differences_by_their_baseline_not_their_name() -> None:
    from revbench.evaluation.model import MetricValue
    from revbench.rebuild.compare import own_losses

    dashed = "rate:model=/models/RATE - v2"  # a scorer's own label, " - " and all
    rows = [{**_row(dashed, 0.3), "baseline": None}, {**_row("tpms", 0.4), "baseline": None},
            {**_row(f"{dashed} - tpms", -0.1), "baseline": "tpms"},
            {**_row(dashed, 0.35, "release", "paper_centric"), "baseline": None},
            {**_row("tpms", 0.45, "release", "paper_centric"), "baseline": None},
            {**_row(f"{dashed} - tpms", -0.1, "release", "paper_centric"), "baseline": "tpms"}]
    out = scorer_rows(rows, ("lrbench", "lr_paper_centric"), ("release", "paper_centric"))
    assert [(s["name"], s["original_loss"], s["rebuilt_loss"]) for s in out] == [(dashed, 0.3, 0.35), ("tpms", 0.4, 0.45)]
    assert kendall_tau(out) == 1.0
    values = [MetricValue("release", "paper_centric", dashed, "loss", 0.35, None, None, 13),
              MetricValue("release", "paper_centric", "tpms", "loss", 0.45, None, None, 13),
              MetricValue("release", "paper_centric", f"{dashed} - tpms", "loss", -0.1, None, None, 13, baseline="tpms"),
              MetricValue("release", "reviewer_centric", "tpms", "loss", 0.2, None, None, 9)]
    got = own_losses(values, "paper_centric")
    assert list(got) == [dashed, "tpms"] and got[dashed]["value"] == 0.35


def _scorers(pairs: list[tuple[float | None, float | None]]) -> list[dict[str, Any]]:
    return [{"name": f"s{i}", "original_loss": o, "rebuilt_loss": r} for i, (o, r) in enumerate(pairs)]


@pytest.mark.parametrize(("pairs", "expected"), [
    ([(0.1, 0.2), (0.3, 0.4), (0.5, 0.6)], 1.0),
    ([(0.1, 0.6), (0.3, 0.4), (0.5, 0.2)], -1.0),
    ([(0.1, 0.2), (0.3, 0.4), (0.5, None), (None, 0.1)], 1.0),  # a scorer missing on one side is left out
    ([(0.1, 0.2)], None),
    ([(0.1, 0.2), (None, 0.4)], None),
    ([], None),
    ([(0.5, 0.1), (0.5, 0.2), (0.5, 0.3)], None),  # one side all ties
])
def test_kendall_tau(pairs: list[tuple[float | None, float | None]], expected: float | None) -> None:
    tau = kendall_tau(_scorers(pairs))
    assert tau == (None if expected is None else pytest.approx(expected))


def test_kendall_tau_of_a_partial_agreement() -> None:
    # Three scorers, one pair of them swapped: (concordant - discordant) / 3 = 1/3.
    assert kendall_tau(_scorers([(0.1, 0.1), (0.2, 0.3), (0.3, 0.2)])) == pytest.approx(1 / 3)


def test_a_recalled_tuple_the_rebuild_rated_differently_but_never_paired_is_unpaired_not_tied() -> None:
    original = pl.DataFrame([{"kind": "reviewer_centric", "anchor": "X", "positive": "q1", "negative": "q2",
                              "rating_pos": 5.0, "rating_neg": 2.0}], schema=TUPLE_SCHEMA)
    ratings = pl.DataFrame({"reviewer_id": ["X", "X"], "paper_id": ["q1", "q2"], "rating": [5.0, 2.0]})
    c = compare_tuples(original, pl.DataFrame(schema=TUPLE_SCHEMA), ratings, "reviewer_centric")
    assert (c.recalled, c.matched, c.tied, c.unpaired, c.labels_identical) == (1, 0, 0, 1, True)
    nothing = compare_tuples(original, pl.DataFrame(schema=TUPLE_SCHEMA), ratings.head(0), "reviewer_centric")
    assert nothing.recalled == 0 and nothing.labels_identical is None  # nothing compared is not "identical"


def _sims(rows: list[tuple[str, str, float | None]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"person_id": pl.Utf8, "arxiv_id": pl.Utf8, "similarity": pl.Float64}, orient="row")


def test_fit_pools_keeps_the_rated_pairs_above_tau_and_reaches_their_depth() -> None:
    # Three reviewers against two queries; the rated pairs are (b, q1) at rank 2 and (c, q2) at rank 3.
    sims = _sims([("a", "q1", 0.9), ("b", "q1", 0.7), ("c", "q1", 0.2),
                  ("a", "q2", 0.8), ("b", "q2", 0.6), ("c", "q2", 0.45), ("d", "q2", None)])
    held = pl.DataFrame({"person_id": ["b", "c"], "arxiv_id": ["q1", "q2"]})
    fit = rb.fit_pools(sims, held, {"b": 5, "c": 2}, product_min_recent=3, coverage=1.0)
    assert (fit.tau, fit.candidates_per_query, fit.min_recent_papers, fit.pairs, fit.below_tau) == (0.45, 3, 2, 2, 0)
    # At tau 0.45 q1 has a, b and q2 has a, b, c within the first 3: a and b carry two queries each.
    assert fit.max_queries_per_candidate == 2 and (fit.covered, fit.invitations) == (2, 5)
    assert fit.settings() == {"tau": 0.45, "candidates_per_query": 3, "max_queries_per_candidate": 2, "min_recent_papers": 2}


def test_fit_pools_leaves_the_lowest_pairs_below_tau_at_a_lower_coverage() -> None:
    sims = _sims([(f"r{i}", "q", i / 20) for i in range(1, 21)])
    held = pl.DataFrame({"person_id": [f"r{i}" for i in range(1, 21)], "arxiv_id": ["q"] * 20})
    fit = rb.fit_pools(sims, held, {}, product_min_recent=3, coverage=0.9)
    # Any of the three lowest thresholds reaches 18 of 20 pairs with 18 candidates: the tightest is kept.
    assert fit.tau == 0.15 and fit.below_tau == 2 and fit.candidates_per_query == 18
    assert (fit.covered, fit.invitations) == (18, 18)
    assert fit.min_recent_papers == 0  # a rated reviewer with no recent paper: screening must not drop them


def test_fit_pools_takes_the_cheapest_pools_that_reach_the_coverage() -> None:
    # b is similar to q1 but fourth of its candidates; c is first on q2 but barely similar. Both
    # need tau 0.1 and depth 4 (5 pairs); half of them is cheapest as c alone: tau 0.1, depth 1
    # (2 pairs), not b alone at tau 0.6 (depth 4, 4 pairs).
    sims = _sims([("a", "q1", 0.9), ("x", "q1", 0.8), ("y", "q1", 0.7), ("b", "q1", 0.6),
                  ("c", "q2", 0.1), ("a", "q2", 0.05)])
    held = pl.DataFrame({"person_id": ["b", "c"], "arxiv_id": ["q1", "q2"]})
    full = rb.fit_pools(sims, held, {}, 3, coverage=1.0)
    assert (full.tau, full.candidates_per_query, full.invitations, full.covered) == (0.1, 4, 5, 2)
    half = rb.fit_pools(sims, held, {}, 3, coverage=0.5)
    assert (half.tau, half.candidates_per_query, half.invitations, half.covered) == (0.1, 1, 2, 1)


def test_fit_pools_refuses_when_nothing_has_a_similarity() -> None:
    with pytest.raises(ValueError, match="no rated pair has a similarity"):
        rb.fit_pools(_sims([("a", "q", None)]), pl.DataFrame({"person_id": ["a"], "arxiv_id": ["q"]}), {}, 3)
