"""RATE's keyword profile: a reviewer is the sentence "The reviewer's research keywords
include: k1, k2, ..." over the keywords of all their papers (duplicates kept, so recurring
topics weigh more), embedded once and compared by cosine with the paper's title and abstract.

Keywords come from the benchmark's keywords file (LR-bench ``keywords.json``), else from the
LLM with the keyword prompt (a strict JSON answer), else from YAKE. ``model`` may be a
sentence-transformers name or path, or a LoRA adapter trained by ``revbench train``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal

import polars as pl

from revbench.clients.llm import LlmClient, LlmUnavailable
from revbench.evaluation.model import SCORES_SCHEMA, Benchmark
from revbench.evaluation.scorers.base import (
    Params, Scorer, checked_ref, model_stamp, model_text, paper_text, submissions_of,
)
from revbench.ml.keywords import llm_keywords, profile_text, yake_keywords
from revbench.ml.models import DEFAULT_MODEL
from revbench.retry import PermanentError, TransientError
from revbench.templates import render

if TYPE_CHECKING:
    from revbench.ml.models import ModelRef


class RateParams(Params):
    model: str = DEFAULT_MODEL
    keywords: Literal["auto", "file", "llm", "offline"] = "auto"


class Rate(Scorer):
    name = "rate"
    params_model = RateParams

    @functools.cached_property
    def ref(self) -> ModelRef:
        """The encoder resolved once, when first needed (the embed flow builds this scorer only for
        its keyword-profile texts, which need no weights): the files its vectors and spec are of."""
        return checked_ref(self.context, self.params.model)  # type: ignore[attr-defined]

    def check(self, benchmark: Benchmark) -> None:
        """The encoder's weights missing, or not the recipe's, refuse before any scorer runs."""
        self.ref  # noqa: B018 - resolving is the check

    @property
    def spec(self) -> str:
        """Every parameter and the digest of the encoder's files."""
        return super().spec + model_stamp([self.ref])

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
            if client is not None and any(f is None for f in found):
                todo = profile.with_row_index("i").filter(pl.Series([f is None for f in found], dtype=pl.Boolean))
                got, _ = llm_keywords(client, todo.select(pl.col("i").cast(pl.Utf8).alias("paper_id"), "title", "abstract"),
                                      render, errors=(TransientError, PermanentError))
                for i, kws in got.items():
                    found[int(i)] = kws
        missing = [i for i, f in enumerate(found) if f is None]
        if missing:
            extracted = yake_keywords([texts[i] for i in missing])
            for i, kws in zip(missing, extracted, strict=True):
                found[i] = kws
        return [f or [] for f in found]

    def profiles(self, benchmark: Benchmark, draw: int) -> dict[str, str]:
        """Each reviewer's keyword-profile sentence under profile draw ``draw``."""
        profile = benchmark.draws[draw]
        keywords = self._keywords(benchmark, profile)
        per_reviewer: dict[str, list[str]] = {}
        for r, kws in zip(profile["reviewer_id"].to_list(), keywords, strict=True):
            per_reviewer.setdefault(r, []).extend(kws)
        return {r: profile_text(per_reviewer[r]) for r in sorted(per_reviewer)}

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        subs = submissions_of(benchmark, needed)
        if benchmark.draws[draw].height == 0 or subs.height == 0:
            return pl.DataFrame(schema=SCORES_SCHEMA)  # nothing to compare: every needed pair stays unscored
        profiles = self.profiles(benchmark, draw)
        reviewers = list(profiles)
        cache = self.embeddings(self.ref, benchmark)
        rv = cache.embed([profiles[r] for r in reviewers])
        pv = cache.embed(model_text(subs, self.params.model))  # type: ignore[attr-defined]
        sim = rv @ pv.T
        r_idx = {r: i for i, r in enumerate(reviewers)}
        p_idx = {p: i for i, p in enumerate(subs["paper_id"].to_list())}
        rows = [
            {"reviewer_id": r, "paper_id": p, "score": float(sim[r_idx[r], p_idx[p]])}
            for r, p in needed.iter_rows() if r in r_idx and p in p_idx
        ]
        return pl.DataFrame(rows, schema=SCORES_SCHEMA) if rows else pl.DataFrame(schema=SCORES_SCHEMA)
