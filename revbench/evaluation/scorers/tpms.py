"""TPMS: TF-IDF cosine between a reviewer's concatenated papers and a submission.

As the gold-standard authors define it: text split on non-letters after accents are folded,
lower-cased, one-letter tokens and stop words dropped, Porter-stemmed; a reviewer is one
document (all profile papers); over all N documents (reviewers and submissions)
``idf(w) = ln(N / df(w))``; a term present in a document weighs ``(0.5 + 0.5 tf/max_tf) idf``;
the score is the cosine of the two weight vectors. Sparse and vectorised: one matrix product
per draw instead of a loop over pairs.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from typing import Literal

import numpy as np
import polars as pl
from scipy import sparse

from revbench.evaluation.model import SCORES_SCHEMA, Benchmark
from revbench.evaluation.scorers.base import Params, Scorer

# The gold standard's TPMS stop list is scikit-learn's English list without "fifty" plus these.
_EXTRA_STOP = """accordingly aside away briefly came certain certainly computer does edit fify following gave gets
given giving gone got hardly having just kept kg knowledge largely like mainly make mg ml nearly necessarily
normally noted obtain obtained owing particularly past poorly possible possibly potentially predominantly present
previously primarily probably prompt promptly quickly quite readily really recently refs regarding regardless
relatively respectively resulted resulting results rst said second seen shall showed shown shows significantly
similar similarly slightly somewhat soon specifically state states strongly substantially successfully
sufficiently theirs unless use used usefully usefulness using usually various widely""".split()


def stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset((set(ENGLISH_STOP_WORDS) - {"fifty"}) | set(_EXTRA_STOP))


_STOP = stop_words()
_SPLIT = re.compile(r"[^a-zA-Z]+")
_FOLD = str.maketrans({"æ": "ae", "ø": "o", "Ø": "o", "ß": "ss", "¨": "o", "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl"})


@lru_cache(maxsize=None)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


@lru_cache(maxsize=1)
def _stemmer():  # type: ignore[no-untyped-def]
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def tokens(text: str) -> list[str]:
    """The TPMS analyser: fold accents, split on non-letters, lower, drop stop words, stem."""
    folded = "".join(c for c in unicodedata.normalize("NFD", text.translate(_FOLD)) if unicodedata.category(c) != "Mn")
    out = []
    for w in _SPLIT.split(folded):
        w = w.lower()
        if len(w) > 1 and w not in _STOP:
            out.append(_stem(w))
    return out


def _triplets(docs: list[list[str]], vocab: dict[str, int]) -> tuple[list[int], list[int]]:
    rows, cols = [], []
    for i, d in enumerate(docs):
        for w in d:
            rows.append(i)
            cols.append(vocab.setdefault(w, len(vocab)))
    return rows, cols


def _weigh(m: sparse.csr_matrix, idf: np.ndarray) -> sparse.csr_matrix:
    """Rows of ``(0.5 + 0.5 tf/max_tf) idf`` scaled to unit length (empty rows stay zero)."""
    row_max = m.max(axis=1).toarray().ravel()
    m.data = (0.5 + 0.5 * m.data / np.repeat(np.where(row_max > 0, row_max, 1), np.diff(m.indptr))) * idf[m.indices]
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    return sparse.diags(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)) @ m


def tpms_matrix(docs_a: list[list[str]], docs_b: list[list[str]]) -> np.ndarray:
    """Cosine TPMS similarity of every document of ``a`` with every document of ``b`` (IDF over both)."""
    vocab: dict[str, int] = {}
    ra, ca = _triplets(docs_a, vocab)
    rb, cb = _triplets(docs_b, vocab)
    shape = len(vocab)
    a = sparse.csr_matrix((np.ones(len(ra)), (ra, ca)), shape=(len(docs_a), shape))
    b = sparse.csr_matrix((np.ones(len(rb)), (rb, cb)), shape=(len(docs_b), shape))
    a.sum_duplicates()
    b.sum_duplicates()
    df = np.diff(a.tocsc().indptr) + np.diff(b.tocsc().indptr)
    idf = np.log((len(docs_a) + len(docs_b)) / np.maximum(df, 1))
    return (_weigh(a, idf) @ _weigh(b, idf).T).toarray()


class TpmsParams(Params):
    regime: Literal["title", "title+abstract", "full"] = "title+abstract"


def _doc_tokens(df: pl.DataFrame, regime: str) -> list[list[str]]:
    out = []
    for title, abstract, full in df.select("title", "abstract", pl.col("fulltext") if "fulltext" in df.columns else pl.lit(None)).iter_rows():
        toks = tokens(" ".join(t for t in (title or "", abstract or "" if regime != "title" else "") if t))
        if regime == "full" and full:
            # Full text arrives as word counts (the gold standard's ``content.text``).
            for word, n in json.loads(full).items():
                toks.extend([_stem(word)] * int(n))
        out.append(toks)
    return out


class Tpms(Scorer):
    name = "tpms"
    params_model = TpmsParams

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        regime = self.params.regime  # type: ignore[attr-defined]
        profile = benchmark.draws[draw]
        reviewers = sorted(profile["reviewer_id"].unique().to_list())
        by_reviewer = {r: [] for r in reviewers}
        for r, toks in zip(profile["reviewer_id"].to_list(), _doc_tokens(profile, regime), strict=True):
            by_reviewer[r].extend(toks)
        subs = benchmark.submissions.sort("paper_id")
        sim = tpms_matrix([by_reviewer[r] for r in reviewers], _doc_tokens(subs, regime))
        r_idx = {r: i for i, r in enumerate(reviewers)}
        p_idx = {p: i for i, p in enumerate(subs["paper_id"].to_list())}
        keep = needed.filter(pl.col("reviewer_id").is_in(list(r_idx)) & pl.col("paper_id").is_in(list(p_idx)))
        ri = np.array([r_idx[r] for r in keep["reviewer_id"].to_list()], dtype=np.int64)
        pi = np.array([p_idx[p] for p in keep["paper_id"].to_list()], dtype=np.int64)
        return keep.with_columns(pl.Series("score", sim[ri, pi] if len(ri) else np.zeros(0), dtype=pl.Float64)).select(list(SCORES_SCHEMA))
