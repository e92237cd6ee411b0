"""The weak-supervision recipe on hand-built candidates: the positive is the best BM25 candidate
among the embedding neighbours, each negative the one nearest to its ratio of the positive's
score; both views, seeded; an anchor's own authors or papers are never its candidates."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from revbench.ml.keywords import keyword_profiles, paper_keywords, parse_keywords, profile_text
from revbench.tasks.weak_supervision import PAPER_CENTRIC, REVIEWER_CENTRIC, RecipeParams, build_training_set, pick


def test_pick_takes_the_top_and_the_nearest_to_each_ratio() -> None:
    scores = np.array([2.0, 10.0, 3.4, 1.1, 0.0, 5.0])
    pos, negs = pick(scores, (1 / 3, 1 / 10))
    assert pos == 1
    assert negs == [(2, 1 / 3), (3, 1 / 10)]  # 3.4 is nearest 3.33, 1.1 nearest 1.0


def test_pick_breaks_ties_by_candidate_order_and_never_reuses_a_candidate() -> None:
    pos, negs = pick(np.array([9.0, 3.0, 3.0, 9.0]), (1 / 3, 1 / 3))
    assert pos == 0 and negs == [(1, 1 / 3), (2, 1 / 3)]


def test_pick_names_why_it_cannot() -> None:
    assert pick(np.zeros(5), (1 / 3, 1 / 10)) == "no_lexical_signal"
    assert pick(np.array([1.0, 0.5]), (1 / 3, 1 / 10)) == "too_few_candidates"
    assert pick(np.array([4.0, 4.0, 4.0]), (1 / 3, 1 / 10)) == "no_weaker_candidate"


def test_a_candidate_tied_with_the_positive_is_never_a_negative() -> None:
    pos, negs = pick(np.array([4.0, 4.0, 0.1, 2.0]), (1 / 3, 1 / 10))
    assert pos == 0 and [j for j, _ in negs] == [3, 2]


TOPICS = {
    "graphs": "graph neural networks message passing molecules",
    "speech": "speech recognition acoustic models transformers audio",
    "vision": "image segmentation convolutional vision detection",
}


def _world() -> tuple[pl.DataFrame, np.ndarray, pl.DataFrame, np.ndarray, pl.DataFrame]:
    rng = np.random.default_rng(0)
    papers, pvecs = [], []
    for t, (topic, words) in enumerate(TOPICS.items()):
        for i in range(4):
            extra = " ".join(words.split()[: i + 2])  # more shared words as i grows
            papers.append({"paper_id": f"{topic}-{i}", "text": f"{words} study {i} {extra}"})
            v = np.eye(3)[t] + 0.05 * rng.standard_normal(3)
            pvecs.append(v / np.linalg.norm(v))
    reviewers, rvecs = [], []
    for t, (topic, words) in enumerate(TOPICS.items()):
        for i in range(3):
            reviewers.append({"reviewer_id": f"r-{topic}-{i}", "profile": profile_text(words.split()[: 2 + i])})
            v = np.eye(3)[t] + 0.05 * rng.standard_normal(3)
            rvecs.append(v / np.linalg.norm(v))
    authored = pl.DataFrame({"reviewer_id": ["r-graphs-2"], "paper_id": ["graphs-3"]})
    return (pl.DataFrame(papers), np.asarray(pvecs, dtype=np.float32), pl.DataFrame(reviewers),
            np.asarray(rvecs, dtype=np.float32), authored)


def test_training_set_follows_the_recipe_in_both_views() -> None:
    papers, pv, reviewers, rv, authored = _world()
    p = RecipeParams(anchors=12, paper_centric_share=0.5, candidates=5, ratios=(1 / 3, 1 / 10), seed=1)
    out, skipped = build_training_set(papers, pv, reviewers, rv, authored, p)
    assert set(out["view"]) == {PAPER_CENTRIC, REVIEWER_CENTRIC}
    anchors = out.select("view", "anchor_id").unique()
    assert anchors.height + skipped.height == 12
    assert (out.group_by("view", "anchor_id").len()["len"] == 2).all()  # one triplet per ratio
    assert (out["positive_bm25"] > out["negative_bm25"]).all()
    assert (out["positive_id"] != out["negative_id"]).all()
    # Candidates come from the anchor's embedding neighbourhood: here, its own topic.
    pc = out.filter(pl.col("view") == PAPER_CENTRIC)
    assert (pc["anchor_id"].str.split("-").list.first() == pc["positive_id"].str.split("-").list.get(1)).all()
    rc = out.filter(pl.col("view") == REVIEWER_CENTRIC)
    assert (rc["anchor_id"].str.split("-").list.get(1) == rc["positive_id"].str.split("-").list.first()).all()
    pairs = set(zip(out["anchor_id"], out["positive_id"], strict=True)) | set(zip(out["anchor_id"], out["negative_id"], strict=True))
    assert ("graphs-3", "r-graphs-2") not in pairs and ("r-graphs-2", "graphs-3") not in pairs


def test_training_set_is_seeded() -> None:
    papers, pv, reviewers, rv, authored = _world()
    p = RecipeParams(anchors=6, candidates=5, seed=3)
    a, _ = build_training_set(papers, pv, reviewers, rv, authored, p)
    b, _ = build_training_set(papers, pv, reviewers, rv, authored, p)
    c, _ = build_training_set(papers, pv, reviewers, rv, authored, RecipeParams(anchors=6, candidates=5, seed=4))
    assert a.equals(b)
    assert not a.select("anchor_id").equals(c.select("anchor_id"))


def test_the_share_of_views_is_a_setting() -> None:
    papers, pv, reviewers, rv, authored = _world()
    out, skipped = build_training_set(papers, pv, reviewers, rv, authored, RecipeParams(anchors=5, paper_centric_share=1.0,
                                                                                        candidates=5))
    assert set(out["view"]) == {PAPER_CENTRIC} and out["anchor_id"].n_unique() + skipped.height == 5


@pytest.mark.parametrize(("answer", "error"), [
    ('{"keywords": ["a", "b"]}', "at least 3"),
    ('{"keywords": ["a", "b", "c"], "note": 1}', "note"),
    ("graph neural networks, molecules", "not JSON"),
    ('{"keywords": ["a", "", "c"]}', "1-80 characters"),
    ('{"keywords": "a, b, c"}', "keywords"),
])
def test_keyword_answers_are_checked_strictly(answer: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_keywords(answer)


def test_keyword_answers_may_be_fenced() -> None:
    assert parse_keywords('```json\n{"keywords": ["graphs", " molecules ", "GNN"]}\n```') == ["graphs", "molecules", "GNN"]


def test_profiles_keep_repeated_keywords_and_name_their_extractor() -> None:
    papers = pl.DataFrame({"paper_id": ["p1", "p2", "p3"], "title": ["Graph networks for molecules", "Molecule graphs", ""],
                           "abstract": ["Message passing on molecular graphs.", "Graph neural networks for chemistry.", ""]})
    kw = paper_keywords(papers, llm={"p1": ["graphs", "molecules", "message passing"]}, template_version="2")
    assert kw.filter(pl.col("paper_id") == "p1")["extractor"].item() == "llm"
    assert kw.filter(pl.col("paper_id") == "p2")["extractor"].item() == "yake"
    assert kw.filter(pl.col("paper_id") == "p3")["keywords"].item().to_list() == []
    profiles = keyword_profiles(pl.DataFrame({"reviewer_id": ["r", "r", "q"], "paper_id": ["p1", "p2", "p3"]}), kw)
    assert profiles["reviewer_id"].to_list() == ["r"]  # q's only paper has no keywords: no profile
    text = profiles["profile"].item()
    assert text.startswith("The reviewer's research keywords include: graphs, molecules, message passing, ")


def test_an_anchor_of_stop_words_only_is_skipped_with_its_reason() -> None:
    papers, pv, reviewers, rv, authored = _world()
    papers = papers.with_columns(pl.when(pl.col("paper_id") == "speech-0").then(pl.lit("the of and with"))
                                 .otherwise(pl.col("text")).alias("text"))
    out, skipped = build_training_set(papers, pv, reviewers, rv, authored,
                                      RecipeParams(anchors=12, paper_centric_share=1.0, candidates=5))
    assert skipped.filter(pl.col("anchor_id") == "speech-0")["reason"].to_list() == ["no_lexical_signal"]
    assert "speech-0" not in set(out["anchor_id"])
