"""A seeded SYNTHETIC world: papers, people and the services' answers about them, plus the truth.

The world stands in for arXiv, Semantic Scholar and GROBID in the demo, tests and benchmarks.
Its people have homonyms, several emails, institution aliases and missing fields; a few of its
records are deliberately bad. The hidden truth (who wrote what, who knows what) is written
beside it so later stages can measure themselves. Every artefact says it is synthetic.

The world is drawn in :mod:`revbench.synth.draw` and what the services answer about it is made in
:mod:`revbench.synth.answers`; this module generates a world from its spec, writes its files,
truth and manifest, reuses one already written and grows one by days.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.synth.answers import _Rendered, render_paper, s2_histories
from revbench.synth.draw import (
    Generator,
    WorldSpec,
    _Paper,
    _Person,
    draw_papers,
    draw_team,
    draw_text,
    plant_affiliation_conflict,
    plant_bad_records,
)
from revbench.synth.graph import draw_graph, graph_counts
from revbench.synth.graph_files import write_graph
from revbench.synth.vocab import INSTITUTIONS

WORLD_FORMAT = 9
"""Bumped when what a world holds changes (4: second affiliations, orphan affiliations, ORCIDs,
the planted second-affiliation conflict; 5: the graph; 6: the graph-only conflict's query one the
pools draw first, citing the person's earlier paper; 7: the graph as parquet tables in ``graph/``
instead of ``graph.json``, with OpenAlex's split profiles and hidden ORCIDs; 8: calibrated on real
data (docs/benchmarks.md, "How real the world is"): fewer people with more papers each, works about a
focus within their subtopic, expertise and ratings from every work (``truth/works.parquet``),
citations by topic and by the cited person's expertise; 9: every work's title has an ending of its
own, so titles differ as real ones do, ``revbench.synth.draw.distinct_title``), so cached worlds are
regenerated and a demo folder of an older world is set aside."""
PEOPLE_PER_PAPER = 0.6
"""People drawn per paper of the window: about 5.5 papers each in the window, so a rated reviewer's
profile holds about as many papers as LR-bench's (5.7; revbench/reference/world_targets.txt)."""
WORK_COLUMNS = {"work_id": pl.Utf8, "arxiv_id": pl.Utf8, "topic": pl.Utf8, "focus": pl.List(pl.Utf8),
                "authors": pl.List(pl.Utf8), "year": pl.Int64}
"""``truth/works.parquet``: every work (the papers, and the people's older works, with no arXiv id)."""
GRAPH_CONFLICT_COLUMNS = {"query_id": pl.Utf8, "person_id": pl.Utf8, "kind": pl.Utf8, "detail": pl.Utf8,
                          "author_id": pl.Utf8, "ror": pl.Utf8, "last_year": pl.Int64}


def generate_world(
    out_dir: Path, spec: WorldSpec, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """Write the world to ``out_dir`` and return its manifest; same spec, same bytes.

    The steps draw from one seeded generator in a fixed order: people and their groups, papers,
    the planted bad records, what the services show of each paper, then publication histories.
    Growth days (``spec.extra_days``) come after, each from its own generator, so the base world
    is the same whatever the number of growth days and day d is the same in every longer run."""
    g = Generator(spec)
    people = g.people(max(20, int(spec.n_papers * PEOPLE_PER_PAPER)))
    groups = g.groups(people)
    papers = draw_papers(g, people, groups, progress)
    bad = plant_bad_records(g, spec, len(papers))
    planted = plant_affiliation_conflict(people, papers, set(bad))
    shown = _Rendered()
    for i, paper in enumerate(papers):
        render_paper(g, spec, paper, people, papers[(i + 1) % len(papers)].title, bad.get(i), shown)
    older: dict[str, dict[str, Any]] = {}
    histories = s2_histories(g, spec, people, shown.histories, older)
    older_works = {m: list(h) for m, h in shown.histories.items()}
    if spec.extra_days:
        papers, histories = grow_papers(spec, people, groups, papers, shown, histories, progress)
    # The graph comes last and from its own streams (revbench.synth.graph), so the draws above
    # are the same with or without it.
    graph = draw_graph(spec, people, papers, set(bad), older_works, shown.mentions, older) if spec.graph else None
    return write_world(out_dir, spec, people, papers, shown, histories, planted, graph, older)



def grow_papers(spec: WorldSpec, people: list[_Person], groups: list[list[int]], papers: list[_Paper],
                shown: _Rendered, histories: list[dict[str, str]],
                progress: Callable[[str, int, int], None] | None = None) -> tuple[list[_Paper], list[dict[str, str]]]:
    """The base papers plus the growth days' papers (rendered into ``shown``), and the S2
    histories with the new papers appended to their authors' lists.

    Each day draws from a generator seeded by (seed, day) alone, so the base world and earlier
    days never shift; new ids continue each month's sequence past the base world's."""
    group_sizes = np.array([len(gr) for gr in groups], dtype=float)
    group_p = group_sizes / group_sizes.sum()
    month_seq: dict[str, int] = {}
    for p in papers:
        yymm, seq = p.arxiv_id.split(".")
        month_seq[yymm] = max(month_seq.get(yymm, 0), int(seq))
    k = spec.papers_per_day()
    grown = list(papers)
    added: dict[str, list[dict[str, Any]]] = {}
    for d in range(1, spec.extra_days + 1):
        g = Generator(spec, np.random.default_rng([spec.seed, d]), stream=d)
        day = spec.end + timedelta(days=d)
        day_dt = datetime(day.year, day.month, day.day, tzinfo=UTC)
        new: list[_Paper] = []
        for _ in range(k):
            topic, team = draw_team(g, people, groups, group_p)
            published = day_dt + timedelta(seconds=int(g.rng.integers(0, 86_400)))
            yymm = published.strftime("%y%m")
            month_seq[yymm] = month_seq.get(yymm, 0) + 1
            new.append(draw_text(g, f"{yymm}.{month_seq[yymm]:05d}", topic, team, [(1, published)], published, people))
        # Rendered apart so that the base authors' history lists (already drawn) stay untouched.
        day_shown = _Rendered()
        for i, paper in enumerate(new):
            render_paper(g, spec, paper, people, new[(i + 1) % len(new)].title, None, day_shown)
        for m, hist in day_shown.histories.items():
            added.setdefault(people[m].s2_ids[0], []).extend(hist)
        shown.arxiv.extend(day_shown.arxiv)
        shown.s2_papers.extend(day_shown.s2_papers)
        shown.documents.extend(day_shown.documents)
        shown.mentions.extend(day_shown.mentions)
        grown.extend(new)
        if progress:
            progress("growth days", d, spec.extra_days)
    merged = []
    for row in histories:
        extra = added.pop(row["author_id"], None)
        merged.append(row if extra is None else
                      dict(author_id=row["author_id"], json=json.dumps(json.loads(row["json"]) + extra, ensure_ascii=False)))
    merged.extend(dict(author_id=a, json=json.dumps(h, ensure_ascii=False)) for a, h in added.items())
    return grown, merged



def write_world(out_dir: Path, spec: WorldSpec, people: list[_Person], papers: list[_Paper], shown: _Rendered,
                histories: list[dict[str, str]], planted: list[dict[str, str]] | None = None,
                graph: tuple[dict[str, Any], list[dict[str, Any]]] | None = None,
                older: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The services' files, the truth folder and the manifest (``graph``: the graph and its
    planted conflicts, written as ``graph/`` (revbench.synth.graph_files) and ``truth/graph_conflicts.parquet``;
    ``older``: the people's older works, written with the papers as ``truth/works.parquet``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "truth").mkdir(exist_ok=True)
    pl.DataFrame(shown.arxiv).write_parquet(out_dir / "arxiv.parquet")
    pl.DataFrame(shown.s2_papers, schema={"arxiv_id": pl.Utf8, "json": pl.Utf8}).write_parquet(out_dir / "s2_papers.parquet")
    pl.DataFrame(histories).write_parquet(out_dir / "s2_authors.parquet")
    if spec.documents:
        pl.DataFrame(shown.documents).write_parquet(out_dir / "documents.parquet")
    pl.DataFrame(
        [dict(person_id=p.pid, name=f"{p.first} {p.last}", institution=INSTITUTIONS[p.inst][0],
              institutions=[INSTITUTIONS[i][0] for i in p.insts], orcid=p.orcid,
              emails=p.emails, s2_author_ids=p.s2_ids, expertise=p.topics) for p in people],
        schema_overrides={"orcid": pl.Utf8},
    ).write_parquet(out_dir / "truth" / "persons.parquet")
    pl.DataFrame(planted or [], schema={"query_id": pl.Utf8, "person_id": pl.Utf8, "kind": pl.Utf8, "detail": pl.Utf8}).write_parquet(
        out_dir / "truth" / "planted_conflicts.parquet")
    truth_mentions = [dict(arxiv_id=p.arxiv_id, position=pos, person_id=people[m].pid)
                      for p in papers for pos, m in enumerate(p.team)]
    pl.DataFrame(truth_mentions).write_parquet(out_dir / "truth" / "mentions.parquet")
    # What the services show of each mention (the PDF's name form, email, affiliation; S2's id).
    pl.DataFrame(shown.mentions, infer_schema_length=None, schema_overrides={
        "orcid": pl.Utf8, "affiliations": pl.List(pl.Struct({"department": pl.Utf8, "institution": pl.Utf8}))},
    ).write_parquet(out_dir / "mentions.parquet")
    pl.DataFrame([dict(arxiv_id=p.arxiv_id, topic=p.topic) for p in papers]).write_parquet(out_dir / "truth" / "paper_topics.parquet")
    write_works(out_dir, people, papers, older or {})
    pl.DataFrame(shown.bad, schema={"arxiv_id": pl.Utf8, "kind": pl.Utf8, "expected_reason": pl.Utf8}).write_parquet(
        out_dir / "truth" / "bad_records.parquet"
    )
    manifest = {
        "synthetic": True,
        "notice": "SYNTHETIC world generated by revbench: no paper, person or address in it is real.",
        "format": WORLD_FORMAT,
        "spec": {k: (v.isoformat() if isinstance(v, date) else v) for k, v in spec.__dict__.items()},
        "spec_key": spec.key(),
        "base_key": spec.base_key(),
        "counts": {
            "papers": len(papers), "mentions": len(truth_mentions), "persons": len(people),
            "documents": len(shown.documents), "s2_papers": len(shown.s2_papers), "bad_records": len(shown.bad),
            **(graph_counts(graph[0]) if graph else {}),
        },
        "days": {
            "base_end": spec.end.isoformat(), "extra_days": spec.extra_days,
            "last_day": (spec.end + timedelta(days=spec.extra_days)).isoformat(), "papers_per_day": spec.papers_per_day(),
        },
    }
    if graph:
        write_graph(out_dir, graph[0])
        pl.DataFrame(graph[1], schema=GRAPH_CONFLICT_COLUMNS).write_parquet(out_dir / "truth" / "graph_conflicts.parquet")
    (out_dir / "world.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def write_works(out_dir: Path, people: list[_Person], papers: list[_Paper], older: dict[str, dict[str, Any]]) -> None:
    """``truth/works.parquet``: every work of the world, its papers and its people's older works,
    with its topic, focus and true authors; the truth of who knows what is read from it."""
    rows = [dict(work_id=p.arxiv_id, arxiv_id=p.arxiv_id, topic=p.topic, focus=p.focus,
                 authors=[people[m].pid for m in p.team], year=p.published.year) for p in papers]
    rows += [dict(work_id=k, arxiv_id=None, topic=w["topic"], focus=w["focus"], authors=[people[w["person"]].pid],
                  year=w["year"]) for k, w in sorted(older.items())]
    pl.DataFrame(rows, schema=WORK_COLUMNS).write_parquet(out_dir / "truth" / "works.parquet")


def ensure_world(out_dir: Path, spec: WorldSpec) -> dict[str, Any]:
    """Generate the world unless ``out_dir`` already holds the same spec."""
    manifest_path = out_dir / "world.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("spec_key") == spec.key() and manifest.get("format") == WORLD_FORMAT:
            return manifest
    return generate_world(out_dir, spec)


def spec_of(manifest: dict[str, Any]) -> WorldSpec:
    """The spec a world's manifest was generated from (worlds older than growth have no ``extra_days``)."""
    names = {f.name for f in dataclasses.fields(WorldSpec)}
    kw = {k: v for k, v in manifest["spec"].items() if k in names}
    for k in ("start", "end"):
        if k in kw:
            kw[k] = date.fromisoformat(kw[k])
    return WorldSpec(**kw)


def grow_world(out_dir: Path, days: int) -> dict[str, Any]:
    """Regenerate the world in ``out_dir`` with ``days`` more growth days and return its manifest.

    The new world is written beside the old one and swapped in, so a reader never sees a
    half-written world (only, for an instant, none at all)."""
    if days < 0:
        raise ValueError(f"days must be >= 0, not {days}")
    manifest = json.loads((out_dir / "world.json").read_text())
    spec = spec_of(manifest)
    if days == 0 and manifest.get("format") == WORLD_FORMAT:
        return manifest
    spec = dataclasses.replace(spec, extra_days=spec.extra_days + days)
    tmp = out_dir.with_name(f".{out_dir.name}.growing")
    old = out_dir.with_name(f".{out_dir.name}.old")
    for leftover in (tmp, old):
        if leftover.exists():
            shutil.rmtree(leftover)
    manifest = generate_world(tmp, spec)
    out_dir.rename(old)
    tmp.rename(out_dir)
    shutil.rmtree(old)
    return manifest
