"""The SYNTHETIC world written as the OpenAlex snapshot: the same works and authors the replay's
``/openalex`` answers, as gzipped JSON Lines under ``data/works/updated_date=YYYY-MM-DD/`` and
``data/authors/updated_date=YYYY-MM-DD/`` with a ``manifest`` per entity, as OpenAlex publishes
it. A work's partition is the date of the arXiv version the world shows, so a world grown by a
day adds a partition, as the real snapshot does."""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from revbench.replay.openalex import author_id, with_graph, world_author, world_work
from revbench.replay.world_store import WorldStore


def _partition(root: Path, entity: str, day: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    path = root / "data" / entity / f"updated_date={day}" / "part_000.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = gzip.compress("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode())
    path.write_bytes(body)
    return {"url": str(path.relative_to(root)), "meta": {"content_length": len(body), "record_count": len(rows)}}


def write_snapshot(world_dir: Path, out: Path, as_of: datetime | None = None) -> dict[str, int]:
    """The world's works (as of ``as_of``) and their authors under ``out``; returns the counts."""
    world = WorldStore(world_dir, as_of=as_of)
    graph = world.graph
    works: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for entries in world.by_category.values():
        for when, arxiv_id, entry in entries:
            if arxiv_id in seen:
                continue
            seen.add(arxiv_id)
            work = with_graph(world_work(arxiv_id, entry), arxiv_id, graph) if graph else world_work(arxiv_id, entry)
            works.setdefault(f"{when:%Y-%m-%d}", []).append(work)
    people = ({author_id(key): pid for pid in graph.person_ids() for key in (pid, f"{pid}#2")} if graph else {})
    named = sorted({a["author"]["id"].rpartition("/")[2] for ws in works.values() for w in ws
                    for a in w["authorships"] if a["author"].get("id")})
    authors = [world_author(graph, people[aid], aid) for aid in named if aid in people and graph]
    manifest = {"works": [], "authors": []}
    for day in sorted(works):
        manifest["works"].append(_partition(out, "works", day, sorted(works[day], key=lambda w: w["id"])))
    if authors:
        manifest["authors"].append(_partition(out, "authors", max(works), authors))
    for entity, entries in manifest.items():
        (out / "data" / entity).mkdir(parents=True, exist_ok=True)
        (out / "data" / entity / "manifest").write_text(json.dumps(
            {"entries": entries, "meta": {"content_length": sum(e["meta"]["content_length"] for e in entries),
                                          "record_count": sum(e["meta"]["record_count"] for e in entries)}}, indent=1))
    return {"works": sum(len(w) for w in works.values()), "authors": len(authors), "partitions": len(works)}
