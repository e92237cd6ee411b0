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
    from revbench.ml.models import ModelRef
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
    "citation": "revbench.evaluation.scorers.graph",
    "topic": "revbench.evaluation.scorers.graph",
    "coupling": "revbench.evaluation.scorers.graph_links",
    "cocitation": "revbench.evaluation.scorers.graph_links",
    "cof": "revbench.evaluation.scorers.cof",
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
        if kind in ("max", "mean", "sum", "acl_top3") and not arg:
            return how
        if kind == "percentile" and 0 <= float(arg or 75) <= 100:
            return how
        if kind == "topk_mean" and int(arg or 3) >= 1:
            return how
    except ValueError:
        pass
    raise ValueError(f"unknown pooling {how!r}; expected max, mean, sum, percentile:Q (0-100), topk_mean:K (K >= 1) or acl_top3")


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

    def check(self, benchmark: Benchmark) -> None:
        """Refuse ``benchmark`` in one line when it lacks what this scorer reads (asked before any
        scorer of a run spends its time); every input a text scorer reads is always there."""

    def embeddings(self, model: str | ModelRef, benchmark: Benchmark) -> EmbeddingCache:
        """The shared embedding cache of ``model`` (a name, or the model the scorer resolved when it
        was built), with the embed flow's export of ``benchmark`` by the same files (when there is
        one) loaded into it, so its texts are not encoded again."""
        from revbench.ml.embeddings import export_dir, settings_cache

        cache = settings_cache(self.context.settings, model)
        cache.preload(export_dir(self.context.settings.data_dir, benchmark.name, benchmark.version, cache.ref, cache.runtime))
        return cache

    @abstractmethod
    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        """``reviewer_id, paper_id, score`` for the ``needed`` pairs under profile draw ``draw``."""


def checked_refs(context: Context, models: list[str]) -> dict[str, ModelRef]:
    """Each of ``models`` resolved once into the files its vectors are of, refused in one line
    (before any scorer has spent its time, and before torch loads) naming every model whose files
    are not here (:func:`revbench.ml.presence.absent_line`: a recipe's weights, a hub name not
    cached while downloads are off), or files that are not a recipe's published model (unless
    ``REVBENCH_EMBED__STAND_INS`` declares stand-ins)."""
    from revbench.errors import UsageError
    from revbench.ml.backends import runtime_for
    from revbench.ml.models import check_identity, model_ref
    from revbench.ml.presence import absent_line
    from revbench.ml.recipes import MODELS_SUBDIR

    s = context.settings
    line = absent_line(models, s.cache_dir / MODELS_SUBDIR)  # all of them at once: an ensemble names both
    if line:
        raise UsageError(line)
    refs: dict[str, ModelRef] = {}
    for model in models:
        refs[model] = ref = model_ref(model, runtime_for(s.embed.backend, s.cache_dir, model),
                                      models_dir=s.cache_dir / MODELS_SUBDIR)
        check_identity(ref, s.embed.stand_ins)  # a random BERT where a recipe looks is not that recipe
    return refs


def checked_ref(context: Context, model: str) -> ModelRef:
    """``model`` resolved and checked as :func:`checked_refs` does."""
    return checked_refs(context, [model])[model]


def model_stamp(refs: list[ModelRef]) -> str:
    """What a spec adds for the models it read: ``,model_digest=A`` (``A+B`` for two), and
    ``,stand_in=true`` when any is a declared stand-in."""
    out = f",model_digest={'+'.join(r.short for r in refs)}"
    return out + (",stand_in=true" if any(r.stand_in for r in refs) else "")


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
        msg = err["msg"].removeprefix("Value error, ")
        if not where:  # a rule over several parameters: the message names them
            raise ValueError(f"bad parameters for {name}: {msg}") from None
        raise ValueError(f"bad parameters for {name}: {where}={err.get('input')!r}: {msg}") from None
    return cls(params, context)


def paper_text(df: pl.DataFrame) -> list[str]:
    """Title and abstract joined, the text every text scorer reads."""
    return (df["title"].fill_null("") + " " + df["abstract"].fill_null("")).str.strip_chars().to_list()


def model_text(df: pl.DataFrame, model: str) -> list[str]:
    """Each paper's text as ``model`` reads it: its recipe's input format where the name is a
    recipe (:mod:`revbench.ml.recipes`), else :func:`paper_text`."""
    from revbench.ml.recipes import recipe, texts

    if recipe(model) is None:
        return paper_text(df)
    return texts(model, df["title"].to_list(), df["abstract"].to_list())


def pool(sim: np.ndarray, how: str) -> float:
    """Reduce a reviewer's paper-to-paper similarities to one score.

    ``max``; ``mean``; ``sum``; ``percentile:q`` (linear interpolation); ``topk_mean:k``; ``acl_top3``
    = s1 + s2/2 + s3/3 over the three best, zero-padded.
    """
    if sim.size == 0:
        return 0.0
    return float(pool_rows(sim.reshape(1, -1), how)[0])


def pool_rows(sims: np.ndarray, how: str) -> np.ndarray:
    """:func:`pool` of each row of ``sims`` at once (every row one reviewer's similarities to one
    paper); each row's result is exactly :func:`pool` of that row alone: numpy reduces a
    contiguous row as it reduces the same values on their own."""
    kind, _, arg = how.partition(":")
    if kind == "max":
        return sims.max(axis=1)
    if kind == "mean":
        return sims.mean(axis=1)
    if kind == "sum":
        return sims.sum(axis=1)
    if kind == "percentile":
        return np.percentile(sims, float(arg or 75), axis=1, method="linear")
    best = np.ascontiguousarray(np.sort(sims, axis=1)[:, ::-1])
    if kind == "topk_mean":
        return np.ascontiguousarray(best[:, :int(arg or 3)]).mean(axis=1)
    if kind == "acl_top3":
        top = np.concatenate([best[:, :3], np.zeros((len(best), 3))], axis=1)[:, :3]
        return top[:, 0] + top[:, 1] / 2 + top[:, 2] / 3
    raise ValueError(f"unknown pooling {how!r}")


@dataclass
class PairEntries:
    """The needed (reviewer, paper) pairs a profile can score, each with its reviewer's profile
    rows: entry ``e`` compares profile row ``rows[e]`` with submission column ``cols[e]``; pair
    ``i`` owns the entries ``starts[i]`` to ``starts[i] + lengths[i]`` (its reviewer's rows in
    profile order). A scorer computes only these entries, not every profile row against every
    submission."""

    pairs: pl.DataFrame
    rows: np.ndarray
    cols: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray


def pair_entries(profile: pl.DataFrame, papers: list[str], needed: pl.DataFrame) -> PairEntries:
    """The entries of ``needed``'s pairs whose reviewer has a profile row and whose paper is in
    ``papers`` (the submission columns), in ``needed``'s order; other pairs are left out."""
    rows_of = (profile.select("reviewer_id").with_row_index("row")
               .group_by("reviewer_id").agg(pl.col("row").sort()))
    col_of = pl.DataFrame({"paper_id": papers}, schema={"paper_id": pl.Utf8}).with_row_index("col").unique("paper_id", keep="last")
    pairs = (needed.select("reviewer_id", "paper_id").with_row_index("i")
             .join(rows_of, on="reviewer_id").join(col_of, on="paper_id").sort("i"))
    lengths = pairs["row"].list.len().to_numpy().astype(np.int64)
    rows = pairs["row"].explode().to_numpy().astype(np.int64) if pairs.height else np.zeros(0, dtype=np.int64)
    return PairEntries(pairs.select("reviewer_id", "paper_id"), rows, np.repeat(pairs["col"].to_numpy().astype(np.int64), lengths),
                       np.cumsum(lengths) - lengths, lengths)


def pool_entries(entries: PairEntries, values: np.ndarray, how: str) -> pl.DataFrame:
    """``reviewer_id, paper_id, score``: each pair's entry ``values`` pooled (``how``)."""
    out = np.zeros(entries.pairs.height)
    # pairs whose reviewers have as many papers pool as one matrix, one row each
    for n in np.unique(entries.lengths):
        at = np.flatnonzero(entries.lengths == n)
        out[at] = pool_rows(values[entries.starts[at, None] + np.arange(n)], how)
    return entries.pairs.with_columns(pl.Series("score", out, dtype=pl.Float64)).select(list(SCORES_SCHEMA))


def pooled_scores(sim: np.ndarray, profile: pl.DataFrame, papers: list[str], needed: pl.DataFrame, how: str) -> pl.DataFrame:
    """Pool a (profile paper x submission) similarity matrix into needed (reviewer, paper) scores."""
    entries = pair_entries(profile, papers, needed)
    return pool_entries(entries, sim[entries.rows, entries.cols], how)


def submissions_of(benchmark: Benchmark, needed: pl.DataFrame) -> pl.DataFrame:
    ids = needed["paper_id"].unique()
    return benchmark.submissions.filter(pl.col("paper_id").is_in(ids.implode())).sort("paper_id")
