"""How like the real world a SYNTHETIC world is: each target of ``revbench/reference/world_targets.txt``
(a figure measured on real data, its source and a tolerance) beside the world's own value.

What the world's truth gives is measured here directly, in about a second (:func:`world_measures`):
the answers pool-like pairs would get (:mod:`revbench.synth.pool_like`), profile sizes, references per
paper, self-citation, references within the citing paper's field, the chance that a paper cites a
person by that person's true level, bibliographic coupling against true levels. What only the
pipeline gives (the kept ratings, the scorers' losses on the demo's benchmark) comes from a data
folder the demo filled (:func:`pipeline_measures`; the application reads its warehouse, which this
layer may not open), when there is one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.reference import lines
from revbench.synth.expertise import Expertise
from revbench.synth.pool_like import pool_like_pairs

TARGETS_FILE = "world_targets.txt"
"""The targets, in ``revbench/reference`` (shipped data: the demo prints the table)."""
LEVELS = 5


@dataclass(frozen=True)
class Target:
    """One line of the targets file."""

    id: str
    measured_on: str
    """``truth`` (the world's files and truth) or ``demo`` (a data folder the demo filled)."""
    target: list[float]
    check: str
    """``tv`` (total variation distance to a distribution), ``abs`` (absolute difference), ``range``
    (``tolerance`` is ``low high``), ``min`` (at least ``tolerance``), ``rising`` (non-decreasing over
    the levels, the last at least ``tolerance`` times the first)."""
    tolerance: list[float]
    what: str
    source: str
    method: str


def load_targets() -> list[Target]:
    """Every target, in the file's order."""
    out = []
    for line in lines(TARGETS_FILE):
        cells = [c.strip() for c in line.split("|")]
        if len(cells) != 8:
            raise ValueError(f"{TARGETS_FILE}: 8 cells expected, not {len(cells)}: {line[:80]}")
        tid, on, target, check, tolerance, what, source, method = cells
        out.append(Target(tid, on, [float(v) for v in target.split() if v != "-"], check,
                          [float(v) for v in tolerance.split()], what, source, method))
    return out


def _tv(a: list[float], b: list[float]) -> float:
    return 0.5 * sum(abs(x - y) for x, y in zip(a, b, strict=True))


def judge(t: Target, value: Any) -> tuple[bool | None, str]:
    """(holds, the distance or bound it was judged by); holds is None without a value."""
    if value is None:
        return None, ""
    if t.check == "tv":
        d = _tv(t.target, value)
        return d <= t.tolerance[0], f"TV {d:.3f} <= {t.tolerance[0]:g}"
    if t.check == "abs":
        d = abs(value - t.target[0])
        return d <= t.tolerance[0], f"|diff| {d:.3f} <= {t.tolerance[0]:g}"
    if t.check == "range":
        return t.tolerance[0] <= value <= t.tolerance[1], f"in [{t.tolerance[0]:g}, {t.tolerance[1]:g}]"
    if t.check == "min":
        return value >= t.tolerance[0], f">= {t.tolerance[0]:g}"
    if t.check == "rising":
        steps = all(b >= a for a, b in zip(value, value[1:], strict=False))
        ratio = value[-1] / value[0] if value[0] else float("inf")
        return steps and ratio >= t.tolerance[0], f"rising, level 5 / level 1 {ratio:.1f} >= {t.tolerance[0]:g}"
    raise ValueError(f"unknown check {t.check!r} of target {t.id}")


def _shares(levels: list[int]) -> list[float]:
    counts = np.bincount(np.asarray(levels, dtype=np.int64), minlength=LEVELS + 1)[1:]
    return [round(float(c), 4) for c in counts / max(counts.sum(), 1)]


def world_measures(world_dir: Path) -> dict[str, Any]:
    """Every truth-measured value of the world in ``world_dir`` (keys: the targets' ids)."""
    truth = world_dir / "truth"
    works = pl.read_parquet(truth / "works.parquet")
    expertise = Expertise.from_works(works)
    pairs = pool_like_pairs(world_dir)
    qp = pairs.select("query_id", "person_id").rows()
    answers = np.array([expertise.answer_shares(p, q) for q, p in qp]) if qp else np.zeros((0, LEVELS))
    papers_of: dict[str, int] = defaultdict(int)
    for authors in works.filter(pl.col("arxiv_id").is_not_null())["authors"].to_list():
        for m in authors:
            papers_of[m] += 1
    out: dict[str, Any] = {
        "ratings.pool_levels": [round(float(v), 4) for v in answers.mean(axis=0)] if qp else None,
        "profiles.pool_papers": round(float(np.mean([papers_of[p] for p in {p for _, p in qp}])), 2) if qp else None,
        "works.with_topics": round(float(works.select(pl.col("topic").is_not_null() & (pl.col("focus").list.len() > 0))
                                         .to_series().mean()), 4) if works.height else None,
    }
    refs_path = world_dir / "graph" / "references.parquet"
    if refs_path.exists():
        out.update(_graph_measures(pl.read_parquet(refs_path), works, expertise, truth, qp))
    return out


def _graph_measures(refs: pl.DataFrame, works: pl.DataFrame, expertise: Expertise, truth: Path,
                    qp: list[tuple[str, str]]) -> dict[str, Any]:
    """The citation graph's values: references per paper, self-citation, within-field references,
    identifiers, and how citing and coupling follow true expertise."""
    from scipy.stats import kendalltau

    by_work = {w: (t, a) for w, t, a in works.select("work_id", "topic", "authors").iter_rows()}
    topic_of = {a: t for a, t in works.filter(pl.col("arxiv_id").is_not_null()).select("arxiv_id", "topic").iter_rows()}
    refs = refs.with_columns(pl.coalesce("arxiv_id", "s2_id").alias("work"))
    in_world = refs.filter(pl.col("in_world"))
    same_field = [by_work[w][0].split("/")[0] == topic_of[c].split("/")[0]
                  for c, w in in_world.select("citing", "work").iter_rows() if w in by_work and c in topic_of]
    cited: dict[str, set[str]] = defaultdict(set)
    refs_of: dict[str, set[str]] = defaultdict(set)
    for c, w in refs.select("citing", pl.coalesce("work", "title")).iter_rows():
        refs_of[c].add(w)
        for m in by_work.get(w, (None, []))[1]:
            cited[c].add(m)
    mentions = pl.read_parquet(truth / "mentions.parquet").select("arxiv_id", "person_id")
    team: dict[str, set[str]] = defaultdict(set)
    written: dict[str, set[str]] = defaultdict(set)
    for a, p in mentions.iter_rows():
        team[a].add(p)
        written[p].add(a)
    close: dict[str, set[str]] = defaultdict(set)
    for members in team.values():
        for m in members:
            close[m] |= members
    people = sorted(expertise.profiles)
    hits, seen = np.zeros(LEVELS), np.zeros(LEVELS)
    for paper in sorted(refs_of):
        conflicted = set().union(*(close[m] for m in team.get(paper, ())))
        for person in people:
            if person not in conflicted:
                lv = expertise.level(person, paper) - 1
                seen[lv] += 1
                hits[lv] += person in cited[paper]
    coupling = [len(refs_of[q] & set().union(*(refs_of[a] for a in written[p]))) for q, p in qp]
    levels = [expertise.level(p, q) for q, p in qp]
    tau = kendalltau(coupling, levels).statistic if len(set(coupling)) > 1 and len(set(levels)) > 1 else 0.0
    per_paper = refs.group_by("citing").len()["len"]
    # A work is counted once: by its arXiv id, else its S2 id, else its title and year (an outside
    # work S2 holds no record of is named by no more than those). Its title folded as the graph
    # stage's resolution folds it (tasks.graph.normalise_title: the world may not import the pipeline's
    # tasks, a wall tests/test_structure_floors.py holds): case-folded letters and digits alone.
    name = (pl.col("title").str.normalize("NFKD").str.to_lowercase().str.replace_all("ß", "ss")
            .str.replace_all(r"[^\p{L}\p{N}]+", "").replace("", None))
    works_cited = refs.select(pl.coalesce("work", pl.col("title") + "|" + pl.col("year").cast(pl.Utf8)).alias("work"),
                              name.alias("name")).unique("work").drop_nulls("name")
    namesakes = works_cited.select(pl.col("work").n_unique().over("name") > 1).to_series()
    grobid_id = refs.select((pl.col("grobid").struct.field("typed_doi") & pl.col("doi").is_not_null())
                            | pl.col("grobid").struct.field("arxiv_in").is_not_null()).to_series()
    return {
        "graph.references_per_paper": round(float(per_paper.mean()), 2),
        "graph.self_citation_share": round(float(refs["own"].mean()), 4),
        "graph.same_field_share": round(float(np.mean(same_field)), 4) if same_field else None,
        "graph.ids_grobid": round(float(grobid_id.mean()), 4),
        "graph.cites_by_level": [round(float(h / s), 4) if s else 0.0 for h, s in zip(hits, seen, strict=True)],
        "graph.coupling_tau": round(float(tau), 4),
        "graph.title_shared_share": round(float(namesakes.mean()), 4) if namesakes.len() else None,
    }


def pipeline_measures(data_dir: Path, frames: dict[str, pl.DataFrame] | None = None) -> dict[str, Any]:
    """The values only the pipeline gives: the scorers' average losses on the demo's benchmark (from
    ``reports/warehouse/results.json`` in ``data_dir``) and, from the warehouse benchmark's ``frames``
    (``Warehouse.ratings.benchmark_frames``: its kept ``ratings`` and the raters' ``profiles``), the kept
    ratings' levels and profile papers per rated reviewer; none where they are missing."""
    out: dict[str, Any] = {}
    if frames is not None and frames["ratings"].height:
        out["ratings.kept_levels"] = _shares([int(r) for r in frames["ratings"]["rating"].to_list()])
        raters = frames["ratings"]["reviewer_id"].n_unique()
        out["profiles.rated_papers"] = round(frames["profiles"].height / raters, 2)
    results = data_dir / "reports" / "warehouse" / "results.json"
    if results.exists():
        rows = json.loads(results.read_text())
        for scorer, key in (("embedding:pooling=mean", "loss.embedding"), ("tpms", "loss.tpms"),
                            ("bm25:pooling=mean", "loss.bm25")):
            found = [r["value"] for r in rows if r["split"] == "average" and r["metric"] == "loss" and r["scorer"] == scorer]
            if found:
                out[key] = round(float(found[-1]), 4)
    return out


@dataclass(frozen=True)
class Row:
    """One target beside the world's value."""

    id: str
    what: str
    measured_on: str
    target: Any
    world: Any
    tolerance: str
    holds: bool | None
    source: str
    method: str


def realism_rows(measures: dict[str, Any], targets: list[Target] | None = None) -> list[Row]:
    """One row per target, judged on ``measures`` (a target without a value: ``holds`` None)."""
    rows = []
    for t in targets or load_targets():
        value = measures.get(t.id)
        holds, how = judge(t, value)
        target = t.target if len(t.target) > 1 else t.target[0] if t.target else t.check
        rows.append(Row(t.id, t.what, t.measured_on, target, value, how, holds, t.source, t.method))
    return rows


def write_report(rows: list[Row], path: Path, world_dir: Path | None = None) -> None:
    """The rows as JSON (with the world they were measured on)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"world": str(world_dir) if world_dir else None, "rows": [asdict(r) for r in rows]},
                               indent=1))


def fmt(value: Any) -> str:
    """A value as the table prints it: distributions in percent, numbers to three places."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return "/".join(f"{100 * v:.1f}" if all(0 <= x <= 1 for x in value) else f"{v:g}" for v in value)
    return f"{value:.3f}" if isinstance(value, float) else str(value)
