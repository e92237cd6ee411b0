"""The graph stage's bulk path: a source's papers read from its bulk files where they lie
(``REVBENCH_S2__BULK_DIR``: S2AG; ``REVBENCH_OPENALEX__SNAPSHOT_DIR``: the OpenAlex snapshot)
before any are asked over the API. One scan per dataset for all the stage's papers (DuckDB reads
the shards in parallel); the papers the files do not hold are left to the API, so a paper newer
than the last release is still answered, and the stage's notes say which source answered each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from revbench.settings import Settings
from revbench.tasks.graph_bulk import openalex_dois, openalex_fetched, s2ag_fetched
from revbench.tasks.graph_fetch import Fetched
from revbench.warehouse.bulk import openalex_entities, s2ag_citations, s2ag_papers


def bulk_dir(settings: Settings, source: str) -> Path | None:
    """The bulk folder configured for ``source`` (None: the API only)."""
    return settings.s2.bulk_dir if source == "s2" else settings.openalex.snapshot_dir


def through_key(source: str) -> str:
    """The run parameter that records the newest snapshot partition a graph run read."""
    return f"{source}_bulk_through"


def read_bulk(settings: Settings, source: str, todo: dict[str, list[str]], after: dict[str, str] | None = None
              ) -> Fetched | None:
    """``source``'s answers for ``todo``'s papers from its bulk files, only those the files hold
    (the rest stay for the API); None where no bulk folder is configured. ``after``: what the
    last completed run read of the OpenAlex snapshot (``dir``, ``through``): when it is this
    folder, only the works partitions written since are scanned (a day later reads what changed;
    a paper whose work is older than that is asked over the API)."""
    root = bulk_dir(settings, source)
    ids = sorted(set().union(*todo.values())) if todo else []
    if root is None or not ids:
        return None
    if source == "s2":
        papers = s2ag_papers(root, arxiv_ids=ids)
        citations = s2ag_citations(root, papers["corpusid"].to_list())
        cited = s2ag_papers(root, corpus_ids=citations["citedcorpusid"].drop_nulls().unique().to_list())
        got = s2ag_fetched(ids, papers, citations, cited)
    else:
        since = after["through"] if after and after.get("dir") == str(root) else None
        works = openalex_entities(root, "works", "doi", openalex_dois(ids), lower=True, after=since)
        got = openalex_fetched(ids, works, openalex_entities(root, "authors", "id", _author_ids(works)))
    held = {f["arxiv_id"] for f in got.fetches if f["found"]}
    # what the files do not hold is no answer: the API is asked for it
    got.fetches = [f for f in got.fetches if f["arxiv_id"] in held]
    got.failures = [f for f in got.failures if f["arxiv_id"] in held]
    return got


def _author_ids(works: Any) -> list[str]:
    return sorted({a["author"]["id"] for text in works["entity"].to_list()
                   for a in (json.loads(text).get("authorships") or []) if (a.get("author") or {}).get("id")})


def left_for_api(todo: dict[str, list[str]], got: Fetched | None) -> dict[str, list[str]]:
    """``todo`` less the papers the bulk files answered."""
    if got is None:
        return todo
    held = {f["arxiv_id"] for f in got.fetches}
    return {kind: [a for a in ids if a not in held] for kind, ids in todo.items()}


def record_through(run: Any, source: str, root: Path | None) -> None:
    """Record on the run the newest snapshot partition its folder holds, for the next run's ``after``."""
    if source != "openalex" or root is None:
        return
    from revbench.warehouse.bulk import latest_partition

    through = latest_partition(root, "works")
    if through:
        run.wh.runs.add_run_parameters(run.run_id, {through_key(source): {"dir": str(root), "through": through}})


def bulk_first(run: Any, settings: Settings, source: str, todo: dict[str, list[str]]) -> Fetched | None:
    """:func:`read_bulk` after what the last completed run read (asked only where a bulk folder is
    configured), and the newest partition recorded on this run."""
    root = bulk_dir(settings, source)
    if root is None:
        return None
    got = read_bulk(settings, source, todo, run.wh.runs.last_completed_parameter("graph", through_key(source)))
    if got is not None:
        record_through(run, source, root)
    return got
