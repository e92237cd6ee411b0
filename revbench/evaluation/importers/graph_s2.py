"""A benchmark's graph from Semantic Scholar, for benchmarks whose paper ids are S2 paper ids (the
CMU gold standard): each paper's references and fields of study, asked through the S2 client
with its pacing and retries, kept as citations among the benchmark's papers and ``s2-fos`` topics.

Only on request (``revbench evaluate --graph-from s2``): without it the gold standard has no
graph. Every paper's answer is cached under ``DATA_DIR/cache/s2-graph/`` (one file a paper,
written whole or not at all), so a rerun, or a run after an interrupted one, asks only for the
papers it has no file for.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from revbench.errors import ServiceUnavailable, UsageError
from revbench.evaluation.model import (
    GRAPH_CITATIONS_SCHEMA,
    GRAPH_COAUTHORS_SCHEMA,
    GRAPH_INSTITUTIONS_SCHEMA,
    GRAPH_REFERENCES_SCHEMA,
    GRAPH_TOPICS_SCHEMA,
    Benchmark,
    BenchmarkGraph,
    frame,
)
from revbench.files import write_atomic
from revbench.retry import PermanentError, TransientError
from revbench.settings import Settings
from revbench.text_clean import parse_json

if TYPE_CHECKING:  # the client (httpx) is loaded only when a graph is asked of S2: a cold evaluate never loads it
    from revbench.clients.semantic_scholar import SemanticScholarClient

log = logging.getLogger("revbench.evaluate")
GRAPH_SOURCES = ("s2",)
"""What ``--graph-from`` accepts."""
S2_ID_KINDS = ("goldstandard",)
"""Benchmark kinds whose paper ids are Semantic Scholar paper ids."""
CACHE_VERSION = 1
_SAFE = re.compile(r"^[A-Za-z0-9._:-]+$")


def cache_dir(settings: Settings) -> Path:
    """Where each paper's S2 answer is kept."""
    return settings.data_dir / "cache" / "s2-graph"


def _cache_file(folder: Path, paper_id: str) -> Path:
    # An id is a file name only when it cannot leave the folder; anything else is named by its hash.
    name = paper_id if _SAFE.match(paper_id) and paper_id not in (".", "..") else hashlib.sha256(paper_id.encode()).hexdigest()
    return folder / f"{name}.json"


def _read_cached(path: Path, paper_id: str) -> dict[str, Any] | None:
    """A paper's cached answer, or None when there is none usable (absent, unreadable, another
    paper's, another version): it is then asked again, never trusted half-way."""
    try:
        # A file written before answers were cleaned can hold an escaped lone surrogate: cleaned here.
        record = parse_json(path.read_bytes())[0]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("version") != CACHE_VERSION or record.get("paper_id") != paper_id:
        log.warning("%s is not this paper's cached S2 answer; asking S2 again", path)
        return None
    return record


def benchmark_papers(bench: Benchmark) -> list[str]:
    """Every paper id of ``bench`` (submissions and every draw's profile papers), each once, sorted."""
    ids = set(bench.submissions["paper_id"].to_list()) if bench.submissions.height else set()
    for draw in bench.draws:
        if draw.height:
            ids |= set(draw["paper_id"].to_list())
    return sorted(i for i in ids if i)


def _fetch(client: SemanticScholarClient, ids: list[str], folder: Path, batch_size: int) -> list[str]:
    """Ask S2 for ``ids`` (fields of study by batch, then references one paper at a time) and
    cache each paper's answer; returns the papers whose references failed (not cached)."""
    from revbench.clients import s2_graph
    from revbench.clients.semantic_scholar import GRAPH_PAPER_FIELDS

    topics: dict[str, list[dict[str, Any]] | None] = {}
    for start in range(0, len(ids), batch_size):
        chunk = ids[start:start + batch_size]
        try:
            answers = client.paper_batch(chunk, GRAPH_PAPER_FIELDS, prefix="")
        except TransientError as exc:
            raise ServiceUnavailable("Semantic Scholar", client.settings.base_url,
                                     f"fields of study of {len(chunk)} papers: {exc}") from exc
        except PermanentError as exc:
            raise UsageError(f"Semantic Scholar refused the fields of study of {len(chunk)} papers: {exc}") from exc
        for pid, answer in zip(chunk, answers, strict=True):
            topics[pid] = None if answer is None else [
                {"topic": r["topic"], "origin": r["origin"]} for r in s2_graph.topic_rows(pid, answer)]
    failed = []
    for pid in ids:
        try:
            items: list[Any] | None = client.references(pid)
        except PermanentError as exc:
            if exc.kind != "not_found":
                raise UsageError(f"Semantic Scholar refused the references of paper {pid!r}: {exc}") from exc
            items = None  # S2 does not know the paper: an answer, cached as such
        except TransientError as exc:
            log.warning("S2 references of %s failed: %s", pid, exc)
            failed.append(pid)
            continue
        cites = None if items is None else [
            {"cited_s2_id": r["cited_s2_id"], "is_influential": r["is_influential"]}
            for r in s2_graph.reference_rows(pid, items) if r["cited_s2_id"]]
        record = {"version": CACHE_VERSION, "paper_id": pid, "references": cites, "topics": topics.get(pid)}
        write_atomic(_cache_file(folder, pid), json.dumps(record, sort_keys=True))
    return failed


def s2_graph_of(bench: Benchmark, settings: Settings, client: SemanticScholarClient | None = None) -> BenchmarkGraph:
    """The citations among ``bench``'s papers (by S2 paper id; ``is_influential`` as S2 gives it),
    every paper's reference list (``references``: a cited benchmark paper by its id, any other
    work as ``s2:<paperId>``; works S2 has no id for are left out) and their ``s2-fos`` topics,
    from the cache and, for papers not cached yet, from Semantic Scholar. S2 unreachable, or some papers' references failing after their retries, is one
    ``ServiceUnavailable`` line; what was answered stays cached for the rerun."""
    from revbench.clients import s2_graph  # the clients load only when a graph is asked of S2

    ids = benchmark_papers(bench)
    folder = cache_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    records = {pid: _read_cached(_cache_file(folder, pid), pid) for pid in ids}
    missing = [pid for pid, r in records.items() if r is None]
    if missing:
        log.info("asking Semantic Scholar for the graph of %d of %d papers of %s", len(missing), len(ids), bench.name)
        own = client is None
        from revbench.clients.semantic_scholar import SemanticScholarClient

        client = client or SemanticScholarClient(settings.s2, settings.http)
        try:
            failed = _fetch(client, missing, folder, settings.s2.batch_size)
        finally:
            if own:
                client.close()
        if failed:
            raise ServiceUnavailable("Semantic Scholar", settings.s2.base_url,
                                     f"the references of {len(failed)} of {len(missing)} papers failed, e.g. {failed[0]!r}; "
                                     f"the other answers are cached in {folder}")
        records = {pid: _read_cached(_cache_file(folder, pid), pid) for pid in ids}
    known = set(ids)
    edges: dict[tuple[str, str], bool | None] = {}
    topics = []
    refs: set[tuple[str, str]] = set()
    for pid, record in records.items():
        for ref in (record or {}).get("references") or []:
            cited = ref.get("cited_s2_id")
            if cited and cited != pid:
                refs.add((pid, cited if cited in known else f"s2:{cited}"))
            if cited in known and cited != pid:
                was, now = edges.get((pid, cited)), ref.get("is_influential")
                edges[(pid, cited)] = True if True in (was, now) else (False if False in (was, now) else None)
        for t in (record or {}).get("topics") or []:
            topics.append({"paper_id": pid, "scheme": s2_graph.SCHEME, "topic": t["topic"], "score": None})
    citations = frame([{"citing_id": a, "cited_id": b, "is_influential": f, "source": s2_graph.SOURCE}
                       for (a, b), f in sorted(edges.items())], GRAPH_CITATIONS_SCHEMA)
    topic_frame = frame(topics, GRAPH_TOPICS_SCHEMA).unique(["paper_id", "scheme", "topic"], maintain_order=True)
    references = frame([{"citing_id": a, "cited_key": b} for a, b in sorted(refs)], GRAPH_REFERENCES_SCHEMA)
    return BenchmarkGraph(citations, topic_frame, frame(None, GRAPH_INSTITUTIONS_SCHEMA), frame(None, GRAPH_COAUTHORS_SCHEMA),
                          references=references)


def with_graphs(settings: Settings, benchmarks: list[tuple[str, Path]], loaded: list[Benchmark],
                graph_from: str | None) -> list[Benchmark]:
    """``loaded`` with the graph ``graph_from`` asks for filled in where the kind's ids suit it
    (see :data:`S2_ID_KINDS`); the others as they are. None: unchanged."""
    if graph_from is None:
        return loaded
    for (kind, _), bench in zip(benchmarks, loaded, strict=False):
        if kind in S2_ID_KINDS:
            bench.graph = s2_graph_of(bench, settings)
    return loaded


def check_graph_from(graph_from: str | None, kinds: list[str]) -> None:
    """``--graph-from`` names a known source and some benchmark of the run takes it (one line otherwise)."""
    if graph_from is None:
        return
    if graph_from not in GRAPH_SOURCES:
        raise UsageError(f"--graph-from {graph_from!r}: expected one of {', '.join(GRAPH_SOURCES)}")
    if not any(k in S2_ID_KINDS for k in kinds):
        raise UsageError(f"--graph-from {graph_from}: no benchmark of this run has Semantic Scholar paper ids "
                         f"(only {', '.join(S2_ID_KINDS)} has; warehouse and release benchmarks carry their own graph)")

