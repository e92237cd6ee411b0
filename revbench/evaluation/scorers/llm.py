"""Zero-shot LLM scoring with two prompt templates (the gold standard's 0-100 and RATE's 1-5)."""

from __future__ import annotations

import re
from typing import Literal

import polars as pl
from pydantic import Field

from revbench.clients.llm import LlmClient
from revbench.evaluation.model import SCORES_SCHEMA, Benchmark
from revbench.evaluation.scorers.base import Params, Scorer
from revbench.retry import PermanentError, TransientError
from revbench.templates import render

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
RANGES = {"goldstandard": (0.0, 100.0), "bars": (1.0, 5.0)}
TEMPLATES = {"goldstandard": "prompts/score_goldstandard.j2", "bars": "prompts/score_bars.j2"}


def parse_score(answer: str, low: float, high: float) -> float | None:
    """The last number in the answer when it lies in [low, high] (models reason before the
    final line; a number out of range means the format was not followed)."""
    numbers = _NUMBER.findall(answer.replace(",", " "))
    if not numbers:
        return None
    value = float(numbers[-1])
    return value if low <= value <= high else None


class LlmParams(Params):
    prompt: Literal["goldstandard", "bars"] = "bars"
    max_profile_papers: int = Field(10, ge=1)


class Llm(Scorer):
    name = "llm"
    params_model = LlmParams

    def services(self) -> tuple[str, ...]:
        return ("llm",)

    def client(self) -> LlmClient:
        settings = self.context.settings
        return LlmClient(settings.llm, settings.http, cache_dir=self.context.cache_dir)

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        p = self.params
        client = self.client()
        low, high = RANGES[p.prompt]  # type: ignore[attr-defined]
        profile = benchmark.draws[draw]
        papers = {r["paper_id"]: r for r in benchmark.submissions.iter_rows(named=True)}
        by_reviewer: dict[str, list[dict]] = {}
        for row in profile.sort("year", descending=True, nulls_last=True).iter_rows(named=True):
            by_reviewer.setdefault(row["reviewer_id"], []).append(row)
        rows = []
        for r, pid in needed.iter_rows():
            if r not in by_reviewer or pid not in papers:
                continue
            prompt, version = render(
                TEMPLATES[p.prompt], profile=by_reviewer[r][: p.max_profile_papers], paper=papers[pid]  # type: ignore[attr-defined]
            )
            score = None
            for attempt in range(2):  # a second, uncached ask when the answer did not follow the format
                try:
                    answer = client.complete(prompt, meta={"template": TEMPLATES[p.prompt], "template_version": version},  # type: ignore[attr-defined]
                                             use_cache=attempt == 0)
                except (TransientError, PermanentError):
                    break
                score = parse_score(answer, low, high)
                if score is not None:
                    break
            if score is not None:
                rows.append({"reviewer_id": r, "paper_id": pid, "score": score})
        return pl.DataFrame(rows, schema=SCORES_SCHEMA) if rows else pl.DataFrame(schema=SCORES_SCHEMA)
