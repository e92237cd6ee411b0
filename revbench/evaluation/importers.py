"""Importers: public benchmark layouts and prediction files into the evaluation model."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from revbench.evaluation.model import (
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    RATINGS_SCHEMA,
    SCORES_SCHEMA,
    SPLIT_GOLD,
    SPLIT_LR_PC,
    SPLIT_LR_RC,
    SPLIT_POINTWISE,
    TUPLES_SCHEMA,
    Benchmark,
    Scores,
    Split,
    frame,
)

if TYPE_CHECKING:
    from revbench.warehouse import Warehouse


class ImportError_(ValueError):
    """A dataset is not laid out as expected; the message says what was looked for."""


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _year(value: Any) -> int | None:
    try:
        return int(str(value)[:4]) if value not in (None, "") else None
    except ValueError:
        return None


def _note(note: dict[str, Any], fallback_id: str | None = None) -> dict[str, Any]:
    content = note.get("content", note)
    def val(k: str) -> Any:
        v = content.get(k)
        return v.get("value") if isinstance(v, dict) else v
    return {
        "paper_id": str(note.get("id") or fallback_id or hashlib.sha1(str(val("title")).encode()).hexdigest()),
        "title": val("title") or "",
        "abstract": val("abstract") or "",
        "year": _year(val("year") or note.get("year")),
    }


def read_openreview_dir(d: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``submissions.json`` and ``archives/~<id>.jsonl`` of one OpenReview-format dataset."""
    sub_path = d / "submissions.json"
    if not sub_path.exists():
        raise ImportError_(f"{d}: no submissions.json")
    raw = json.loads(sub_path.read_text())
    notes = raw.values() if isinstance(raw, dict) else raw
    submissions = frame([_note(n) for n in notes], PAPERS_SCHEMA)
    rows = []
    archives = d / "archives"
    if not archives.is_dir():
        raise ImportError_(f"{d}: no archives/ folder of reviewer profiles")
    for f in sorted(archives.glob("*.jsonl")):
        reviewer = f.stem.lstrip("~")
        for line in f.read_text().splitlines():
            if line.strip():
                rows.append({"reviewer_id": reviewer, **_note(json.loads(line))})
    return submissions, frame(rows, PROFILE_SCHEMA)


def load_goldstandard(path: Path) -> Benchmark:
    """The CMU gold standard: the public repository (``data/evaluations.csv`` and
    ``evaluation_datasets/d_20_<x>``) or a slice laid out flat (``evaluations.tsv``, ``d_20_<x>``)."""
    candidates = [path / "data" / "evaluations.csv", path / "evaluations.csv", path / "evaluations.tsv"]
    ev = next((c for c in candidates if c.exists()), None)
    if ev is None:
        raise ImportError_(f"{path}: none of {', '.join(str(c) for c in candidates)} exists")
    table = pl.read_csv(ev, separator="\t", infer_schema_length=0)
    ratings = []
    for row in table.iter_rows(named=True):
        for i in range(1, 11):
            paper, exp = row.get(f"Paper{i}"), row.get(f"Expertise{i}")
            if paper and exp:
                ratings.append({"reviewer_id": str(row["ParticipantID"]), "paper_id": paper, "rating": float(exp)})
    base = path / "evaluation_datasets" if (path / "evaluation_datasets").is_dir() else path
    draw_dirs = sorted(
        (d for d in base.iterdir() if re.fullmatch(r"d_20_\d+", d.name)), key=lambda d: int(d.name.rsplit("_", 1)[1])
    )
    if not draw_dirs:
        raise ImportError_(f"{base}: no d_20_<x> evaluation datasets")
    subs, draws = [], []
    for d in draw_dirs:
        s, prof = read_openreview_dir(d)
        subs.append(s)
        draws.append(prof)
    submissions = pl.concat(subs).unique("paper_id", keep="first").sort("paper_id")
    ratings_df = frame(ratings, RATINGS_SCHEMA)
    reviewers = set(draws[0]["reviewer_id"].unique())
    ratings_df = ratings_df.filter(pl.col("reviewer_id").is_in(list(reviewers)))
    return Benchmark(
        name="goldstandard", version=_digest(ev), submissions=submissions, draws=draws,
        splits=[Split(SPLIT_GOLD, ratings=ratings_df)],
    )


def _lr_file(path: Path, stem: str) -> Path | None:
    for name in (f"{stem}.json", f"{stem}.sample.json"):
        if (path / name).exists():
            return path / name
    return None


def _lr_tuples(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    tuples, papers, profiles = [], [], []
    for t in items:
        a, pos, neg = t["anchor"], t["positive"], t["negative"]
        if "author_id" in pos:  # paper-centric: anchor paper, candidate reviewers
            pid = str(a["paper_id"])
            papers.append({"paper_id": pid, "title": a.get("paper_title", a.get("title", "")), "abstract": a.get("abstract", "")})
            for side in (pos, neg):
                for p in side.get("papers", []):
                    profiles.append({"reviewer_id": str(side["author_id"]), **_note(p)})
            tuples.append(dict(reviewer_pos=str(pos["author_id"]), paper_pos=pid, reviewer_neg=str(neg["author_id"]),
                               paper_neg=pid, rating_pos=float(pos["score"]), rating_neg=float(neg["score"]), cluster=pid))
        else:  # reviewer-centric: anchor reviewer, candidate papers
            rid = str(a["author_id"])
            for p in a.get("papers", []):
                profiles.append({"reviewer_id": rid, **_note(p)})
            for side in (pos, neg):
                papers.append({"paper_id": str(side["paper_id"]), "title": side.get("paper_title", side.get("title", "")),
                               "abstract": side.get("abstract", "")})
            tuples.append(dict(reviewer_pos=rid, paper_pos=str(pos["paper_id"]), reviewer_neg=rid,
                               paper_neg=str(neg["paper_id"]), rating_pos=float(pos["score"]),
                               rating_neg=float(neg["score"]), cluster=rid))
    return tuples, papers, profiles


def load_lrbench(path: Path) -> Benchmark:
    """LR-bench: ``evaluations_pc.json`` and/or ``evaluations_rc.json`` (anchor, positive,
    negative), with ``keywords.json`` when present."""
    splits, papers, profiles, files = [], [], [], []
    for stem, split_name in (("evaluations_pc", SPLIT_LR_PC), ("evaluations_rc", SPLIT_LR_RC)):
        f = _lr_file(path, stem)
        if f is None:
            continue
        files.append(f)
        t, p, prof = _lr_tuples(json.loads(f.read_text()))
        papers += p
        profiles += prof
        splits.append(Split(split_name, tuples=frame(t, TUPLES_SCHEMA)))
    if not splits:
        raise ImportError_(f"{path}: neither evaluations_pc.json nor evaluations_rc.json")
    keywords: dict[str, str] = {}
    kf = _lr_file(path, "keywords")
    if kf:
        keywords = {k["paper_title"]: k["keywords"] for k in json.loads(kf.read_text())}
    return Benchmark(
        name="lrbench", version=_digest(*files),
        submissions=frame(papers, PAPERS_SCHEMA).unique("paper_id", keep="first").sort("paper_id"),
        draws=[frame(profiles, PROFILE_SCHEMA).unique(["reviewer_id", "paper_id"], keep="first", maintain_order=True)],
        splits=splits, keywords=keywords,
    )


def load_openreview(path: Path) -> Benchmark:
    """An OpenReview-format dataset with ``ratings.csv`` (``reviewer,paper,rating``)."""
    submissions, profiles = read_openreview_dir(path)
    rf = path / "ratings.csv"
    if not rf.exists():
        raise ImportError_(f"{path}: no ratings.csv (reviewer,paper,rating)")
    r = pl.read_csv(rf, schema_overrides={"reviewer": pl.Utf8, "paper": pl.Utf8, "rating": pl.Float64})
    ratings = r.select(pl.col("reviewer").str.strip_chars_start("~").alias("reviewer_id"), pl.col("paper").alias("paper_id"), "rating")
    return Benchmark(
        name="openreview", version=_digest(path / "submissions.json", rf), submissions=submissions, draws=[profiles],
        splits=[Split(SPLIT_POINTWISE, ratings=ratings, candidate_lists=True)],
    )


def scores_from_json(data: dict[str, dict[str, float]]) -> pl.DataFrame:
    """``{reviewer: {paper: score}}`` as a scores frame."""
    rows = [{"reviewer_id": str(r), "paper_id": str(p), "score": float(s)} for r, d in data.items() for p, s in d.items()]
    return frame(rows, SCORES_SCHEMA)


def scores_from_csv(path: Path) -> pl.DataFrame:
    """OpenReview ``submission,profile,score`` rows (no header) as a scores frame."""
    df = pl.read_csv(path, has_header=False, new_columns=["paper_id", "reviewer_id", "score"],
                     schema_overrides={"paper_id": pl.Utf8, "reviewer_id": pl.Utf8, "score": pl.Float64})
    return df.select(pl.col("reviewer_id").str.strip_chars_start("~"), "paper_id", "score")


def is_lr_flat(path: Path) -> bool:
    if path.suffix != ".json" or not path.is_file():
        return False
    head = path.read_text()[:2000]
    return '"anchor_id"' in head and '"positive_ref_score"' in head


def load_lr_flat(path: Path) -> tuple[Split, pl.DataFrame]:
    """LR-bench's flat predictions carry their own labels: a split and the scores on it."""
    items = json.loads(path.read_text())
    tuples, scores = [], []
    kinds = {t.get("type", "paper_centric") for t in items}
    for t in items:
        a, p, n = str(t["anchor_id"]), str(t["positive_id"]), str(t["negative_id"])
        if t.get("type", "paper_centric") == "paper_centric":
            pos, neg = (p, a), (n, a)
        else:
            pos, neg = (a, p), (a, n)
        tuples.append(dict(reviewer_pos=pos[0], paper_pos=pos[1], reviewer_neg=neg[0], paper_neg=neg[1],
                           rating_pos=float(t["positive_ref_score"]), rating_neg=float(t["negative_ref_score"]), cluster=a))
        scores.append({"reviewer_id": pos[0], "paper_id": pos[1], "score": float(t["positive_score"])})
        scores.append({"reviewer_id": neg[0], "paper_id": neg[1], "score": float(t["negative_score"])})
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
        return scores_from_json(json.loads(p.read_text()))

    if path.is_file():
        return Scores(name, [read(path)] * len(benchmark.draws))
    draws = []
    for x in range(1, len(benchmark.draws) + 1):
        found = sorted(path.glob(f"{name}_d_20_{x}_*.json")) + sorted(path.glob(f"{name}_d_20_{x}.json"))
        found += [p for p in (path / f"d_20_{x}" / f"predictions_{name}.json",) if p.exists()]
        if not found:
            raise ImportError_(f"{path}: no predictions of {name!r} for draw d_20_{x}")
        draws.append(read(found[0]))
    return Scores(name, draws)


def load_warehouse(path: Path, warehouse: Warehouse | None = None) -> Benchmark:
    """The warehouse's own benchmark: its corpus as submissions and profiles, its cleaned
    ratings as the pointwise split (with candidate lists) once the ratings stage has filled them.
    ``warehouse`` is the caller's open session when ``path`` is that warehouse (DuckDB allows one
    writer per file, so the run's own connection is used instead of a second one)."""
    from revbench.warehouse import Warehouse

    if warehouse is not None and Path(path).resolve() == warehouse.path.resolve():
        has_ratings = warehouse.has_table("ratings")
    else:
        with Warehouse.open(path, read_only=True) as wh:
            has_ratings = wh.has_table("ratings")
    if not has_ratings:
        raise ImportError_(
            f"the warehouse at {path} holds no ratings yet; they arrive with the survey and ratings stages "
            "(until then, evaluate on goldstandard, lrbench or openreview data)"
        )
    raise ImportError_(f"the warehouse at {path} has ratings but this revbench cannot read their layout")


def load_benchmark(kind: str, path: Path, warehouse: Warehouse | None = None) -> Benchmark:
    """A benchmark by kind: ``goldstandard``, ``lrbench``, ``openreview`` or ``warehouse``."""
    if not path.exists():
        raise ImportError_(f"{path} does not exist")
    if kind == "warehouse":
        return load_warehouse(path, warehouse)
    loaders = {"goldstandard": load_goldstandard, "lrbench": load_lrbench, "openreview": load_openreview}
    if kind not in loaders:
        raise ImportError_(f"unknown benchmark kind {kind!r}; expected one of {sorted(loaders)} or warehouse")
    return loaders[kind](path)
