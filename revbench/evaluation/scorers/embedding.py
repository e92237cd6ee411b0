"""Dense scorer: cosine between a submission and each of the reviewer's papers, pooled; or, for a
model ``A+B``, OpenReview's ensemble of two models (its production affinity is ``specter2+scincl``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np
import polars as pl
from pydantic import AfterValidator, Field, field_validator, model_validator

from revbench.evaluation.model import SCORES_SCHEMA, Benchmark
from revbench.evaluation.scorers import clustering
from revbench.evaluation.scorers.base import (
    Context, Params, Scorer, check_pooling, checked_refs, model_stamp, model_text, pair_entries, pooled_scores,
    submissions_of,
)
from revbench.ml.models import DEFAULT_MODEL
from revbench.ml.recipes import ensemble_parts

if TYPE_CHECKING:
    from revbench.ml.models import ModelRef

ATTENTION = "attention:"


def _check_pooling(how: str) -> str:
    if how.startswith(ATTENTION):
        from revbench.ml.recipes import attention_card

        attention_card(how.removeprefix(ATTENTION))  # one line when the folder holds no trained module
        return how
    if clustering.parse(how) is not None:  # needs the vectors, not only the similarities: pooled here
        return how
    return check_pooling(how)


class EmbeddingParams(Params):
    model: str = DEFAULT_MODEL
    """A model name (:mod:`revbench.ml.models`: a recipe such as ``specter2``, a
    sentence-transformers name or folder, a trained adapter, ``hashing``), or two joined by ``+``."""
    pooling: Annotated[str, AfterValidator(_check_pooling)] = "max"
    """Any pooling of :func:`revbench.evaluation.scorers.base.pool`; ``clustering[:K]`` or
    ``clustering_cross[:K]``: OpenReview's self-attention clustering (:mod:`.clustering`); or ``attention:DIR``: the
    submission attends over the reviewer's papers with the module ``revbench train --objective
    attention`` wrote to DIR (:mod:`revbench.ml.attention`)."""
    merge_alpha: float = Field(0.5, ge=0.0, le=1.0)
    """An ensemble's weight of its first model (the second gets ``1 - merge_alpha``)."""
    instruction: Literal["none", "semantic", "topic", "citation"] = "none"
    """UniPR's factor instruction put before each submission's text (``Instruct: ...\\nQuery: ``,
    ``templates/prompts/factor_instruction.j2``); profile papers are encoded as they are."""

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        parts = ensemble_parts(v)
        if len(parts) > 2 or not all(parts):
            raise ValueError("an ensemble joins two models with + (specter2+scincl)")
        return v

    @model_validator(mode="after")
    def _attention_on_its_base(self) -> EmbeddingParams:
        if self.pooling.startswith(ATTENTION):
            from revbench.ml.recipes import attention_card

            folder = self.pooling.removeprefix(ATTENTION)
            base = attention_card(folder)["base_model"]
            if self.model != base:
                raise ValueError(f"the attention module in {folder} was trained on {base}'s vectors; "
                                 f"score it with model={base}")
        return self

    @model_validator(mode="after")
    def _ensemble_pools_by_max(self) -> EmbeddingParams:
        if len(ensemble_parts(self.model)) == 2 and self.pooling != "max":
            raise ValueError(f"the ensemble {self.model} is OpenReview's, which pools each model by max over the "
                             f"reviewer's papers; pooling={self.pooling} would be another method")
        return self


def min_max(sim: np.ndarray) -> np.ndarray:
    """Scores rescaled to [0, 1] by the smallest and largest of the whole matrix (every
    submission against every profile paper); a constant matrix is clamped to [0, 1] instead."""
    if sim.size == 0:
        return sim
    lo, hi = float(sim.min()), float(sim.max())
    return np.clip(sim, 0.0, 1.0) if hi - lo == 0 else (sim - lo) / (hi - lo)


class Embedding(Scorer):
    """Cosine of unit vectors, pooled over the reviewer's papers by ``pooling``.

    With ``model=A+B`` (OpenReview's ensemble, openreview-expertise's specter2_scincl): per model
    the similarity of every submission to every profile paper of the draw, rescaled to [0, 1] by
    that matrix's minimum and maximum, the maximum over the reviewer's papers; then
    ``merge_alpha * A + (1 - merge_alpha) * B``, clamped to [0, 1] and rounded to 4 places."""

    name = "embedding"
    params_model = EmbeddingParams

    def __init__(self, params: Params, context: Context):
        super().__init__(params, context)
        self.refs: dict[str, ModelRef] = checked_refs(context, ensemble_parts(self.params.model))  # type: ignore[attr-defined]
        """Each model of the scorer, resolved once: the files its vectors and its spec are of."""

    @property
    def spec(self) -> str:
        """Every parameter, the digest of each model's files (``model_digest=A`` or ``A+B``),
        ``stand_in=true`` when any is a declared stand-in, and the factor instruction template's
        version when one is used."""
        out = super().spec + model_stamp(list(self.refs.values()))
        factor = self.params.instruction  # type: ignore[attr-defined]
        if factor == "none":
            return out
        from revbench.ml.recipes import instruction_prefix

        return f"{out},instruction_template=prompts/factor_instruction.j2@{instruction_prefix(factor)[1]}"

    def queries(self, subs: pl.DataFrame, model: str) -> list[str]:
        """The submissions' texts as ``model`` reads them, after the factor instruction if one is set."""
        texts = model_text(subs, model)
        factor = self.params.instruction  # type: ignore[attr-defined]
        if factor == "none":
            return texts
        from revbench.ml.recipes import instruction_prefix

        prefix, _ = instruction_prefix(factor)
        return [prefix + t for t in texts]

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        profile = benchmark.draws[draw]
        subs = submissions_of(benchmark, needed)
        if profile.height == 0 or subs.height == 0:
            return pl.DataFrame(schema=SCORES_SCHEMA)  # nothing to compare: every needed pair stays unscored
        p = self.params
        parts = ensemble_parts(p.model)  # type: ignore[attr-defined]
        sims = []
        for m in parts:
            cache = self.embeddings(self.refs[m], benchmark)
            sims.append(cache.embed(model_text(profile, m)) @ cache.embed(self.queries(subs, m)).T)
        ids = subs["paper_id"].to_list()
        if p.pooling.startswith(ATTENTION):  # type: ignore[attr-defined]
            cache = self.embeddings(self.refs[parts[0]], benchmark)
            return attended(p.pooling.removeprefix(ATTENTION), cache.embed(model_text(profile, parts[0])),  # type: ignore[attr-defined]
                            cache.embed(self.queries(subs, parts[0])), profile, ids, needed)
        cluster = clustering.parse(p.pooling)  # type: ignore[attr-defined]
        if cluster is not None:
            cache = self.embeddings(self.refs[parts[0]], benchmark)
            e = pair_entries(profile, ids, needed)
            rows = [e.rows[s:s + n] for s, n in zip(e.starts.tolist(), e.lengths.tolist(), strict=True)]
            got = clustering.scores(cache.embed(model_text(profile, parts[0])), cache.embed(self.queries(subs, parts[0])),
                                    rows, e.cols[e.starts] if len(e.starts) else e.cols, *cluster)
            return e.pairs.with_columns(pl.Series("score", got, dtype=pl.Float64)).select(list(SCORES_SCHEMA))
        if len(parts) == 1:
            return pooled_scores(sims[0], profile, ids, needed, p.pooling)  # type: ignore[attr-defined]
        a, b = (pooled_scores(min_max(s), profile, ids, needed, "max") for s in sims)
        both = a.join(b, on=["reviewer_id", "paper_id"], suffix="_b").sort("reviewer_id", "paper_id")
        return both.select("reviewer_id", "paper_id").with_columns(
            score=merge(both["score"].to_numpy(), both["score_b"].to_numpy(), p.merge_alpha))  # type: ignore[attr-defined]


def attended(folder: str, profile_vecs: np.ndarray, sub_vecs: np.ndarray, profile: pl.DataFrame, ids: list[str],
             needed: pl.DataFrame) -> pl.DataFrame:
    """Each needed pair scored by the attention module in ``folder`` over the reviewer's papers."""
    from revbench.ml.attention import attention_scores, load_attention

    pool, _ = load_attention(folder)
    e = pair_entries(profile, ids, needed)
    rows = [e.rows[s:s + n] for s, n in zip(e.starts.tolist(), e.lengths.tolist(), strict=True)]
    scores = attention_scores(pool, sub_vecs, profile_vecs, rows, e.cols[e.starts] if len(e.starts) else e.cols)
    return e.pairs.with_columns(pl.Series("score", scores, dtype=pl.Float64)).sort("reviewer_id", "paper_id")


def merge(a: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    """OpenReview's merge of two models' pooled scores: ``alpha * a + (1 - alpha) * b``, clamped
    to [0, 1], rounded to 4 places (half to even), in single precision as its tensors are."""
    m = a.astype(np.float32) * np.float32(alpha) + b.astype(np.float32) * np.float32(1 - alpha)
    m = np.clip(m, np.float32(0.0), np.float32(1.0))
    return (np.round(m * np.float32(10000)) / np.float32(10000)).astype(np.float64)
