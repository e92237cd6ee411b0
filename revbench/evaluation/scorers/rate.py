"""RATE's keyword profile: a reviewer is the sentence "The reviewer's research keywords
include: k1, k2, ..." over the keywords of all their papers (duplicates kept, so recurring
topics weigh more), embedded once and compared by cosine with the paper's title and abstract.

Keywords come from the benchmark's keywords file (LR-bench ``keywords.json``), else from the
LLM with the keyword prompt, else from an offline extractor (top TF-IDF terms of each paper).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import polars as pl

from revbench.clients.llm import LlmClient, LlmUnavailable
from revbench.embeddings import DEFAULT_MODEL, EmbeddingCache
from revbench.evaluation.model import SCORES_SCHEMA, Benchmark
from revbench.evaluation.scorers.base import Params, Scorer, paper_text, submissions_of
from revbench.retry import PermanentError, TransientError
from revbench.templates import render

PREFIX = "The reviewer's research keywords include: "


def offline_keywords(texts: list[str], per_paper: int = 6) -> list[list[str]]:
    """Top TF-IDF unigrams and bigrams of each text (English stop words removed)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if not texts:
        return []
    vec = TfidfVectorizer(stop_words="english", ngram_range=(1, 2), min_df=1, sublinear_tf=True)
    m = vec.fit_transform(texts)
    vocab = np.array(vec.get_feature_names_out())
    out = []
    for i in range(m.shape[0]):
        row = m.getrow(i)
        top = row.indices[np.argsort(-row.data, kind="stable")][:per_paper]
        out.append(vocab[top].tolist())
    return out


class RateParams(Params):
    model: str = DEFAULT_MODEL
    keywords: Literal["auto", "file", "llm", "offline"] = "auto"


class Rate(Scorer):
    name = "rate"
    params_model = RateParams

    def services(self) -> tuple[str, ...]:
        mode = self.params.keywords  # type: ignore[attr-defined]
        return ("llm",) if mode == "llm" or (mode == "auto" and self.context.settings.llm.base_url) else ()

    def _keywords(self, benchmark: Benchmark, profile: pl.DataFrame) -> list[list[str]]:
        mode = self.params.keywords  # type: ignore[attr-defined]
        titles = profile["title"].fill_null("").to_list()
        texts = paper_text(profile)
        found: list[list[str] | None] = [None] * len(titles)
        if mode in ("auto", "file"):
            for i, t in enumerate(titles):
                if t in benchmark.keywords:
                    found[i] = [k.strip() for k in benchmark.keywords[t].split(",") if k.strip()]
        if mode in ("auto", "llm"):
            settings = self.context.settings
            try:
                client = LlmClient(settings.llm, settings.http, cache_dir=self.context.cache_dir)
            except LlmUnavailable:
                if mode == "llm":
                    raise
                client = None
            if client is not None:
                for i, row in enumerate(profile.iter_rows(named=True)):
                    if found[i] is None:
                        prompt, version = render("prompts/keywords.j2", paper=row)
                        try:
                            answer = client.complete(prompt, meta={"template": "prompts/keywords.j2", "template_version": version})
                        except (TransientError, PermanentError):
                            continue
                        kws = [k.strip(" .") for k in answer.strip().splitlines()[-1].split(",") if k.strip(" .")]
                        found[i] = kws or None
        missing = [i for i, f in enumerate(found) if f is None]
        if missing:
            extracted = offline_keywords([texts[i] for i in missing])
            for i, kws in zip(missing, extracted, strict=True):
                found[i] = kws
        return [f or [] for f in found]

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        profile = benchmark.draws[draw]
        keywords = self._keywords(benchmark, profile)
        per_reviewer: dict[str, list[str]] = {}
        for r, kws in zip(profile["reviewer_id"].to_list(), keywords, strict=True):
            per_reviewer.setdefault(r, []).extend(kws)
        reviewers = sorted(per_reviewer)
        cache = EmbeddingCache.shared(self.context.cache_dir, self.params.model)  # type: ignore[attr-defined]
        rv = cache.embed([PREFIX + ", ".join(per_reviewer[r]) for r in reviewers])
        subs = submissions_of(benchmark, needed)
        pv = cache.embed(paper_text(subs))
        sim = rv @ pv.T
        r_idx = {r: i for i, r in enumerate(reviewers)}
        p_idx = {p: i for i, p in enumerate(subs["paper_id"].to_list())}
        rows = [
            {"reviewer_id": r, "paper_id": p, "score": float(sim[r_idx[r], p_idx[p]])}
            for r, p in needed.iter_rows() if r in r_idx and p in p_idx
        ]
        return pl.DataFrame(rows, schema=SCORES_SCHEMA) if rows else pl.DataFrame(schema=SCORES_SCHEMA)
