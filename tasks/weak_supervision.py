"""Weak preference supervision for RATE-style training, without a single human label.

For each anchor (a paper in the paper-centric view, a reviewer's keyword profile in the
reviewer-centric view) the candidates are its ``candidates`` nearest items of the other kind
by embedding similarity; BM25 (bm25s) scores them against the anchor's text; the candidate
with the highest BM25 score is the positive, and for each difficulty ratio r the candidate
whose score lies nearest to r times the positive's is a negative (r = 1/3 gives a hard
negative, r = 1/10 an easy one). The two signals disagree often enough to be useful: the
embedding proposes what is topically close, BM25 orders it by shared terms.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import polars as pl

PAPER_CENTRIC = "paper_centric"
REVIEWER_CENTRIC = "reviewer_centric"
TRAINING_SCHEMA = {
    "view": pl.Utf8, "anchor_id": pl.Utf8, "anchor_text": pl.Utf8, "positive_id": pl.Utf8, "positive_text": pl.Utf8,
    "negative_id": pl.Utf8, "negative_text": pl.Utf8, "positive_bm25": pl.Float64, "negative_bm25": pl.Float64,
    "ratio": pl.Float64,
}
SKIPPED_SCHEMA = {"view": pl.Utf8, "anchor_id": pl.Utf8, "reason": pl.Utf8}
"""Anchors left out, each with its reason: no_lexical_signal, too_few_candidates or
no_weaker_candidate (see :func:`pick`)."""


@dataclass(frozen=True)
class RecipeParams:
    """The recipe's knobs (``TRAIN__*`` settings)."""

    anchors: int = 2000
    paper_centric_share: float = 0.5
    candidates: int = 50
    ratios: tuple[float, ...] = (1 / 3, 1 / 10)
    seed: int = 0


def pick(scores: np.ndarray, ratios: tuple[float, ...]) -> tuple[int, list[tuple[int, float]]] | str:
    """The positive and one negative per ratio among candidates with BM25 ``scores`` (in
    candidate order); a negative is the unused candidate whose score is nearest to
    ``ratio * positive``, the earlier candidate on ties, and always scores below the positive
    (a candidate tied with it is no negative). A reason string when the candidates cannot give
    a positive and distinct negatives."""
    if len(scores) < len(ratios) + 1:
        return "too_few_candidates"
    pos = int(np.argmax(scores))  # argmax keeps the first of equal maxima
    top = float(scores[pos])
    if top <= 0:
        return "no_lexical_signal"
    used = {pos}
    negs: list[tuple[int, float]] = []
    for r in ratios:
        gap = np.abs(scores - r * top)
        gap[list(used)] = np.inf
        gap[scores >= top] = np.inf
        j = int(np.argmin(gap))
        if not np.isfinite(gap[j]):
            return "no_weaker_candidate"
        used.add(j)
        negs.append((j, r))
    return pos, negs


def _bm25(texts: list[str]):  # type: ignore[no-untyped-def]
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    index = bm25s.BM25()
    index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    return index


def _neighbours(queries: np.ndarray, items: np.ndarray, k: int) -> np.ndarray:
    import faiss

    index = faiss.IndexFlatIP(items.shape[1])
    index.add(np.ascontiguousarray(items, dtype=np.float32))
    _, ids = index.search(np.ascontiguousarray(queries, dtype=np.float32), min(k, items.shape[0]))
    return ids


def _view(view: str, anchor_ids: list[str], anchor_texts: list[str], anchor_vecs: np.ndarray, item_ids: list[str],
          item_texts: list[str], item_vecs: np.ndarray, excluded: set[tuple[str, str]], p: RecipeParams,
          rows: list[dict[str, object]], skipped: list[dict[str, str]]) -> None:
    import bm25s

    if not anchor_ids or not item_ids:
        return
    index = _bm25(item_texts)
    # Extra neighbours make up for the excluded (an anchor's own authors or papers), which are
    # often its nearest.
    per_anchor: dict[str, int] = {}
    for a, _ in excluded:
        per_anchor[a] = per_anchor.get(a, 0) + 1
    slack = max((per_anchor.get(a, 0) for a in anchor_ids), default=0)
    near = _neighbours(anchor_vecs, item_vecs, p.candidates + slack)
    queries = bm25s.tokenize(anchor_texts, stopwords="en", return_ids=False, show_progress=False)
    for a, (aid, atext) in enumerate(zip(anchor_ids, anchor_texts, strict=True)):
        if not queries[a]:  # nothing but stop words: BM25 has nothing to rank by
            skipped.append({"view": view, "anchor_id": aid, "reason": "no_lexical_signal"})
            continue
        cands = [int(j) for j in near[a] if j >= 0 and (aid, item_ids[j]) not in excluded][:p.candidates]
        scores = index.get_scores(queries[a])[cands] if cands else np.zeros(0)
        got = pick(np.asarray(scores, dtype=np.float64), p.ratios)
        if isinstance(got, str):
            skipped.append({"view": view, "anchor_id": aid, "reason": got})
            continue
        pos, negs = got
        for j, r in negs:
            rows.append({"view": view, "anchor_id": aid, "anchor_text": atext,
                         "positive_id": item_ids[cands[pos]], "positive_text": item_texts[cands[pos]],
                         "negative_id": item_ids[cands[j]], "negative_text": item_texts[cands[j]],
                         "positive_bm25": float(scores[pos]), "negative_bm25": float(scores[j]), "ratio": r})


def build_training_set(papers: pl.DataFrame, paper_vecs: np.ndarray, reviewers: pl.DataFrame, reviewer_vecs: np.ndarray,
                       authored: pl.DataFrame, p: RecipeParams) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Training triplets (:data:`TRAINING_SCHEMA`) from ``papers`` (``paper_id, text``) and
    reviewer keyword profiles (``reviewer_id, profile``) with their unit vectors, row for row.
    ``authored`` (``reviewer_id, paper_id``) pairs are never anchor and candidate of each other:
    a paper's own authors would be trivial positives. Anchors are sampled with ``p.seed``,
    ``p.paper_centric_share`` of them papers. Returns the triplets and the skipped anchors with
    their reason."""
    rng = np.random.default_rng(p.seed)
    n_pc = min(papers.height, round(p.anchors * p.paper_centric_share))
    n_rc = min(reviewers.height, p.anchors - n_pc)
    pc = np.sort(rng.choice(papers.height, size=n_pc, replace=False)) if n_pc else np.zeros(0, dtype=int)
    rc = np.sort(rng.choice(reviewers.height, size=n_rc, replace=False)) if n_rc else np.zeros(0, dtype=int)
    pairs = {(r, q) for r, q in authored.select("reviewer_id", "paper_id").iter_rows()}
    pid, ptext = papers["paper_id"].to_list(), papers["text"].to_list()
    rid, rtext = reviewers["reviewer_id"].to_list(), reviewers["profile"].to_list()
    rows: list[dict[str, object]] = []
    skipped: list[dict[str, str]] = []
    _view(PAPER_CENTRIC, [pid[i] for i in pc], [ptext[i] for i in pc], paper_vecs[pc], rid, rtext, reviewer_vecs,
          {(q, r) for r, q in pairs}, p, rows, skipped)
    _view(REVIEWER_CENTRIC, [rid[i] for i in rc], [rtext[i] for i in rc], reviewer_vecs[rc], pid, ptext, paper_vecs,
          pairs, p, rows, skipped)
    out = pl.DataFrame(rows, schema=TRAINING_SCHEMA) if rows else pl.DataFrame(schema=TRAINING_SCHEMA)
    skips = pl.DataFrame(skipped, schema=SKIPPED_SCHEMA) if skipped else pl.DataFrame(schema=SKIPPED_SCHEMA)
    return out, skips


def count_by(frame: pl.DataFrame, column: str) -> dict[str, int]:
    """Rows of ``frame`` per value of ``column`` (empty for an empty frame)."""
    return dict(frame.group_by(column).len().iter_rows()) if frame.height else {}
