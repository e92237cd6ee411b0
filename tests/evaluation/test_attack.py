"""The collusion attack: one that must succeed, one that cannot, the starting ranks' scaling,
and OpenReview's self-attention clustering against a batched restatement of it."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.attack import AttackSetup, attack_rows, attack_scorer, distinctive_terms, ranks_of, rewrite, scaled_ranks
from revbench.evaluation.model import Benchmark, Split
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.scorers import clustering
from revbench.settings import Settings

TOPICS = {
    "s1": "graph neural networks message passing over molecular graphs for property prediction",
    "s2": "reinforcement learning policy gradients for robotic grasping with tactile sensing",
    "s3": "speech recognition with streaming transducers and low latency decoding",
}
FILLER = ["medieval trade routes and the economics of salt", "glacier melt observed by satellite altimetry",
          "protein folding kinetics under crowding", "urban traffic flow with cellular automata"]


def _bench() -> Benchmark:
    """Six reviewers, each with a copy of every submission among four unrelated papers: a
    colluder who keeps only the copy of its target matches it exactly; everyone else is diluted."""
    subs = pl.DataFrame({"paper_id": list(TOPICS), "title": [t.split(" for ")[0] for t in TOPICS.values()],
                         "abstract": list(TOPICS.values()), "year": 2024})
    rows = []
    for r in range(6):
        for sid, text in TOPICS.items():
            rows.append((f"r{r}", f"r{r}-{sid}", text.split(" for ")[0], text, 2023))
        for j, text in enumerate(FILLER):
            rows.append((f"r{r}", f"r{r}-f{j}", text, f"{text} (study {r})", 2022))
    profile = pl.DataFrame(rows, schema=["reviewer_id", "paper_id", "title", "abstract", "year"], orient="row")
    return Benchmark("toy", "1", subs, [profile], [Split("pointwise", ratings=None)])


@pytest.mark.parametrize("spec", ["bm25:pooling=mean", "tpms"])
def test_a_colluder_keeping_the_copy_of_the_submission_reaches_the_top(settings: Settings, spec: str) -> None:
    out = attack_scorer(_bench(), make_scorer(spec, Context(settings)), AttackSetup(pairs_per_rank=3, per_paper=1,
                                                                                    min_profiles=(1,)))
    assert out and all(r.ranks_before and min(r.ranks_before) >= 2 for r in out)
    assert all(rank == 1 for r in out for rank in r.ranks_after)


def test_trivial_cannot_be_moved_and_says_why(settings: Settings) -> None:
    bench = _bench()
    out = attack_scorer(bench, make_scorer("trivial", Context(settings)), AttackSetup(pairs_per_rank=3, per_paper=1))
    assert out and all(rank == 6 for r in out for rank in r.ranks_after)  # every tie counts against the colluder
    rows = attack_rows(bench, [make_scorer("trivial", Context(settings))], AttackSetup())
    assert rows and all(r.value is None and r.basis.startswith("immune: scores every pair alike") for r in rows)


def test_starting_ranks_scale_to_the_pool_and_never_start_assigned() -> None:
    assert scaled_ranks(7900, AttackSetup()) == {20: 20, 101: 101, 501: 501, 1001: 1001}
    assert scaled_ranks(790, AttackSetup(per_paper=3)) == {4: 20, 10: 101, 50: 501, 100: 1001}
    assert scaled_ranks(96, AttackSetup(per_paper=3)) == {4: 20, 6: 501, 12: 1001}


def test_ties_count_against_the_reviewer() -> None:
    scores = pl.DataFrame({"reviewer_id": ["a", "b", "c"], "paper_id": "p", "score": [0.5, 0.5, 0.1]})
    assert dict(ranks_of(scores).select("reviewer_id", "rank").iter_rows()) == {"a": 2, "b": 2, "c": 3}


def test_the_rewrite_brings_in_the_reviewers_terms_and_keeps_the_abstract() -> None:
    terms = distinctive_terms(["tactile grasping with dexterous hands"], list(TOPICS.values()) + FILLER,
                              TOPICS["s3"], 3)
    assert terms and set(terms) <= {"tactile", "grasping", "dexterous", "hands"}
    text, version = rewrite(TOPICS["s3"], terms)
    assert text.endswith(TOPICS["s3"]) and all(t in text for t in terms) and version.startswith("1-")


def _openreview_batched(papers: list[np.ndarray], query: np.ndarray, cross: bool, top_k: int | None) -> np.ndarray:
    """The clustering as openreview-expertise batches it: reviewers padded to one length, masked."""
    import torch
    import torch.nn.functional as F

    n = max(len(p) for p in papers)
    emb = torch.zeros(len(papers), n, len(query), dtype=torch.float64)
    mask = torch.zeros(len(papers), n, dtype=torch.float64)
    for i, p in enumerate(papers):
        emb[i, :len(p)] = torch.tensor(p)
        mask[i, :len(p)] = 1
    q = F.normalize(torch.tensor(query)[None, :], dim=1)[0]
    unit = F.normalize(emb, dim=2)
    s = (torch.bmm(unit, unit.transpose(1, 2)) * mask[:, :, None] * mask[:, None, :]).sum(2) * mask

    def top(w: torch.Tensor) -> torch.Tensor:
        if top_k is not None:
            keep = torch.zeros_like(w)
            idx = torch.topk(w + (mask == 0) * -1e9, min(top_k, n), dim=1).indices
            keep.scatter_(1, idx, 1.0)
            w = w * keep * mask
        return w / w.sum(1, keepdim=True)

    if cross:
        c = (unit @ q) * mask
        w = top(torch.softmax((c * s).masked_fill(mask == 0, -1e9), dim=1))
        out = (w * c).sum(1)
    else:
        w = top(torch.softmax(s.masked_fill(mask == 0, -1e9), dim=1))
        out = F.normalize(torch.bmm(w[:, None, :], emb)[:, 0], dim=1) @ q
    single = torch.tensor([len(p) == 1 for p in papers])
    out[single] = torch.stack([F.normalize(torch.tensor(p[0])[None], dim=1)[0] @ q for p in papers])[single]
    return out.numpy()


@pytest.mark.parametrize(("cross", "top_k"), [(False, None), (False, 2), (True, None), (True, 2)])
def test_clustering_equals_openreviews_on_the_same_vectors(cross: bool, top_k: int | None) -> None:
    rng = np.random.default_rng(5)
    papers = [rng.normal(size=(n, 16)) for n in (1, 2, 3, 5, 8)]
    query = rng.normal(size=16)
    ours = np.array([clustering.score(p, query, cross, top_k) for p in papers])
    assert ours == pytest.approx(_openreview_batched(papers, query, cross, top_k), abs=1e-9)


def test_clustering_pooling_is_an_embedding_scorer_parameter(settings: Settings) -> None:
    assert clustering.parse("clustering:3") == (False, 3) and clustering.parse("max") is None
    with pytest.raises(ValueError, match="at least 1"):
        clustering.parse("clustering_cross:0")
    with pytest.raises(ValueError, match="pooling"):
        make_scorer("bm25:pooling=clustering", Context(settings))


def test_the_llm_rewrite_goes_through_the_client_and_says_what_wrote_it(replay, settings: Settings, tmp_path) -> None:
    from revbench.clients.llm import LlmClient
    from revbench.evaluation.attack import llm_rewriter
    from tests.support.common import on_replay

    app = replay()
    s = on_replay(settings, app)
    rewriter = llm_rewriter(LlmClient(s.llm, s.http, cache_dir=tmp_path / "cache"))
    text, by = rewriter(TOPICS["s3"], ["tactile", "grasping"], "tactile grasping with dexterous hands")
    assert app.faults.stats()["served"]["llm"] == 1
    assert by.startswith("llm prompts/collusion_rewrite.j2@1-")
    assert "tactile, grasping" in text and text.endswith(TOPICS["s3"])


def test_an_empty_llm_answer_falls_back_to_the_keyword_rewrite() -> None:
    from revbench.evaluation.attack import llm_rewriter

    class Silent:
        def complete(self, prompt: str, meta: dict | None = None) -> str:
            return "   "

    text, by = llm_rewriter(Silent())(TOPICS["s1"], ["tactile"], "tactile sensing")  # type: ignore[arg-type]
    assert by.startswith("keywords attacks/background.j2@") and "tactile" in text
