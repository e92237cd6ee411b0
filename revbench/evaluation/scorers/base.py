"""Scorer registry: each scorer is registered by name with typed parameters."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import numpy as np
import polars as pl
from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from revbench.evaluation.model import SCORES_SCHEMA, Benchmark, Scores

if TYPE_CHECKING:
    from revbench.ml.embeddings import EmbeddingCache
    from revbench.settings import Settings

REGISTRY: dict[str, type[Scorer]] = {}
"""Scorer classes by name, filled as their modules are imported."""
SCORER_MODULES: dict[str, str] = {
    "trivial": "revbench.evaluation.scorers.trivial",
    "tpms": "revbench.evaluation.scorers.tpms",
    "bm25": "revbench.evaluation.scorers.lexical",
    "embedding": "revbench.evaluation.scorers.embedding",
    "rate": "revbench.evaluation.scorers.rate",
    "llm": "revbench.evaluation.scorers.llm",
}
"""Where each registered scorer lives; a module is imported only when its scorer is asked for
(the LLM and embedding scorers pull in clients and models a TPMS run never needs)."""


class Params(BaseModel):
    """Parameters of a scorer; unknown names are an error, not a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def check_pooling(how: str) -> str:
    """A pooling spec ``pool`` accepts, checked when the scorer is built (not after embedding)."""
    kind, _, arg = how.partition(":")
    try:
        if kind in ("max", "mean", "acl_top3") and not arg:
            return how
        if kind == "percentile" and 0 <= float(arg or 75) <= 100:
            return how
        if kind == "topk_mean" and int(arg or 3) >= 1:
            return how
    except ValueError:
        pass
    raise ValueError(f"unknown pooling {how!r}; expected max, mean, percentile:Q (0-100), topk_mean:K (K >= 1) or acl_top3")


Pooling = Annotated[str, AfterValidator(check_pooling)]


@dataclass
class Context:
    """What scorers may use besides the benchmark: the run's settings (LLM endpoint, HTTP policy)
    and the cache directory."""

    settings: Settings

    @property
    def cache_dir(self) -> Path:
        return self.settings.cache_dir


class Scorer(ABC):
    """Computes ``score(reviewer, paper)`` for the pairs a benchmark needs, per draw."""

    name: ClassVar[str]
    params_model: ClassVar[type[Params]] = Params

    def __init__(self, params: Params, context: Context):
        self.params = params
        self.context = context

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if getattr(cls, "name", None):
            REGISTRY[cls.name] = cls

    @property
    def label(self) -> str:
        """The scorer as written in a spec, with its non-default parameters."""
        changed = self.params.model_dump(exclude_defaults=True)
        if not changed:
            return self.name
        return self.name + ":" + ",".join(f"{k}={v}" for k, v in sorted(changed.items()))

    @property
    def spec(self) -> str:
        """The scorer with every parameter, defaults included: what exactly ran."""
        params = self.params.model_dump()
        return self.name + (":" + ",".join(f"{k}={v}" for k, v in sorted(params.items())) if params else "")

    def score(self, benchmark: Benchmark) -> Scores:
        """Scores for every (reviewer, paper) a split needs, in every draw."""
        needed = benchmark.pairs_needed()
        return Scores(self.label, [self.score_draw(benchmark, d, needed) for d in range(len(benchmark.draws))], self.spec)

    def services(self) -> tuple[str, ...]:
        """External services this scorer calls (probed before it runs)."""
        return ()

    def embeddings(self, model: str, benchmark: Benchmark) -> EmbeddingCache:
        """The shared embedding cache of ``model``, with the embed flow's export of ``benchmark``
        (when there is one) loaded into it, so its texts are not encoded again."""
        from revbench.ml.embeddings import export_dir, settings_cache

        cache = settings_cache(self.context.settings, model)
        cache.preload(export_dir(self.context.settings.data_dir, benchmark.name, benchmark.version, model, cache.runtime))
        return cache

    @abstractmethod
    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        """``reviewer_id, paper_id, score`` for the ``needed`` pairs under profile draw ``draw``."""


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``name:key=value,key=value`` -> (name, params)."""
    name, _, rest = spec.partition(":")
    params: dict[str, str] = {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"scorer parameter {part!r} in {spec!r} is not key=value")
        params[key.strip()] = value.strip()
    return name.strip(), params


def make_scorer(spec: str, context: Context) -> Scorer:
    """Build a registered scorer from a spec such as ``embedding:pooling=max``."""
    import importlib

    name, raw = parse_spec(spec)
    if name not in SCORER_MODULES:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(sorted(SCORER_MODULES))}")
    importlib.import_module(SCORER_MODULES[name])
    cls = REGISTRY[name]
    try:
        params = cls.params_model(**raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ValueError(f"bad parameters for {name}: {where}={err.get('input')!r}: {err['msg'].removeprefix('Value error, ')}") from None
    return cls(params, context)


def paper_text(df: pl.DataFrame) -> list[str]:
    """Title and abstract joined, the text every text scorer reads."""
    return (df["title"].fill_null("") + " " + df["abstract"].fill_null("")).str.strip_chars().to_list()


def pool(sim: np.ndarray, how: str) -> float:
    """Reduce a reviewer's paper-to-paper similarities to one score.

    ``max``; ``mean``; ``percentile:q`` (linear interpolation); ``topk_mean:k``; ``acl_top3``
    = s1 + s2/2 + s3/3 over the three best, zero-padded.
    """
    if sim.size == 0:
        return 0.0
    kind, _, arg = how.partition(":")
    if kind == "max":
        return float(sim.max())
    if kind == "mean":
        return float(sim.mean())
    if kind == "percentile":
        return float(np.percentile(sim, float(arg or 75), method="linear"))
    if kind == "topk_mean":
        k = int(arg or 3)
        return float(np.sort(sim)[::-1][:k].mean())
    if kind == "acl_top3":
        top = np.concatenate([np.sort(sim)[::-1][:3], np.zeros(3)])[:3]
        return float(top[0] + top[1] / 2 + top[2] / 3)
    raise ValueError(f"unknown pooling {how!r}")


def pooled_scores(sim: np.ndarray, profile: pl.DataFrame, papers: list[str], needed: pl.DataFrame, how: str) -> pl.DataFrame:
    """Pool a (profile paper x submission) similarity matrix into needed (reviewer, paper) scores."""
    col = {p: i for i, p in enumerate(papers)}
    rows_of: dict[str, np.ndarray] = {}
    reviewers = profile["reviewer_id"].to_numpy()
    for r in np.unique(reviewers):
        rows_of[r] = np.flatnonzero(reviewers == r)
    out = []
    for r, p in needed.iter_rows():
        if r in rows_of and p in col:
            out.append({"reviewer_id": r, "paper_id": p, "score": pool(sim[rows_of[r], col[p]], how)})
    return pl.DataFrame(out, schema=SCORES_SCHEMA) if out else pl.DataFrame(schema=SCORES_SCHEMA)


def submissions_of(benchmark: Benchmark, needed: pl.DataFrame) -> pl.DataFrame:
    ids = needed["paper_id"].unique()
    return benchmark.submissions.filter(pl.col("paper_id").is_in(ids.implode())).sort("paper_id")
