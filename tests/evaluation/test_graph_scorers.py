"""The graph's scorers (``citation``, ``topic``) on a hand-made benchmark with a graph: exact values
of their formulas under each pooling, what they leave unscored, and a benchmark without a graph
refused in one line (by the scorer, and by ``revbench evaluate``), never scored zero."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from revbench.errors import InputError
from revbench.evaluation.model import Benchmark
from revbench.evaluation.scorers import Context, make_scorer
from revbench.settings import Settings
from tests.support.cli import evaluate_cli, one_line_error
from tests.support.evaluation import bench, graph_bench, write_openreview


def scored(spec: str, settings: Settings, b: Benchmark | None = None) -> dict[tuple[str, str], float]:
    out = make_scorer(spec, Context(settings)).score(b or graph_bench())
    return {(r, p): s for r, p, s in out.draws[0].iter_rows()}


# f(p, q) per reviewer paper, from graph_bench's edges: influential x2, halved every 5 years of age.
IR_S1 = [2 * 0.25, 1.0, 0.0, 0.0]  # a (influential, 10 years older), b (same year), d and e not cited
IR_S2 = [0.0, 1.0, 0.0, 2.0]  # b (not influential), e (influential, year unknown: no decay)
GNN_S2 = [0.25]  # c (10 years older); gnn's c is not cited by s1 (a -> c is between profile papers)


@pytest.mark.parametrize(("pooling", "agg"), [
    (None, lambda v: sum(sorted(v, reverse=True)[:3]) / min(3, len(v))),  # UniPR's default: the mean of the top 3
    ("max", max), ("mean", lambda v: sum(v) / len(v)), ("sum", sum)])
def test_citation_scores_equal_their_formula(pooling, agg, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    got = scored("citation" + (f":pooling={pooling}" if pooling else ""), settings)
    assert got == pytest.approx({("ir", "s1"): agg(IR_S1), ("ir", "s2"): agg(IR_S2),
                                 ("gnn", "s1"): 0.0, ("gnn", "s2"): agg(GNN_S2)}, abs=1e-12)


def test_citation_weights_are_parameters(settings: Settings) -> None:
    got = scored("citation:pooling=max,influential=1,half_life=10", settings)
    # a: 1 x 2^(-10/10); b: 1; e: 1 (influence no longer weighs more)
    assert got[("ir", "s1")] == pytest.approx(1.0) and got[("ir", "s2")] == pytest.approx(1.0)
    assert got[("gnn", "s2")] == pytest.approx(0.5)
    assert scored("citation:pooling=sum,influential=3", settings)[("ir", "s1")] == pytest.approx(3 * 0.25 + 1.0)
    with pytest.raises(ValueError, match="bad parameters for citation: influential"):
        make_scorer("citation:influential=0.5", Context(settings))
    with pytest.raises(ValueError, match="bad parameters for topic: scheme"):
        make_scorer("topic:scheme=mesh", Context(settings))


def _cos(u: dict[str, float], v: dict[str, float]) -> float:
    dot = sum(x * v.get(k, 0.0) for k, x in u.items())
    return dot / math.sqrt(sum(x * x for x in u.values())) / math.sqrt(sum(x * x for x in v.values()))


def test_topic_scores_equal_their_formula(settings: Settings) -> None:
    s1, s2 = {"T1": 0.9, "T2": 0.3}, {"T3": 0.5, "T1": 0.5}
    a, c = {"T1": 0.6, "T2": 0.8}, {"T3": 1.0}
    # Mean over the schemes both papers have topics in (arXiv's unscored categories count 1 each);
    # d has no topic at all and stays out of ir's pooling.
    ir_s1 = [(1 / math.sqrt(2) + _cos(s1, a)) / 2, 1.0, 0.0]  # a: both schemes; b: arXiv only, same category; e: cs.CV
    ir_s2 = [(0.0 + _cos(s2, a)) / 2, 0.0, 0.0]
    want = {("ir", "s1"): sum(ir_s1) / 3, ("ir", "s2"): sum(ir_s2) / 3,
            ("gnn", "s1"): (0.0 + _cos(s1, c)) / 2, ("gnn", "s2"): (1.0 + _cos(s2, c)) / 2}
    assert scored("topic", settings) == pytest.approx(want, abs=1e-12)
    assert want[("gnn", "s1")] == 0.0 and want[("ir", "s1")] == pytest.approx(0.5882164954717211)
    arxiv = scored("topic:scheme=arxiv,pooling=max", settings)
    assert arxiv == pytest.approx({("ir", "s1"): 1.0, ("ir", "s2"): 0.0, ("gnn", "s1"): 0.0, ("gnn", "s2"): 1.0})


def test_topic_leaves_pairs_without_topics_unscored(settings: Settings) -> None:
    b = graph_bench()
    assert b.graph is not None
    b.graph.topics = b.graph.topics.filter((pl.col("paper_id") != "s2") & (pl.col("paper_id") != "c"))
    # s2 has no topic (no pair of it scored); gnn's only paper has none (no pair of gnn scored).
    assert set(scored("topic", settings, b)) == {("ir", "s1")}


@pytest.mark.parametrize("spec", ["citation", "topic:pooling=max"])
def test_a_benchmark_without_a_graph_is_refused_in_one_line(spec: str, settings: Settings) -> None:
    with pytest.raises(InputError) as err:
        make_scorer(spec, Context(settings)).score(bench())
    msg = str(err.value)
    assert msg.startswith("hand carries no citation graph: ") and "\n" not in msg
    assert f"the {spec.split(':')[0]} scorer" in msg and "revbench graph" in msg


def test_evaluate_with_a_graph_scorer_on_a_graphless_benchmark_says_so(tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    line = one_line_error(*evaluate_cli(tmp_path, "-b", f"openreview={data}", "-s", "trivial", "-s", "citation"), 2,
                          "carries no citation graph", "the citation scorer")
    assert "Error" not in line.split(":", 1)[1]
    assert not (tmp_path / "rows.json").exists()  # nothing scored zero and written
