"""The graph scorers beyond UniPR's forward citation, on hand-made graphs: ``citation`` each way
and both, over the reviewer's whole history (not only the capped profile), bibliographic
``coupling`` and ``cocitation`` against their formulas worked by hand, and the one-line refusal
of a scorer whose own inputs the benchmark lacks (never a score of zero)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from revbench.errors import InputError
from revbench.evaluation.model import (
    GRAPH_CITATIONS_SCHEMA, GRAPH_HISTORY_SCHEMA, GRAPH_REFERENCES_SCHEMA, GRAPH_TOPICS_SCHEMA, Benchmark, frame,
)
from revbench.evaluation.scorers import Context, make_scorer
from revbench.settings import Settings
from tests.support.evaluation import graph_bench

# graph_bench: submissions s1, s2 (2024); ir's papers a (2014), b (2024), d (2024), e (no year);
# gnn's c (2014). Its edges run forward (s1 -> a infl., s1 -> b, s2 -> b, s2 -> c, s2 -> e infl.)
# and a -> c between two reviewer papers. Added here, backward: b -> s1 (so s1 and b cite each
# other), d -> s1, c -> s2 (influential, c 10 years older than s2: 2 x 2^-2).
BACKWARD = [("b", "s1", False), ("d", "s1", None), ("c", "s2", True)]
# f(p, q) over ir's a, b, d, e and gnn's c, worked by hand.
FORWARD = {("ir", "s1"): [0.5, 1.0, 0.0, 0.0], ("ir", "s2"): [0.0, 1.0, 0.0, 2.0],
           ("gnn", "s1"): [0.0], ("gnn", "s2"): [0.25]}
BACK = {("ir", "s1"): [0.0, 1.0, 1.0, 0.0], ("ir", "s2"): [0.0, 0.0, 0.0, 0.0],
        ("gnn", "s1"): [0.0], ("gnn", "s2"): [0.5]}
BOTH = {("ir", "s1"): [0.5, 2.0, 1.0, 0.0], ("ir", "s2"): [0.0, 1.0, 0.0, 2.0],
        ("gnn", "s1"): [0.0], ("gnn", "s2"): [0.75]}

# Reference lists: submissions, reviewer papers (d has none) and papers x1..x7 outside the benchmark.
REFS = [("s1", "doi:k1"), ("s1", "doi:k2"), ("s1", "doi:k3"), ("s1", "a"), ("s2", "doi:k3"), ("s2", "doi:k4"),
        ("a", "doi:k1"), ("a", "doi:k2"), ("b", "doi:k1"), ("b", "doi:k5"), ("b", "doi:k6"), ("b", "doi:k7"),
        ("c", "doi:k4"), ("e", "doi:k3"),
        ("x1", "s1"), ("x1", "a"), ("x1", "e"), ("x2", "s1"), ("x2", "a"), ("x3", "s1"), ("x3", "b"),
        ("x4", "s2"), ("x4", "b"), ("x4", "c"), ("x5", "b"), ("x6", "b"), ("x7", "doi:k9"),
        ("s2", "doi:k4"), ("x4", "c")]  # a row given twice counts once
# Coupling |R(p) & R(q)| / sqrt(|R(p)| |R(q)|), over ir's a, b, e (d has no list: out of the pooling).
# R(s1) = {k1, k2, k3, a}, R(s2) = {k3, k4}, R(a) = {k1, k2}, R(b) = {k1, k5, k6, k7}, R(c) = {k4}, R(e) = {k3}.
COUPLING = {("ir", "s1"): [2 / math.sqrt(8), 1 / 4, 1 / 2], ("ir", "s2"): [0.0, 0.0, 1 / math.sqrt(2)],
            ("gnn", "s1"): [0.0], ("gnn", "s2"): [1 / math.sqrt(2)]}
# Co-citation |C(p) & C(q)| / sqrt(|C(p)| |C(q)|): C(s1) = {x1, x2, x3}, C(s2) = {x4}, C(a) = {s1, x1, x2},
# C(b) = {x3, x4, x5, x6}, C(c) = {x4}, C(e) = {x1}; no one cites d.
COCITATION = {("ir", "s1"): [2 / 3, 1 / math.sqrt(12), 1 / math.sqrt(3)], ("ir", "s2"): [0.0, 1 / 2, 0.0],
              ("gnn", "s1"): [0.0], ("gnn", "s2"): [1.0]}

POOLINGS = [(None, lambda v: sum(sorted(v, reverse=True)[:3]) / min(3, len(v))), ("max", max), ("sum", sum)]


def scored(spec: str, settings: Settings, b: Benchmark) -> dict[tuple[str, str], float]:
    out = make_scorer(spec, Context(settings)).score(b)
    return {(r, p): s for r, p, s in out.draws[0].iter_rows()}


def linked_bench() -> Benchmark:
    b = graph_bench()
    assert b.graph is not None
    back = frame([dict(citing_id=q, cited_id=p, is_influential=i, source="s2") for q, p, i in BACKWARD], GRAPH_CITATIONS_SCHEMA)
    b.graph.citations = pl.concat([b.graph.citations, back])
    b.graph.references = frame([dict(citing_id=p, cited_key=k) for p, k in REFS], GRAPH_REFERENCES_SCHEMA)
    return b


def pooled(values: dict[tuple[str, str], list[float]], agg) -> dict[tuple[str, str], float]:  # type: ignore[no-untyped-def]
    return {pair: agg(v) for pair, v in values.items()}


@pytest.mark.parametrize(("pooling", "agg"), POOLINGS)
@pytest.mark.parametrize(("direction", "values"), [("forward", FORWARD), ("backward", BACK), ("both", BOTH), (None, BOTH)])
def test_citation_each_way_equals_its_formula(  # type: ignore[no-untyped-def]
        direction, values, pooling, agg, settings: Settings) -> None:
    params = [f"direction={direction}"] * bool(direction) + [f"pooling={pooling}"] * bool(pooling)
    got = scored("citation" + (":" + ",".join(params) if params else ""), settings, linked_bench())
    assert got == pytest.approx(pooled(values, agg), abs=1e-12)


def test_the_graph_scorers_read_the_whole_history_not_the_capped_profile(settings: Settings) -> None:
    b = linked_bench()
    assert b.graph is not None
    # The text profile keeps ir's b and gnn's c only; the history holds every paper of theirs
    # (repeating the profile's, which count once) and gnn's h, which s1 cites.
    b.draws[0] = b.draws[0].filter(pl.col("paper_id").is_in(["b", "c"]))
    b.graph.history = frame([dict(reviewer_id=r, paper_id=p, year=y) for r, p, y in [
        ("ir", "a", 2014), ("ir", "b", 2024), ("ir", "d", 2024), ("ir", "e", None), ("gnn", "c", 2014),
        ("gnn", "h", 2019)]], GRAPH_HISTORY_SCHEMA)
    b.graph.citations = pl.concat([b.graph.citations, frame([dict(citing_id="s1", cited_id="h", is_influential=None,
                                                                  source="s2")], GRAPH_CITATIONS_SCHEMA)])
    got = scored("citation:pooling=sum", settings, b)
    want = pooled(BOTH, sum) | {("gnn", "s1"): 2 ** -1}  # h: 5 years older than s1, half its weight
    assert got == pytest.approx(want, abs=1e-12)
    b.graph.history = None  # the profile alone: a, d, e and h unseen
    assert scored("citation:pooling=sum", settings, b) == pytest.approx(
        {("ir", "s1"): 2.0, ("ir", "s2"): 1.0, ("gnn", "s1"): 0.0, ("gnn", "s2"): 0.75}, abs=1e-12)


@pytest.mark.parametrize(("pooling", "agg"), POOLINGS)
@pytest.mark.parametrize(("spec", "values"), [("coupling", COUPLING), ("cocitation", COCITATION)])
def test_coupling_and_cocitation_equal_salton_cosine(  # type: ignore[no-untyped-def]
        spec, values, pooling, agg, settings: Settings) -> None:
    got = scored(spec + (f":pooling={pooling}" if pooling else ""), settings, linked_bench())
    assert got == pytest.approx(pooled(values, agg), abs=1e-12)


def test_coupling_counts_references_outside_the_benchmark(settings: Settings) -> None:
    b = linked_bench()
    assert b.graph is not None and b.graph.references is not None
    # gnn's c shares with s2 only k4, a work outside the benchmark: its one shared reference.
    assert scored("coupling:pooling=max", settings, b)[("gnn", "s2")] == pytest.approx(1 / math.sqrt(2))
    b.graph.references = b.graph.references.filter((pl.col("citing_id") != "s2") | (pl.col("cited_key") != "doi:k4"))
    assert scored("coupling:pooling=max", settings, b)[("gnn", "s2")] == 0.0


def test_a_paper_without_a_list_is_left_out_not_scored_zero(settings: Settings) -> None:
    b = linked_bench()
    assert b.graph is not None and b.graph.references is not None
    b.graph.references = b.graph.references.filter((pl.col("citing_id") != "s2") & (pl.col("cited_key") != "c"))
    assert set(scored("coupling", settings, b)) == {("ir", "s1"), ("gnn", "s1")}  # s2 has no reference list
    assert set(scored("cocitation", settings, b)) == {("ir", "s1"), ("ir", "s2")}  # no one cites gnn's only paper


def refusal(spec: str, settings: Settings, b: Benchmark) -> str:
    with pytest.raises(InputError) as err:
        make_scorer(spec, Context(settings)).score(b)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{b.name} carries no ") and f"the {spec.split(':')[0]} scorer" in msg
    assert msg.endswith("(pick another --scorer for this benchmark)")
    return msg


def test_each_graph_scorer_refuses_a_graph_without_its_inputs(settings: Settings) -> None:
    b = linked_bench()
    assert b.graph is not None
    b.graph.citations = b.graph.citations.clear()  # topics, references, no citation
    assert "no citation between its papers" in refusal("citation", settings, b)
    assert "no citation between its papers" in refusal("citation:direction=backward", settings, b)
    for spec in ("topic", "coupling", "cocitation"):
        assert scored(spec, settings, b)  # each still scores from what it reads

    b = linked_bench()
    assert b.graph is not None
    b.graph.topics = frame(None, GRAPH_TOPICS_SCHEMA)
    assert "no paper topics" in refusal("topic", settings, b)
    b = linked_bench()
    assert b.graph is not None
    assert "no paper topics of scheme s2-fos" in refusal("topic:scheme=s2-fos", settings, b)

    b.graph.references = None  # as a release or a weak benchmark: no reference lists
    assert "no reference lists" in refusal("coupling", settings, b)
    assert "no reference lists" in refusal("cocitation", settings, b)
    b.graph.references = frame(None, GRAPH_REFERENCES_SCHEMA)
    assert "no reference of any of its papers" in refusal("coupling", settings, b)
    # Lists that cite none of the benchmark's papers: coupling has them, co-citation has nothing.
    b.graph.references = frame([dict(citing_id="s1", cited_key="doi:k1"), dict(citing_id="a", cited_key="doi:k1")],
                               GRAPH_REFERENCES_SCHEMA)
    assert scored("coupling:pooling=max", settings, b)[("ir", "s1")] == pytest.approx(1.0)
    assert "no paper citing any of its papers" in refusal("cocitation", settings, b)


def test_citations_only_between_reviewer_papers_score_zero_not_refused(settings: Settings) -> None:
    b = linked_bench()
    assert b.graph is not None
    b.graph.citations = b.graph.citations.filter(pl.col("citing_id") == "a")  # a -> c: the graph has citations
    assert scored("citation", settings, b) == {("ir", "s1"): 0.0, ("ir", "s2"): 0.0, ("gnn", "s1"): 0.0, ("gnn", "s2"): 0.0}


def test_the_new_scorers_take_a_pooling_and_nothing_unknown(settings: Settings) -> None:
    assert make_scorer("coupling:pooling=max", Context(settings)).label == "coupling:pooling=max"
    assert make_scorer("cocitation", Context(settings)).spec == "cocitation:pooling=topk_mean:3"
    assert make_scorer("citation", Context(settings)).spec == (
        "citation:direction=both,half_life=5.0,influential=2.0,pooling=topk_mean:3")
    with pytest.raises(ValueError, match="bad parameters for citation: direction"):
        make_scorer("citation:direction=sideways", Context(settings))
    with pytest.raises(ValueError, match="bad parameters for coupling: influential"):
        make_scorer("coupling:influential=2", Context(settings))
