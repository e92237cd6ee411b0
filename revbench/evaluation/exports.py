"""Predictions in the community's formats, beside revbench's own report.

RATE's evaluation script reads a flat JSON list per scorer and tuple kind::

    {"anchor_id", "positive_id", "negative_id", "type", "positive_score", "negative_score",
     "positive_ref_score", "negative_ref_score"}

the anchor being the paper of a paper-centric tuple (positive and negative are reviewers) or
the reviewer of a reviewer-centric one (positive and negative are papers); the positive side is
the one with the higher gold rating, ``*_ref_score`` are the gold ratings and ``type`` is
``paper_centric`` or ``reviewer_centric`` (the names the ``lrbench`` importer reads back). A
tuple whose scorer left a side unscored is left out and counted, never written with a null
score (RATE's script cannot read one).

trec_eval and ranx read TREC files: a run per scorer and split (``qid Q0 docid rank score tag``,
the paper as query and its rated reviewers as documents) and one qrels per benchmark
(``qid 0 docid rel``, rel the gold rating).

Layout under the report folder::

    predictions/<scorer>/<benchmark>_pc.json, _rc.json     RATE (``_d<n>`` per draw where several)
    trec/<benchmark>/qrels                                 every rated (paper, reviewer)
    trec/<benchmark>/<split>/<scorer>.run                  splits with a paper view
    exports.json                                           every file with its counts
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl

from revbench.evaluation.model import Benchmark, Scores, Split

log = logging.getLogger("revbench.evaluate")

PAPER_CENTRIC = "paper_centric"
REVIEWER_CENTRIC = "reviewer_centric"
RATE_SUFFIX = {PAPER_CENTRIC: "pc", REVIEWER_CENTRIC: "rc"}
RATE_KEYS = ("anchor_id", "positive_id", "negative_id", "type", "positive_score", "negative_score",
             "positive_ref_score", "negative_ref_score")
INDEX = "exports.json"


@dataclass(frozen=True)
class Exported:
    """One file written: where (relative to the report folder), what it holds, how many
    entries it has and how many were left out for want of a score."""

    path: str
    format: str
    benchmark: str
    scorer: str | None
    split: str | None
    written: int
    left_out: int


def file_name(name: str) -> str:
    """``name`` as one path component and one TREC token (letters, digits, ``-_.``)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _unique_scores(scores: pl.DataFrame) -> pl.DataFrame:
    # The first score of a pair counts, as the metrics read it (pairs.score_pairs).
    return scores.select("reviewer_id", "paper_id", "score").unique(subset=["reviewer_id", "paper_id"], keep="first",
                                                                     maintain_order=True)


def oriented_tuples(splits: list[Split]) -> pl.DataFrame:
    """Every tuple of ``splits`` in RATE's terms: ``type, anchor_id, positive_id, negative_id``,
    the (reviewer, paper) of each side and its gold rating, the higher-rated side as positive.

    The kind follows the tuple's shape (one paper on both sides: paper-centric; one reviewer:
    reviewer-centric), so a split that mixes both (LR-bench's flat files) is told apart."""
    parts = [s.tuples for s in splits if s.tuples is not None and s.tuples.height]
    if not parts:
        return pl.DataFrame(schema={"type": pl.Utf8, "anchor_id": pl.Utf8, "positive_id": pl.Utf8, "negative_id": pl.Utf8,
                                    "reviewer_pos": pl.Utf8, "paper_pos": pl.Utf8, "reviewer_neg": pl.Utf8,
                                    "paper_neg": pl.Utf8, "rating_pos": pl.Float64, "rating_neg": pl.Float64})
    t = pl.concat(parts)
    swap = pl.col("rating_pos") < pl.col("rating_neg")
    sides = ("reviewer", "paper", "rating")
    t = t.select(*[pl.when(swap).then(pl.col(f"{c}_neg")).otherwise(pl.col(f"{c}_pos")).alias(f"{c}_pos") for c in sides],
                 *[pl.when(swap).then(pl.col(f"{c}_pos")).otherwise(pl.col(f"{c}_neg")).alias(f"{c}_neg") for c in sides])
    pc = pl.col("paper_pos") == pl.col("paper_neg")
    return t.select(
        pl.when(pc).then(pl.lit(PAPER_CENTRIC)).otherwise(pl.lit(REVIEWER_CENTRIC)).alias("type"),
        pl.when(pc).then(pl.col("paper_pos")).otherwise(pl.col("reviewer_pos")).alias("anchor_id"),
        pl.when(pc).then(pl.col("reviewer_pos")).otherwise(pl.col("paper_pos")).alias("positive_id"),
        pl.when(pc).then(pl.col("reviewer_neg")).otherwise(pl.col("paper_neg")).alias("negative_id"),
        "reviewer_pos", "paper_pos", "reviewer_neg", "paper_neg", "rating_pos", "rating_neg",
    )


def rate_items(tuples: pl.DataFrame, scores: pl.DataFrame) -> tuple[list[dict[str, object]], int]:
    """RATE's flat items for ``tuples`` (from :func:`oriented_tuples`) under ``scores``, and how
    many tuples were left out because a side has no score."""
    s = _unique_scores(scores)
    j = (tuples.join(s, left_on=["reviewer_pos", "paper_pos"], right_on=["reviewer_id", "paper_id"], how="left")
         .rename({"score": "positive_score"})
         .join(s, left_on=["reviewer_neg", "paper_neg"], right_on=["reviewer_id", "paper_id"], how="left")
         .rename({"score": "negative_score"}))
    # A NaN score is no score, as the evaluator counts it: left out, never written as NaN.
    scored = j.filter(pl.col("positive_score").is_not_null() & pl.col("negative_score").is_not_null()
                      & pl.col("positive_score").is_not_nan() & pl.col("negative_score").is_not_nan())
    items = scored.select(*RATE_KEYS[:6], pl.col("rating_pos").alias("positive_ref_score"),
                          pl.col("rating_neg").alias("negative_ref_score")).to_dicts()
    for item in items:  # gold levels as RATE's own files write them: 5, not 5.0
        for key in ("positive_ref_score", "negative_ref_score"):
            if float(item[key]).is_integer():
                item[key] = int(item[key])
    return items, j.height - scored.height


def paper_view(split: Split) -> pl.DataFrame:
    """``paper_id, reviewer_id, rating`` of a split seen from the papers: its pointwise ratings,
    or both sides of its paper-centric tuples (a pair's first rating where it repeats)."""
    if split.ratings is not None:
        return split.ratings.select("paper_id", "reviewer_id", "rating")
    t = oriented_tuples([split]).filter(pl.col("type") == PAPER_CENTRIC)
    sides = [t.select(pl.col("anchor_id").alias("paper_id"), pl.col(f"{side}_id").alias("reviewer_id"),
                      pl.col(f"rating_{s}").alias("rating")) for side, s in (("positive", "pos"), ("negative", "neg"))]
    return pl.concat(sides).unique(["paper_id", "reviewer_id"], keep="first", maintain_order=True)


def trec_run(view: pl.DataFrame, scores: pl.DataFrame, tag: str) -> tuple[list[str], int]:
    """TREC run lines of a paper view under ``scores`` and the number of rated pairs left
    unscored. Each paper's reviewers are ranked by score, equal scores by reviewer id, so the
    rank column never depends on row order."""
    j = view.join(_unique_scores(scores), on=["reviewer_id", "paper_id"], how="left")
    scored = j.filter(pl.col("score").is_not_null() & pl.col("score").is_not_nan()).sort(
        ["paper_id", "score", "reviewer_id"], descending=[False, True, False])
    ranked = scored.with_columns(pl.int_range(1, pl.len() + 1).over("paper_id").alias("rank"))
    lines = [f"{p} Q0 {r} {k} {float(s)!r} {tag}"
             for p, r, s, k in ranked.select("paper_id", "reviewer_id", "score", "rank").iter_rows()]
    return lines, j.height - scored.height


def trec_qrels(views: list[pl.DataFrame]) -> list[str]:
    """TREC qrels lines of every rated (paper, reviewer) of the views, the gold rating as an
    integer level (a pair rated in two views keeps its first rating)."""
    if not views:
        return []
    q = pl.concat(views).unique(["paper_id", "reviewer_id"], keep="first", maintain_order=True).sort("paper_id", "reviewer_id")
    return [f"{p} 0 {r} {int(round(x))}" for p, r, x in q.iter_rows()]


def _has_space(view: pl.DataFrame) -> bool:
    return any(view[c].str.contains(r"\s").any() for c in ("paper_id", "reviewer_id"))


def _write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def _rate_files(benchmark: Benchmark, runs: list[Scores], report_dir: Path) -> list[Exported]:
    tuples = oriented_tuples(benchmark.splits)
    out: list[Exported] = []
    if not tuples.height:
        return out
    bname = file_name(benchmark.name)
    for s in runs:
        for d, draw in enumerate(s.draws):
            suffix = f"_d{d + 1}" if len(s.draws) > 1 else ""
            for kind, short in RATE_SUFFIX.items():
                these = tuples.filter(pl.col("type") == kind)
                if not these.height:
                    continue
                items, left_out = rate_items(these, draw)
                rel = Path("predictions") / file_name(s.scorer) / f"{bname}_{short}{suffix}.json"
                (report_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                (report_dir / rel).write_text(json.dumps(items, indent=1))
                out.append(Exported(rel.as_posix(), "rate", benchmark.name, s.scorer, None, len(items), left_out))
    return out


def _trec_files(benchmark: Benchmark, runs: list[Scores], report_dir: Path) -> list[Exported]:
    views = [(s.name, paper_view(s)) for s in benchmark.splits]
    views = [(name, v) for name, v in views if v.height]
    if not views:
        return []
    if any(_has_space(v) for _, v in views):
        # TREC files are split on whitespace: an id holding a space would shift every column.
        log.warning("%s: an id holds whitespace; no TREC files written", benchmark.name)
        return []
    base = Path("trec") / file_name(benchmark.name)
    qrels = trec_qrels([v for _, v in views])
    _write_lines(report_dir / base / "qrels", qrels)
    out = [Exported((base / "qrels").as_posix(), "trec_qrels", benchmark.name, None, None, len(qrels), 0)]
    for split, view in views:
        for s in runs:
            for d, draw in enumerate(s.draws):
                suffix = f"_d{d + 1}" if len(s.draws) > 1 else ""
                lines, left_out = trec_run(view, draw, file_name(s.scorer))
                rel = base / file_name(split) / f"{file_name(s.scorer)}{suffix}.run"
                _write_lines(report_dir / rel, lines)
                out.append(Exported(rel.as_posix(), "trec_run", benchmark.name, s.scorer, split, len(lines), left_out))
    return out


def export_formats(benchmark: Benchmark, runs: list[Scores], report_dir: Path) -> list[Exported]:
    """Every scorer's predictions on ``benchmark`` as RATE files (where it has tuples) and TREC
    runs with the benchmark's qrels (where it has a paper view), listed in ``exports.json``
    with what each left out; one warning says how many files left entries out (each is named at debug level)."""
    # ranx can write TREC files, but its Run.save re-sorts each query with an unstable sort (tied
    # scores land in no stated order) and importing ranx costs seconds; the format is one line.
    written = _rate_files(benchmark, runs, report_dir) + _trec_files(benchmark, runs, report_dir)
    short = [e for e in written if e.left_out]
    for e in short:  # each file in the detail (-v); one line says it by default, exports.json lists them
        log.debug("%s: %d entries left out (no score for a side), %d written", e.path, e.left_out, e.written)
    if short:
        log.warning("%s: %d of %d exported files left entries out (no score for a side; %d entries in all): "
                    "%s lists each with its count", benchmark.name, len(short), len(written),
                    sum(e.left_out for e in short), report_dir / INDEX)
    index = report_dir / INDEX
    try:
        kept = [e for e in json.loads(index.read_text()) if e.get("benchmark") != benchmark.name]
    except (OSError, ValueError, AttributeError):
        kept = []  # no index yet (or not ours): this run's entries start it
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text(json.dumps(kept + [asdict(e) for e in written], indent=1))
    return written
