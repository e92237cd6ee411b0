"""TPMS: TF-IDF cosine between a reviewer's concatenated papers and a submission.

As the gold-standard authors define it: text split on non-letters after accents are folded,
lower-cased, one-letter tokens and stop words dropped, Porter-stemmed; a reviewer is one
document (all profile papers); over all N documents (reviewers and submissions)
``idf(w) = ln(N / df(w))``; a term present in a document weighs ``(0.5 + 0.5 tf/max_tf) idf``;
the score is the cosine of the two weight vectors. Sparse and vectorised: one matrix product
per draw instead of a loop over pairs; each distinct text is tokenised once per call, however
many profile draws share it.

Two tokenisations (parameter ``compat``):

- ``revbench`` (default): the typographic ligatures ``ﬀ ﬁ ﬂ`` are folded to ``ff fi fl``, so
  "signiﬁcantly" is one word, as it reads.
- ``reference``: exactly the gold-standard code under Python 3, where its replacement table
  holds the ligatures as UTF-8 byte sequences decoded to three characters each
  (``"\\xef\\xac\\x81"``) and so never matches a real ligature; NFD leaves the ligature in place
  and the split on non-letters cuts the word there ("signi", "cantly").
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from revbench.evaluation.model import SCORES_SCHEMA, Benchmark, Scores
from revbench.evaluation.scorers.base import Params, Scorer
from revbench.evaluation.stemming import stem

_SPLIT = re.compile(r"[^a-zA-Z]+")
_COMMON = {"æ": "ae", "ø": "o", "Ø": "o", "ß": "ss", "¨": "o"}
_FOLD = {
    "revbench": str.maketrans({**_COMMON, "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl"}),
    # The three-character keys are what the reference's byte-string keys become in Python 3.
    "reference": [*_COMMON.items(), ("\xef\xac\x80", "ff"), ("\xef\xac\x81", "fi"), ("\xef\xac\x82", "fl")],
}
COMPAT = ("revbench", "reference")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """The gold standard's TPMS stop list (``lists/tpms_stopwords.txt``)."""
    path = Path(__file__).resolve().parent / "lists" / "tpms_stopwords.txt"
    return frozenset(w for line in path.read_text().splitlines() if (w := line.strip()) and not w.startswith("#"))


def fold(text: str, compat: str = "revbench") -> str:
    """Replace the special letters, then drop accents (NFD, combining marks removed)."""
    table = _FOLD[compat]
    if isinstance(table, dict):
        text = text.translate(table)
    else:
        for old, new in table:
            text = text.replace(old, new)
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def tokens(text: str, compat: str = "revbench") -> list[str]:
    """The TPMS analyser: fold, split on non-letters, lower, drop short and stop words, stem."""
    stop = stop_words()
    out = []
    for w in _SPLIT.split(fold(text, compat)):
        w = w.lower()
        if len(w) > 1 and w not in stop:
            out.append(stem(w))
    return out


def _triplets(docs: list[list[str]], vocab: dict[str, int]) -> tuple[list[int], list[int]]:
    rows, cols = [], []
    for i, d in enumerate(docs):
        for w in d:
            rows.append(i)
            cols.append(vocab.setdefault(w, len(vocab)))
    return rows, cols


def _weigh(m, idf: np.ndarray):  # type: ignore[no-untyped-def]
    """Rows of ``(0.5 + 0.5 tf/max_tf) idf`` scaled to unit length (empty rows stay zero)."""
    from scipy import sparse

    if 0 in m.shape:  # no documents, or not one word in any (scipy cannot reduce an empty matrix)
        return m
    row_max = m.max(axis=1).toarray().ravel()
    m.data = (0.5 + 0.5 * m.data / np.repeat(np.where(row_max > 0, row_max, 1), np.diff(m.indptr))) * idf[m.indices]
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    return sparse.diags(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)) @ m


def tpms_matrix(docs_a: list[list[str]], docs_b: list[list[str]]) -> np.ndarray:
    """Cosine TPMS similarity of every document of ``a`` with every document of ``b`` (IDF over both)."""
    from scipy import sparse

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
    compat: Literal["revbench", "reference"] = "revbench"


class Tpms(Scorer):
    name = "tpms"
    params_model = TpmsParams

    def score(self, benchmark: Benchmark) -> Scores:
        # Profile draws share most of their papers: tokenise each distinct text once per call.
        self._memo: dict[tuple[str | None, ...], list[str]] = {}
        return super().score(benchmark)

    def _doc_tokens(self, df: pl.DataFrame) -> list[list[str]]:
        regime, compat = self.params.regime, self.params.compat  # type: ignore[attr-defined]
        memo = getattr(self, "_memo", {})
        full_col = pl.col("fulltext") if "fulltext" in df.columns else pl.lit(None, dtype=pl.Utf8)
        out = []
        for title, abstract, full in df.select("title", "abstract", full_col).iter_rows():
            key = (title, abstract if regime != "title" else None, full if regime == "full" else None)
            toks = memo.get(key)
            if toks is None:
                toks = tokens(" ".join(t for t in key[:2] if t), compat)
                if regime == "full" and full:
                    # Full text arrives as word counts (the gold standard's ``content.text``).
                    for word, n in json.loads(full).items():
                        toks.extend([stem(word)] * int(n))
                memo[key] = toks
            out.append(toks)
        return out

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        profile = benchmark.draws[draw]
        reviewers = sorted(profile["reviewer_id"].unique().to_list())
        by_reviewer: dict[str, list[str]] = {r: [] for r in reviewers}
        for r, toks in zip(profile["reviewer_id"].to_list(), self._doc_tokens(profile), strict=True):
            by_reviewer[r].extend(toks)
        subs = benchmark.submissions.sort("paper_id")
        sim = tpms_matrix([by_reviewer[r] for r in reviewers], self._doc_tokens(subs))
        r_idx = {r: i for i, r in enumerate(reviewers)}
        p_idx = {p: i for i, p in enumerate(subs["paper_id"].to_list())}
        keep = needed.filter(pl.col("reviewer_id").is_in(list(r_idx)) & pl.col("paper_id").is_in(list(p_idx)))
        ri = np.array([r_idx[r] for r in keep["reviewer_id"].to_list()], dtype=np.int64)
        pi = np.array([p_idx[p] for p in keep["paper_id"].to_list()], dtype=np.int64)
        return keep.with_columns(pl.Series("score", sim[ri, pi] if len(ri) else np.zeros(0), dtype=pl.Float64)).select(list(SCORES_SCHEMA))
