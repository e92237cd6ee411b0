"""Scorers on a small hand-made benchmark: values, pooling, caches, the LLM path and its faults."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.model import Benchmark
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.scorers.base import pool, pooled_scores
from revbench.evaluation.scorers.llm import parse_score
from revbench.evaluation.scorers.tpms import tokens
from revbench.ml.embeddings import EmbeddingCache
from revbench.ml.keywords import PROFILE_PREFIX as PREFIX
from revbench.ml.keywords import yake_keywords as offline_keywords
from revbench.settings import Settings
from tests.support.common import on_replay
from tests.support.evaluation import bench

FIXTURES = Path(__file__).parent / "fixtures"


def scores(spec: str, settings: Settings) -> dict[tuple[str, str], float]:
    out = make_scorer(spec, Context(settings)).score(bench())
    return {(r, p): s for r, p, s in out.draws[0].iter_rows()}


@pytest.mark.parametrize("spec", ["tpms", "bm25", "embedding", "embedding:pooling=mean", "rate:keywords=offline"])
def test_text_scorers_prefer_the_matching_reviewer(spec: str, settings: Settings) -> None:
    s = scores(spec, settings)
    assert s[("ir", "s1")] > s[("ir", "s2")] and s[("gnn", "s2")] > s[("gnn", "s1")]


def test_tpms_equals_its_definition(settings: Settings) -> None:
    b = bench()
    docs = {r: Counter(tokens(" ".join(f"{t} {a}" for t, a in g.select("title", "abstract").iter_rows())))
            for (r,), g in b.draws[0].group_by("reviewer_id")}
    paps = {p: Counter(tokens(f"{t} {a}")) for p, t, a in b.submissions.select("paper_id", "title", "abstract").iter_rows()}
    df = Counter(w for d in [*docs.values(), *paps.values()] for w in d)
    idf = {w: math.log(4 / n) for w, n in df.items()}
    def vec(c: Counter) -> dict[str, float]:
        top = max(c.values())
        return {w: (0.5 + 0.5 * n / top) * idf[w] for w, n in c.items()}
    got = scores("tpms", settings)
    for (r, p), value in got.items():
        a, v = vec(docs[r]), vec(paps[p])
        want = sum(a[w] * v[w] for w in a if w in v) / math.sqrt(sum(x * x for x in a.values())) / math.sqrt(sum(x * x for x in v.values()))
        assert value == pytest.approx(want, abs=1e-12)


def test_tpms_tokens() -> None:
    assert tokens("The Ærøskøbing models, using computer-vision results!") == ["roskob", "model", "vision"]


def test_pooling() -> None:
    s = np.array([0.2, 0.9, 0.5, 0.1])
    assert pool(s, "max") == 0.9 and pool(s, "mean") == pytest.approx(0.425)
    assert pool(s, "percentile:75") == pytest.approx(np.percentile(s, 75))
    assert pool(s, "topk_mean:3") == pytest.approx((0.9 + 0.5 + 0.2) / 3)
    assert pool(np.array([0.6]), "acl_top3") == pytest.approx(0.6)  # zero-padded
    assert pool(s, "acl_top3") == pytest.approx(0.9 + 0.5 / 2 + 0.2 / 3)
    assert pool(np.zeros(0), "max") == 0.0
    with pytest.raises(ValueError):
        pool(s, "median")


def one_pair(v: np.ndarray, how: str) -> float:
    """The pooling of one pair's similarities written out on its own, as pooled_scores did pair by pair."""
    kind, _, arg = how.partition(":")
    best = np.sort(v)[::-1]
    top = np.concatenate([best[:3], np.zeros(3)])[:3]
    return float({"max": lambda: v.max(), "mean": lambda: v.mean(), "sum": lambda: v.sum(),
                  "percentile": lambda: np.percentile(v, float(arg), method="linear"),
                  "topk_mean": lambda: best[:int(arg)].mean(),
                  "acl_top3": lambda: top[0] + top[1] / 2 + top[2] / 3}[kind]())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pooled_scores_equal_each_pair_pooled_alone(dtype: type) -> None:
    # reviewers of 1 to 23 papers, their rows interleaved; a reviewer without papers and a paper
    # outside the submissions stay unscored; values must be identical, not just close
    rng = np.random.default_rng(3)
    reviewers = [f"r{i}" for i in range(12)]
    owners = [r for i, r in enumerate(reviewers) for _ in range(1 + 2 * i)]
    owners = [owners[i] for i in rng.permutation(len(owners))]
    profile = pl.DataFrame({"reviewer_id": owners, "paper_id": [f"q{i}" for i in range(len(owners))]})
    papers = [f"p{j}" for j in range(7)]
    sim = rng.random((len(owners), len(papers))).astype(dtype)
    needed = pl.DataFrame({"reviewer_id": [*reviewers, *reviewers[::2], "nobody", "r3"],
                           "paper_id": ["p1"] * 12 + ["p6"] * 6 + ["p2", "elsewhere"]})
    for how in ["max", "mean", "sum", "percentile:75", "topk_mean:3", "topk_mean:10", "acl_top3"]:
        got = pooled_scores(sim, profile, papers, needed, how)
        want = [(r, p, one_pair(sim[[i for i, o in enumerate(owners) if o == r], papers.index(p)], how))
                for r, p in needed.iter_rows() if r in owners and p in papers]
        assert got.rows() == want, how


def test_scorer_specs_fail_clearly(settings: Settings) -> None:
    with pytest.raises(ValueError, match="unknown scorer"):
        make_scorer("tfidf", Context(settings))
    with pytest.raises(ValueError, match="bad parameters"):
        make_scorer("tpms:regime=everything", Context(settings))
    with pytest.raises(ValueError, match="key=value"):
        make_scorer("embedding:max", Context(settings))
    assert make_scorer("embedding:pooling=percentile:75", Context(settings)).label == "embedding:pooling=percentile:75"
    assert make_scorer("tpms", Context(settings)).spec == "tpms:compat=revbench,regime=title+abstract"


def test_embedding_cache_encodes_only_new_texts(tmp_path: Path) -> None:
    calls: list[int] = []
    def enc(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return np.ones((len(texts), 3), dtype=np.float32)
    c = EmbeddingCache(tmp_path, "toy")
    c.embed(["a", "bb", "a"], enc)
    c.embed(["a", "bb", "ccc"], enc)
    assert calls == [2, 1]
    assert EmbeddingCache(tmp_path, "toy").embed(["ccc", "a"], enc).shape == (2, 3) and calls == [2, 1]


def test_offline_keywords() -> None:
    kws = offline_keywords(["dense retrieval of reviewers with dense encoders", "graph neural networks on molecules"], per_paper=3)
    assert any("dense" in k for k in kws[0]) and all(len(k) == 3 for k in kws)
    assert not any("dense" in k for k in kws[1])
    assert PREFIX.startswith("The reviewer's research keywords include")


def test_parse_score() -> None:
    assert parse_score("Reasoning...\n4", 1, 5) == 4.0
    assert parse_score("Score: 73/100", 0, 100) == 100.0
    assert parse_score("I'd say 3.5.", 1, 5) == 3.5
    assert parse_score("no number here", 1, 5) is None
    assert parse_score("rating 7", 1, 5) is None


def test_llm_scorer_through_the_replay_and_its_cache(replay, settings: Settings) -> None:
    app = replay()
    settings = on_replay(settings, app)
    s = scores("llm:prompt=bars", settings)
    assert set(s) == {("ir", "s1"), ("ir", "s2"), ("gnn", "s1"), ("gnn", "s2")}
    assert all(1 <= v <= 5 for v in s.values())
    assert s[("ir", "s1")] > s[("ir", "s2")]
    served = app.faults.stats()["served"]["llm"]
    assert scores("llm:prompt=bars", settings) == s
    assert app.faults.stats()["served"]["llm"] == served  # all from the cache
    g = scores("llm:prompt=goldstandard", settings)
    assert all(0 <= v <= 100 for v in g.values())


def test_llm_faults_are_retried(replay, settings: Settings, tmp_path: Path) -> None:
    clean = scores("llm", on_replay(settings, replay()).with_overrides(data_dir=tmp_path / "a"))
    app = replay(fault_rate=0.5, fault_seed=2)
    assert scores("llm", on_replay(settings, app).with_overrides(data_dir=tmp_path / "b")) == clean
    assert sum(v for k, v in app.faults.stats()["injected"].items() if k.startswith("llm:")) > 0


def test_llm_answer_out_of_format_scores_nothing(replay, settings: Settings) -> None:
    app = replay(fixtures=FIXTURES)
    assert scores("llm", on_replay(settings, app)) == {}
    # One cached ask and one fresh retry per pair, then the pair is left unscored.
    assert app.faults.stats()["served"]["llm"] == 8


def test_rate_keywords_from_the_llm(replay, settings: Settings) -> None:
    app = replay()
    s = scores("rate:keywords=llm", on_replay(settings, app))
    assert s[("ir", "s1")] > s[("ir", "s2")]
    assert app.faults.stats()["served"]["llm"] == 3  # one keyword prompt per profile paper


@pytest.mark.parametrize("spec", ["bm25", "embedding", "tpms"])
def test_reviewers_without_profile_papers_are_left_unscored(spec: str, settings: Settings) -> None:
    b = bench()
    empty = Benchmark(b.name, b.version, b.submissions, [b.draws[0].clear()], b.splits)
    out = make_scorer(spec, Context(settings)).score(empty)
    assert out.draws[0].height == 0


def test_every_registered_scorer_module_registers_its_name(settings: Settings) -> None:
    from revbench.evaluation.scorers import REGISTRY, SCORER_MODULES

    for name in SCORER_MODULES:
        assert make_scorer(name, Context(settings)).name == name
    assert set(REGISTRY) == set(SCORER_MODULES)
