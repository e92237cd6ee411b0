"""Predictions: scores computed elsewhere, as OpenReview ``{reviewer: {paper: score}}`` JSON,
OpenReview ``submission,profile,score`` CSV, or LR-bench's flat file (which carries its own
labels), every score a finite number and every pair given once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import InputError
from revbench.evaluation.importers.checks import DEFAULT_SCALE, finite_number, number_text, once, rating, read_json
from revbench.evaluation.model import (
    SCORES_SCHEMA,
    SPLIT_LR_PC,
    SPLIT_LR_RC,
    TUPLES_SCHEMA,
    Benchmark,
    Scores,
    Split,
    frame,
)
from revbench.files import file_sha256

LR_FLAT_KEYS = ("anchor_id", "positive_id", "negative_id", "positive_score", "negative_score",
                "positive_ref_score", "negative_ref_score")


def scores_from_json(data: Any, path: Path) -> pl.DataFrame:
    """``{reviewer: {paper: score}}`` as a scores frame; every score a finite number."""
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InputError(f"{path}: expected {{reviewer: {{paper: score}}}}")
    rows = [{"reviewer_id": str(r), "paper_id": str(p),
             "score": finite_number(s, f"{path} reviewer {r!r} paper {p!r}")}
            for r, d in data.items() for p, s in d.items()]
    return frame(rows, SCORES_SCHEMA)


def scores_from_csv(path: Path) -> pl.DataFrame:
    """OpenReview ``submission,profile,score`` rows (no header) as a scores frame."""
    try:
        raw = pl.read_csv(path, has_header=False, infer_schema_length=0)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    if raw.width != 3:
        raise InputError(f"{path}: expected 3 columns submission,profile,score; found {raw.width}")
    rows = []
    first_row: dict[tuple[str, str], int] = {}
    for row_no, (p, r, s) in enumerate(raw.iter_rows(), start=1):
        once(first_row, ((r or "").lstrip("~"), p), row_no, f"{path} row {row_no}", "score")
        try:
            value = number_text(s, f"{path} row {row_no} score")
        except (TypeError, ValueError):
            raise InputError(f"{path} row {row_no}: score {s!r} is not a number") from None
        rows.append({"reviewer_id": (r or "").lstrip("~"), "paper_id": p,
                     "score": finite_number(value, f"{path} row {row_no} score")})
    return frame(rows, SCORES_SCHEMA)


def is_lr_flat(path: Path) -> bool:
    """Whether ``path`` looks like LR-bench's flat predictions (judged by its first 2,000 bytes)."""
    if path.suffix != ".json" or not path.is_file():
        return False
    head = path.read_bytes()[:2000].decode("utf-8", errors="replace")
    return '"anchor_id"' in head and '"positive_ref_score"' in head


def load_lr_flat(path: Path) -> tuple[Split, pl.DataFrame]:
    """LR-bench's flat predictions carry their own labels: a split and the scores on it."""
    items = read_json(path)
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a list of tuples with {', '.join(LR_FLAT_KEYS)}")
    tuples, scores = [], []
    kinds = set()
    first_item: dict[tuple[str, str, str, str], int] = {}
    first_score: dict[tuple[str, str], tuple[float, int]] = {}
    for i, t in enumerate(items):
        where = f"{path} item {i}"
        missing = [k for k in LR_FLAT_KEYS if not isinstance(t, dict) or k not in t]
        if missing:
            raise InputError(f"{where}: missing {', '.join(missing)}")
        kind = t.get("type", "paper_centric")
        if kind not in ("paper_centric", "reviewer_centric"):
            raise InputError(f"{where}: type {kind!r} is neither paper_centric nor reviewer_centric")
        kinds.add(kind)
        a, p, n = str(t["anchor_id"]), str(t["positive_id"]), str(t["negative_id"])
        if (kind, a, p, n) in first_item:
            raise InputError(f"{where}: the same tuple ({a}, {p}, {n}) as item {first_item[kind, a, p, n]}; "
                             "give each tuple once")
        first_item[kind, a, p, n] = i
        pos, neg = ((p, a), (n, a)) if kind == "paper_centric" else ((a, p), (a, n))
        for pair, field in ((pos, "positive_score"), (neg, "negative_score")):
            value = finite_number(t[field], f"{where} {field}")
            earlier = first_score.setdefault(pair, (value, i))
            if earlier[0] != value:
                raise InputError(f"{where} {field}: reviewer {pair[0]!r} and paper {pair[1]!r} have score {value:g} here "
                                 f"and {earlier[0]:g} in item {earlier[1]}; one pair has one score")
        tuples.append(dict(reviewer_pos=pos[0], paper_pos=pos[1], reviewer_neg=neg[0], paper_neg=neg[1],
                           rating_pos=rating(t["positive_ref_score"], f"{where} positive_ref_score", DEFAULT_SCALE),
                           rating_neg=rating(t["negative_ref_score"], f"{where} negative_ref_score", DEFAULT_SCALE),
                           cluster=a))
        scores.append({"reviewer_id": pos[0], "paper_id": pos[1], "score": finite_number(t["positive_score"], f"{where} positive_score")})
        scores.append({"reviewer_id": neg[0], "paper_id": neg[1], "score": finite_number(t["negative_score"], f"{where} negative_score")})
    if not tuples:
        raise InputError(f"{path}: no tuples")
    name = SPLIT_LR_PC if kinds == {"paper_centric"} else SPLIT_LR_RC if kinds == {"reviewer_centric"} else "lr_mixed"
    return Split(name, tuples=frame(tuples, TUPLES_SCHEMA)), frame(scores, SCORES_SCHEMA).unique(
        ["reviewer_id", "paper_id"], keep="first", maintain_order=True
    )


def load_predictions(path: Path, name: str, benchmark: Benchmark) -> Scores:
    """Scores computed elsewhere, one frame per draw of ``benchmark``.

    A file serves every draw; a directory is searched per draw for the gold standard's
    ``<name>_d_20_<x>*.json`` or ``d_20_<x>/predictions_<name>.json``.
    """
    def read(p: Path) -> pl.DataFrame:
        if p.suffix == ".csv":
            return scores_from_csv(p)
        if is_lr_flat(p):
            return load_lr_flat(p)[1]
        return scores_from_json(read_json(p), p)

    if path.is_file():
        scores = read(path)
        return Scores(name, [scores] * len(benchmark.draws), f"predictions:{path.name}", file_sha256(path))
    draws, files = [], []
    for x in range(1, len(benchmark.draws) + 1):
        found = sorted(path.glob(f"{name}_d_20_{x}_*.json")) + sorted(path.glob(f"{name}_d_20_{x}.json"))
        found += [p for p in (path / f"d_20_{x}" / f"predictions_{name}.json",) if p.exists()]
        if not found:
            raise InputError(f"{path}: no predictions of {name!r} for draw d_20_{x}")
        files.append(found[0])
        draws.append(read(found[0]))
    return Scores(name, draws, f"predictions:{path.name}/", file_sha256(*files))


def coverage(benchmark: Benchmark, scores: Scores) -> tuple[int, int, tuple[str, str] | None]:
    """(covered, needed, an example of a missing pair) of the (reviewer, paper) pairs the
    benchmark's splits need, in the least covered draw."""
    needed = benchmark.pairs_needed()
    worst = (needed.height, needed.height, None)
    for draw in scores.draws:
        got = needed.join(draw.select("reviewer_id", "paper_id").unique(), on=["reviewer_id", "paper_id"], how="semi")
        if got.height < worst[0]:
            missing = needed.join(got, on=["reviewer_id", "paper_id"], how="anti").row(0)
            worst = (got.height, needed.height, (missing[0], missing[1]))
    return worst
