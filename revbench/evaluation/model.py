"""The evaluation boundary: typed records for benchmarks, scores and results.

Every source (the CMU gold standard, LR-bench, OpenReview-format datasets, the warehouse) is
imported into a ``Benchmark``; every scorer answers with ``Scores``; every metric reads
``PairSet``s derived from the two. Frames inside the records are polars with fixed schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

PAPERS_SCHEMA = {"paper_id": pl.Utf8, "title": pl.Utf8, "abstract": pl.Utf8, "year": pl.Int64}
PROFILE_SCHEMA = {"reviewer_id": pl.Utf8, **PAPERS_SCHEMA}
RATINGS_SCHEMA = {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "rating": pl.Float64}
TUPLES_SCHEMA = {
    "reviewer_pos": pl.Utf8, "paper_pos": pl.Utf8, "reviewer_neg": pl.Utf8, "paper_neg": pl.Utf8,
    "rating_pos": pl.Float64, "rating_neg": pl.Float64, "cluster": pl.Utf8,
}
SCORES_SCHEMA = {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "score": pl.Float64}
GRAPH_CITATIONS_SCHEMA = {"citing_id": pl.Utf8, "cited_id": pl.Utf8, "is_influential": pl.Boolean, "source": pl.Utf8}
GRAPH_TOPICS_SCHEMA = {"paper_id": pl.Utf8, "scheme": pl.Utf8, "topic": pl.Utf8, "score": pl.Float64}
GRAPH_INSTITUTIONS_SCHEMA = {"reviewer_id": pl.Utf8, "institution_key": pl.Utf8, "first_year": pl.Int64, "last_year": pl.Int64}
GRAPH_COAUTHORS_SCHEMA = {"reviewer_id": pl.Utf8, "other_id": pl.Utf8}
GRAPH_HISTORY_SCHEMA = {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "year": pl.Int64}
GRAPH_REFERENCES_SCHEMA = {"citing_id": pl.Utf8, "cited_key": pl.Utf8}

SPLIT_LR_PC = "lr_paper_centric"
SPLIT_LR_RC = "lr_reviewer_centric"
SPLIT_GOLD = "goldstandard"
SPLIT_POINTWISE = "pointwise"
SPLIT_PAPER_CENTRIC = "paper_centric"
SPLIT_REVIEWER_CENTRIC = "reviewer_centric"
SPLIT_AVERAGE = "average"
SPLIT_ASSIGNMENT_CANDIDATES, SPLIT_ASSIGNMENT_POOL = "assignment:candidates", "assignment:pool"
"""The splits of the assignment's rows (``revbench.evaluation.assignment_eval``): named here so
that the report reads them without loading the assignment itself."""

UNIT_PAPER, UNIT_REVIEWER, UNIT_ALL = "paper", "reviewer", "all"
UNITS = (UNIT_PAPER, UNIT_REVIEWER, UNIT_ALL)
"""What a split's pairs hold fixed: ``paper`` (two candidates of one paper: paper-centric tuples),
``reviewer`` (two papers of one reviewer: the pointwise ratings, reviewer-centric tuples) or
``all`` (pairs of either kind). A score compared within a paper need only order that paper's
candidates; one compared within a reviewer, that reviewer's papers."""


def frame(rows: list[dict[str, object]] | None, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Rows as a frame with exactly ``schema`` (missing keys become null)."""
    if not rows:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(rows, schema=schema, strict=False)


@dataclass
class Split:
    """Rated material of one split: pointwise ratings (pairs are formed within a reviewer) or
    ready-made tuples (LR-bench); ``cluster`` is the unit the bootstrap resamples."""

    name: str
    ratings: pl.DataFrame | None = None
    tuples: pl.DataFrame | None = None
    candidate_lists: bool = False
    """True where each paper has its own list of rated candidate reviewers (ranking metrics apply)."""


@dataclass
class BenchmarkGraph:
    """The scholarly graph around a benchmark's papers and reviewers (ids as the benchmark has them)."""

    citations: pl.DataFrame
    """``citing_id, cited_id, is_influential, source``: one edge per citing/cited pair among the
    benchmark's papers (submissions and profile papers); ``is_influential`` true when any source
    says so, null when none gives it; ``source`` every source that gave the edge, comma-joined."""
    topics: pl.DataFrame
    """``paper_id, scheme, topic, score``: the papers' topics per scheme (score null where the
    source gives no confidence)."""
    reviewer_institutions: pl.DataFrame
    """``reviewer_id, institution_key, first_year, last_year``: where each reviewer was, and when."""
    coauthors: pl.DataFrame
    """``reviewer_id, other_id``: reviewers who wrote a paper together, both directions."""
    history: pl.DataFrame | None = None
    """``reviewer_id, paper_id, year``: every paper of each reviewer the benchmark knows (the
    warehouse's: all their corpus papers and the Semantic Scholar history papers that are corpus
    papers), not capped as the text profile is; the graph scorers read the reviewer's papers from
    the profile draw and this together. None: the benchmark carries no history (the profile draw
    alone). ``citations`` and ``topics`` cover these papers too."""
    references: pl.DataFrame | None = None
    """``citing_id, cited_key``: each paper's reference list, one row per cited work, to any work:
    every reference of the benchmark's papers (submissions, profiles, history) and every reference
    of another paper to one of them. ``cited_key`` is the benchmark's id of the cited paper when
    it is one, else a prefixed key of the work (``doi:``, ``arxiv:``, ``title:``, ``s2:``,
    ``openalex:``). None: the benchmark carries no reference lists (the coupling and co-citation
    scorers refuse it)."""


@dataclass
class Benchmark:
    """Everything a scorer and the metrics need from one dataset."""

    name: str
    version: str
    submissions: pl.DataFrame
    """The papers to be matched: ``paper_id, title, abstract, year``."""
    draws: list[pl.DataFrame]
    """Reviewer profiles, one frame per draw: ``reviewer_id, paper_id, title, abstract, year``.
    Most datasets have one draw; the gold standard has ten."""
    splits: list[Split]
    keywords: dict[str, str] = field(default_factory=dict)
    """Optional keywords per paper title (LR-bench ``keywords.json``)."""
    scale: tuple[float, float] = (1.0, 5.0)
    """The rating scale every rating lies in."""
    digest: str | None = None
    """sha256 of what fixes the exact files read, where the benchmark has one (a release's
    ``manifest.json``): its results are stored with it."""
    dropped: dict[str, int] = field(default_factory=dict)
    """What the importer left out, by reason (``"archives: blank title" -> 2``)."""
    graph: BenchmarkGraph | None = None
    """Citations, topics, institutions and co-authorship around the benchmark; None where the
    benchmark carries no graph (the graph scorers refuse such a benchmark)."""
    labels_from: str | None = None
    """The rule that made the labels where no person rated (a weak benchmark's ``citations`` or
    ``authorship``); None for rated benchmarks. A scorer reading what the rule read is warned about."""
    pool: pl.DataFrame | None = None
    """``reviewer_id, paper_id``: every pair of the benchmark's reviewer pool an assignment may
    use (conflicts left out), rated or not; None where the benchmark has no pool (only its rated
    candidates are known). :mod:`revbench.evaluation.assignment_eval` reads it."""

    def pairs_needed(self) -> pl.DataFrame:
        """Every (reviewer, paper) whose score some split needs."""
        parts = []
        for s in self.splits:
            if s.ratings is not None:
                parts.append(s.ratings.select("reviewer_id", "paper_id"))
            if s.tuples is not None:
                parts.append(s.tuples.select(pl.col("reviewer_pos").alias("reviewer_id"), pl.col("paper_pos").alias("paper_id")))
                parts.append(s.tuples.select(pl.col("reviewer_neg").alias("reviewer_id"), pl.col("paper_neg").alias("paper_id")))
        if not parts:
            return frame(None, {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8})
        return pl.concat(parts).unique().sort("reviewer_id", "paper_id")


@dataclass
class Scores:
    """A scorer's answer: one frame ``reviewer_id, paper_id, score`` per draw."""

    scorer: str
    draws: list[pl.DataFrame]
    spec: str = ""
    """What produced the scores: the scorer with all its parameters, or the predictions file."""
    source_sha256: str | None = None
    """sha256 of the predictions file(s) the scores were read from."""
    companions: list[Scores] = field(default_factory=list)
    """Further score sets the same scorer computed on the way, each evaluated as a scorer of its
    own (``cof``'s factors alone and each factor left out)."""
    by_unit: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    """Scores made for one comparison unit (:data:`UNITS`), one frame per draw, where a scorer's
    numbers compare only within a unit (``cof``'s reciprocal ranks, taken among one paper's
    candidates or one reviewer's papers): a split that compares within that unit reads them
    instead of ``draws``."""
    basis: dict[str, str] = field(default_factory=dict)
    """Per unit, what the scores of that unit stand on (``cof``: how it fused), printed with every
    row read from them."""

    def for_unit(self, unit: str) -> list[pl.DataFrame]:
        """The draws a split comparing within ``unit`` reads: :attr:`by_unit`'s when the scorer made
        scores for it, else :attr:`draws`."""
        return self.by_unit.get(unit, self.draws)

    def to_openreview(self, draw: int = 0) -> dict[str, dict[str, float]]:
        """``{reviewer: {paper: score}}``, the format the gold standard and OpenReview read."""
        out: dict[str, dict[str, float]] = {}
        for r, p, s in self.draws[draw].iter_rows():
            out.setdefault(r, {})[p] = s
        return out


@dataclass(frozen=True)
class MetricValue:
    """One number of the results table, with its interval and the count it rests on."""

    benchmark: str
    split: str
    scorer: str
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    spec: str = ""
    coverage: float | None = None
    """Share of the split's ordered pairs the scores covered (mean over draws)."""
    predictions_sha256: str | None = None
    ties: float | None = None
    """Share of the compared pairs the scorer tied (equal scores: it decided nothing there, and
    the loss counts each such pair half wrong, accuracy wholly); mean over draws; None for
    metrics that are not pairwise."""
    basis: str = ""
    """What the row stands on where it is not plain scores (``cof``: the unit it fused within)."""
    baseline: str | None = None
    """For a paired difference (``scorer`` ``bm25 - tpms``), the scorer it is a difference to
    (``tpms``); None for a scorer's own row. This, not the name, marks a difference: a scorer's own
    label may hold " - " too (``rate:model=/models/RATE - v2``)."""


DIFFERENCE = " - "
"""What joins a paired difference's two names (``bm25 - tpms``, and their specs): for the eye
only, since :attr:`MetricValue.baseline` marks the row (:func:`is_difference`)."""


def difference_name(scorer: str, baseline: str) -> str:
    """The ``scorer`` (or ``spec``) shown for ``scorer``'s paired difference to ``baseline``."""
    return f"{scorer}{DIFFERENCE}{baseline}"


def is_difference() -> pl.Expr:
    """True on the paired-difference rows of a results frame (``results_frame``, ``eval_results``):
    those with a ``baseline``. A frame without the column raises rather than reading names."""
    return pl.col("baseline").is_not_null()


def baseline_of(row: MetricValue | Mapping[str, Any]) -> str | None:
    """The scorer a result row (a ``MetricValue``, a ``results.json`` row) is a paired difference
    to, None for a scorer's own row. A ``results.json`` row written before the field existed (no
    ``baseline`` key) is read as every reader read it then: the part of its scorer's name after
    the first " - " (the warehouse's migration 20 backfills its older rows the same way)."""
    if isinstance(row, MetricValue):
        return row.baseline
    if "baseline" in row:
        return row["baseline"]
    _, joined, baseline = str(row["scorer"]).partition(DIFFERENCE)
    return baseline if joined else None


def is_difference_row(row: MetricValue | Mapping[str, Any]) -> bool:
    """:func:`is_difference` of one row (see :func:`baseline_of` for rows older than the field)."""
    return baseline_of(row) is not None
