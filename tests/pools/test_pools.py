from __future__ import annotations

import numpy as np
import polars as pl

from revbench.tasks.pools import affinity_csv, assign, candidate_evidence, conflicts, range_neighbors, sample_queries, screening


def papers(n_per: int = 6) -> pl.DataFrame:
    rows = [{"arxiv_id": f"26{c}1.{i:05d}", "primary_category": cat} for c, cat in enumerate(["cs.AI", "cs.CL", "cs.IR"]) for i in range(n_per)]
    return pl.DataFrame(rows)


def test_sampling_is_stratified_seeded_and_skips_earlier_queries() -> None:
    p = papers()
    a = sample_queries(p, ["cs.AI", "cs.CL", "cs.IR"], 2, seed=1, exclude=set())
    assert a.group_by("category").len().sort("category")["len"].to_list() == [2, 2, 2]
    assert a.equals(sample_queries(p, ["cs.AI", "cs.CL", "cs.IR"], 2, seed=1, exclude=set()))
    assert not a.equals(sample_queries(p, ["cs.AI", "cs.CL", "cs.IR"], 2, seed=2, exclude=set()))
    b = sample_queries(p, ["cs.AI", "cs.CL", "cs.IR"], 2, seed=1, exclude=set(a["arxiv_id"]))
    assert not set(a["arxiv_id"]) & set(b["arxiv_id"])
    assert sample_queries(p, ["cs.AI"], 100, seed=1, exclude=set()).height == 6


def test_range_search_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ids = [f"p{i}" for i in range(200)]
    got = range_neighbors(x, ids, ["p0", "p5"], tau=0.3)
    sims = x[[0, 5]] @ x.T
    want = {(q, ids[j]) for k, q in enumerate(["p0", "p5"]) for j in np.flatnonzero(sims[k] >= 0.3) if ids[j] != q}
    assert set(got.select("query_id", "neighbor_id").iter_rows()) == want
    capped = range_neighbors(x, ids, ["p0"], tau=0.0, max_neighbors=3)
    assert capped.height == 3 and capped["similarity"].to_list() == sorted(capped["similarity"].to_list(), reverse=True)


def test_conflicts_and_screening() -> None:
    ev = pl.DataFrame({"query_id": ["q"] * 4, "author_id": ["a", "b", "c", "d"], "neighbor_id": ["n"] * 4, "similarity": [0.9] * 4})
    qa = pl.DataFrame({"arxiv_id": ["q"], "author_id": ["a"]})
    edges = pl.DataFrame({"author_a": ["a"], "author_b": ["b"]})
    names = {"a": "Ana Lima", "b": "Bo Sun", "c": "A. Lima", "d": "Dan Wu"}
    x = conflicts(ev, qa, edges, names=names)
    reasons = dict(zip(x["author_id"], x["reason"], strict=True))
    # a wrote it, b co-wrote with a, c may be a (a split identity); d is free.
    assert reasons == {"a": "query_author", "b": "coauthor", "c": "query_author"}
    assert conflicts(ev, qa, edges)["author_id"].to_list() == ["a", "b"]
    s = screening(ev, {"a": 5, "b": 1, "c": 3, "d": 4}, {"a": "a@x", "c": None, "d": "d@x"}, 3)
    assert dict(zip(s["author_id"], s["reason"], strict=True)) == {"b": "screening", "c": "unreachable"}


def test_assignment_caps_spreads_and_is_deterministic() -> None:
    rows = [{"query_id": f"q{q}", "author_id": f"r{r}", "neighbor_id": "n", "similarity": 1.0 - 0.01 * r}
            for q in range(10) for r in range(4)]
    ev = pl.DataFrame(rows)
    a = assign(ev, max_per_candidate=3, per_query=2, seed=0)
    load = a.group_by("author_id").len()["len"].to_list()
    # 4 candidates x 3 slots = 12 invitations for 20 wanted; none over the cap.
    assert max(load) == 3 and a.height == 12 and set(a.group_by("query_id").len()["len"].to_list()) <= {1, 2}
    assert a.equals(assign(ev, max_per_candidate=3, per_query=2, seed=0))
    # Round robin: every query gets a first candidate before any query gets a second.
    assert a.filter(pl.col("rank") == 1).height == 10
    # The strongest candidate (r0) is used to its cap.
    assert a.filter(pl.col("author_id") == "r0").height == 3
    assert affinity_csv(a).splitlines()[0].count(",") == 2 and ",~r" in affinity_csv(a)


def test_candidates_carry_evidence() -> None:
    nb = pl.DataFrame({"query_id": ["q", "q"], "neighbor_id": ["p1", "p2"], "similarity": [0.8, 0.7]})
    links = pl.DataFrame({"arxiv_id": ["p1", "p1", "p2"], "author_id": ["a", "b", "a"]})
    ev = candidate_evidence(nb, links)
    assert ev.rows() == [("q", "a", "p1", 0.8), ("q", "a", "p2", 0.7), ("q", "b", "p1", 0.8)]


def test_range_search_in_batches_equals_brute_force(monkeypatch) -> None:
    import revbench.tasks.pools as pools_mod

    rng = np.random.default_rng(5)
    x = rng.standard_normal((60, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ids = [f"p{i}" for i in range(60)]
    queries = ids[::3]
    monkeypatch.setattr(pools_mod, "QUERY_BATCH", 4)  # 20 queries: five searches
    got = range_neighbors(x, ids, queries, tau=0.2, max_neighbors=5)
    sim = x @ x.T
    want = set()
    for q in queries:
        qi = ids.index(q)
        cands = sorted(((float(sim[qi, j]), ids[j]) for j in range(60) if j != qi and sim[qi, j] >= 0.2), reverse=True)[:5]
        want |= {(q, n) for _, n in cands}
    assert set(zip(got["query_id"], got["neighbor_id"], strict=True)) == want
    assert got.height == len(want)


def test_query_batches_are_the_fewest_and_as_equal_as_they_can_be() -> None:
    from revbench.tasks.pools import query_batches

    assert [len(b) for b in query_batches(4000, 512)] == [500] * 8
    assert [len(b) for b in query_batches(1100, 512)] == [367, 367, 366]
    assert [len(b) for b in query_batches(512, 512)] == [512]
    assert [len(b) for b in query_batches(7, 512)] == [7]
    assert query_batches(0, 512) == []
    covered = [i for b in query_batches(1537, 512) for i in b]
    assert covered == list(range(1537))


def test_query_categories_shape_the_round_only_when_given() -> None:
    import pytest
    from pydantic import ValidationError

    from revbench.settings import PoolsSettings
    from revbench.tasks.pools import parameters_hash, round_parameters

    default = round_parameters(PoolsSettings(), ["cs.AI", "cs.LG"])
    assert "query_categories" not in default  # rounds built before the setting keep their hash
    narrowed = round_parameters(PoolsSettings(query_categories=["cs.LG"]), ["cs.AI", "cs.LG"])
    assert narrowed["query_categories"] == ["cs.LG"] and parameters_hash(narrowed) != parameters_hash(default)
    with pytest.raises(ValidationError, match="cs.NOPE"):
        PoolsSettings(query_categories=["cs.NOPE"])


def test_a_pair_excluded_by_a_rule_and_by_a_namesake_keeps_the_rule_s_detail() -> None:
    # a wrote the query and is its own namesake; b co-wrote with a and with a's namesake c.
    ev = pl.DataFrame({"query_id": ["q"] * 3, "author_id": ["a", "b", "c"], "neighbor_id": ["n"] * 3, "similarity": [0.9] * 3})
    qa = pl.DataFrame({"arxiv_id": ["q"], "author_id": ["a"]})
    edges = pl.DataFrame({"author_a": ["a", "b"], "author_b": ["b", "c"]})
    names = {"a": "Ana Lima", "b": "Bo Sun", "c": "A. Lima"}
    for _ in range(20):  # an unstable sort picked either detail from one call to the next
        x = conflicts(ev, qa, edges, names=names)
        assert x.rows() == [("q", "a", "query_author", "wrote the query paper"),
                            ("q", "b", "coauthor", "co-authored with query author a"),
                            ("q", "c", "query_author", "name matches a query author")]


def test_screening_details() -> None:
    ev = pl.DataFrame({"query_id": ["q2", "q1", "q1", "q1"], "author_id": ["a", "b", "a", "e"], "neighbor_id": ["n"] * 4,
                       "similarity": [0.9] * 4})
    s = screening(ev, {"a": 3, "b": 3}, {"a": "", "b": "b@x", "e": "e@x"}, 3)
    assert s.rows() == [("q1", "a", "unreachable", "no usable email"), ("q1", "e", "screening", "0 recent papers < 3"),
                        ("q2", "a", "unreachable", "no usable email")]
    assert screening(ev.head(0), {}, {}, 3).schema == s.schema


def test_assignment_breaks_ties_by_the_seeded_hash() -> None:
    from revbench.tasks.pools import _rank

    ev = pl.DataFrame([{"query_id": "q", "author_id": f"r{r}", "neighbor_id": "n", "similarity": 0.5 if r < 5 else 0.9}
                       for r in range(8)])
    for seed in (0, 3):
        got = assign(ev, max_per_candidate=1, per_query=8, seed=seed)["author_id"].to_list()
        tied = sorted([f"r{r}" for r in range(5)], key=lambda a, seed=seed: _rank(seed, "q", a))
        assert got == sorted(["r5", "r6", "r7"], key=lambda a, seed=seed: _rank(seed, "q", a)) + tied


def test_pool_size_report_counts_candidates_at_each_threshold() -> None:
    from revbench.tasks.pools import pool_size_report

    nb = pl.DataFrame({"query_id": ["q1", "q1", "q1", "q2"], "neighbor_id": ["p1", "p2", "p3", "p1"],
                       "similarity": [0.9, 0.55, 0.45, 0.65]})
    links = pl.DataFrame({"arxiv_id": ["p1", "p2", "p2", "p3", "p3"], "author_id": ["a", "a", "b", "c", "c"]})
    rows = {r["tau"]: r for r in pool_size_report(nb, links, ["q1", "q2", "q3"], [0.4, 0.5, 0.6, 0.7])}
    # q1: a (0.9), b (0.55), c (0.45); q2: a (0.65); q3: none.
    assert [rows[t]["mean"] for t in (0.4, 0.5, 0.6, 0.7)] == [4 / 3, 1.0, 2 / 3, 1 / 3]
    assert rows[0.5]["median"] == 1.0 and rows[0.7]["queries_without_candidates"] == 2
