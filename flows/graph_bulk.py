"""The graph stage's bulk path: a source's papers read from its bulk files where they lie
(``REVBENCH_S2__BULK_DIR`` or ``--from s2ag=DIR``: S2AG; ``REVBENCH_OPENALEX__SNAPSHOT_DIR`` or
``--from openalex=DIR``: the OpenAlex snapshot) before any are asked over the API. The files are
read one piece per file, on the run's runner (threads, or the Dask cluster, whose workers must
see the bulk folder and the data folder); the papers the files do not hold are left to the API,
so a paper newer than the last release is still answered, and the run's notes say which source
answered how many.

S2AG is read into what the stage keeps of a release (``revbench.warehouse.bulk_state``, under
``<data>/bulk/s2ag/<release>/``); each run records the release it read (``s2_bulk_through``), and
the next reads only the increments after it (``revbench.warehouse.bulk_diffs``), answering again
the corpus papers they changed. The OpenAlex snapshot is read after the newest ``updated_date``
partition the last run read (``openalex_bulk_through``)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import InputError
from revbench.flows.pieces import map_pieces
from revbench.settings import Settings
from revbench.tasks.graph import PaperIndex
from revbench.tasks.graph_bulk import PATCH_READS, Framed, cited_s2_ids, patched_references, s2ag_framed
from revbench.tasks.graph_bulk_openalex import author_keys, openalex_dois, openalex_framed
from revbench.tasks.graph_fetch import resolve_changed
from revbench.warehouse.bulk import Mapper, s2ag_diff_chain, s2ag_releases
from revbench.warehouse.bulk_answers import s2ag_answers, s2ag_cited_papers
from revbench.warehouse.bulk_diffs import apply_diff
from revbench.warehouse.bulk_openalex import snapshot_rows
from revbench.warehouse.bulk_state import build_state, covered_ids, state_ready

UNVERSIONED = "unversioned"
"""What the stage keeps of an S2AG folder that holds one release without its id (``DIR/papers/``)."""


def bulk_dir(settings: Settings, source: str) -> Path | None:
    """The bulk folder configured for ``source`` (None: the API only)."""
    return settings.s2.bulk_dir if source == "s2" else settings.openalex.snapshot_dir


def same_folder(recorded: str | None, root: Path) -> bool:
    """Whether the folder a run recorded is ``root``, however either is spelled (relative to
    another working directory, through a link): a folder named another way is not read whole again."""
    if not recorded:
        return False
    try:
        return Path(recorded).resolve() == root.resolve()
    except OSError:  # a folder gone since: not this one
        return False


def through_key(source: str) -> str:
    """The run parameter that records what of its bulk folder a graph run read (the S2AG
    release; the OpenAlex snapshot's newest partition)."""
    return f"{source}_bulk_through"


def pieces_of(settings: Settings) -> tuple[Mapper, int]:
    """How the bulk files' pieces run: on the run's runner (in-process: as many threads as the
    threads runner has), and the threads each piece's DuckDB takes (the machine's cores shared
    among the threads; a Dask worker's threads)."""
    runner = settings.runner
    workers = runner.max_workers if runner.kind == "threads" else runner.dask_workers
    threads = runner.dask_threads_per_worker if runner.kind == "dask" else max(1, (os.cpu_count() or 1) // workers)

    def mapper(fn: Any, pieces: list[tuple[Any, ...]], name: str) -> Any:
        return map_pieces(fn, pieces, name, local_workers=workers)

    return mapper, threads


def read_bulk(settings: Settings, source: str, todo: dict[str, list[str]], after: dict[str, str] | None = None
              ) -> Framed | None:
    """The OpenAlex snapshot's answers for ``todo``'s papers, only those it holds (the rest stay
    for the API); None where no snapshot folder is configured. ``after``: what the last completed
    run read of it (``dir``, ``through``): when it is this folder, only the works partitions
    written since are scanned (a day later reads what changed; a paper whose work is older than
    that is asked over the API)."""
    root = bulk_dir(settings, source)
    ids = sorted(set().union(*todo.values())) if todo else []
    if source != "openalex" or root is None or not ids:
        return None
    mapper, threads = pieces_of(settings)
    work = settings.data_dir / "bulk" / "openalex"
    since = after["through"] if after and same_folder(after.get("dir"), root) else None
    works = snapshot_rows(root, "works", "doi", openalex_dois(ids), lower=True, after=since, mapper=mapper,
                          threads=threads, work=work)
    authors = snapshot_rows(root, "authors", "id", author_keys(works), mapper=mapper, threads=threads, work=work)
    return openalex_framed(ids, works, authors).held()


def left_for_api(todo: dict[str, list[str]], got: Framed | None) -> dict[str, list[str]]:
    """``todo`` less the papers the bulk files answered."""
    if got is None:
        return todo
    held = got.answered()
    return {kind: [a for a in ids if a not in held] for kind, ids in todo.items()}


def save_bulk(run: Any, got: Framed, papers: PaperIndex, work_ids: dict[str, str]) -> tuple[dict[str, int], dict[str, int]]:
    """Resolve the bulk answer's references and store everything it answered, atomically (the
    API pieces' ``_save``; the frames come from DuckDB and polars, valid UTF-8 already, so there
    is nothing to clean; each paper's rows come with its fetch records, so they are ``fresh``),
    with the patched references of papers not answered again, resolved as a fresh answer's are;
    the rows written per table, and how the answered papers' references resolved (by method)."""
    res = resolve_changed(got.citations, papers, work_ids)[1] if got.citations.height else None
    cites = res.citations if res else None
    some = (lambda df: df if df is not None and df.height else None)
    patched = some(got.patched)
    with run.wh.graph.transaction():
        written = run.wh.graph.save_graph(citations=some(cites), topics=some(got.topics), institutions=some(got.institutions),
                                          affiliations=some(got.affiliations), authorships=some(got.authorships),
                                          fetches=some(got.fetches.with_columns(run_id=pl.lit(run.run_id))), fresh=True)
        if patched is not None:
            written["citations_patched"] = run.wh.graph.rewrite_references(
                resolve_changed(patched, papers, work_ids)[1].citations)
    return written, res.counts if res else {}


def record_through(run: Any, source: str, root: Path | None) -> None:
    """Record on the run the newest snapshot partition its folder holds, for the next run's ``after``."""
    if source != "openalex" or root is None:
        return
    from revbench.warehouse.bulk import latest_partition

    through = latest_partition(root, "works")
    if through:
        run.wh.runs.add_run_parameters(run.run_id, {through_key(source): {"dir": str(root.resolve()), "through": through}})


@dataclass
class BulkAnswer:
    """What a source's bulk files answered in one graph run, and what is left for its API."""

    got: Framed | None
    left: dict[str, list[str]]
    notes: dict[str, Any] | None = None


def bulk_first(run: Any, settings: Settings, source: str, todo: dict[str, list[str]]) -> BulkAnswer:
    """``source``'s bulk files first, where a folder is configured: S2AG by :func:`s2ag_first`;
    the OpenAlex snapshot by :func:`read_bulk` after what the last completed run read, the newest
    partition recorded on this run."""
    root = bulk_dir(settings, source)
    if root is None:
        return BulkAnswer(None, todo)
    last = run.wh.runs.last_completed_parameter("graph", through_key(source))
    if source == "s2":
        return s2ag_first(run, settings, root, todo, last)
    got = read_bulk(settings, source, todo, last)
    if got is not None:
        record_through(run, source, root)
    answered = len(got.answered()) if got else 0
    return BulkAnswer(got, left_for_api(todo, got), {"dir": str(root), "answered": answered})


def bulk_lines(source: str, notes: dict[str, Any] | None) -> list[str]:
    """A line for a run's notes: which papers ``source``'s bulk files answered, from which release."""
    if not notes:
        return []
    line = f"{source}: {notes['answered']} papers answered from the bulk files in {notes['dir']}"
    if notes.get("release"):
        steps = notes.get("increments") or []
        line += f", release {notes['release']}" + (
            f" by the increments {', '.join(steps)} after {notes['from_release']}" if steps
            else " (read whole)" if notes.get("whole") else "")
    if notes.get("patched"):
        line += f"; {notes['patched']} papers' references to papers S2 updated were patched"
    if notes.get("deleted"):
        line += f"; {len(notes['deleted'])} papers S2 deleted since were asked over the API"
    return [line]


def state_root(settings: Settings) -> Path:
    """Where the graph stage keeps what it read of each S2AG release (``revbench.warehouse.bulk_state``)."""
    return settings.data_dir / "bulk" / "s2ag"


def recorded_release(settings: Settings, root: Path, last: dict[str, Any] | None) -> str | None:
    """The S2AG release the last completed run read from ``root``, where what it kept of it is here."""
    release = (last or {}).get("release") if same_folder((last or {}).get("dir"), root) else None
    return release if release and state_ready(state_root(settings) / release) else None


@dataclass(frozen=True)
class S2agPlan:
    """How one run reads S2AG: from ``start`` (the release the last run read, kept here; None:
    none) through ``increments`` to ``release`` (None: a folder of one release without its id),
    or (``whole``) the files in ``files`` read whole."""

    start: str | None
    increments: list[tuple[str, str, Path]]
    release: str | None
    whole: Path | None

    @property
    def kept(self) -> str:
        """The name of the folder the stage keeps of the release read."""
        return self.release or UNVERSIONED


def s2ag_plan(settings: Settings, root: Path, last: dict[str, Any] | None) -> S2agPlan:
    """The increments after the recorded release where they reach the newest full release under
    ``root`` (or there is none); else that release, whole; a folder of one release without its
    id (``root/papers/``) is read whole every run."""
    start = recorded_release(settings, root, last)
    releases = s2ag_releases(root)
    chain = s2ag_diff_chain(root, start) if start else []
    end = chain[-1][1] if chain else start
    if end is not None and (not releases or end >= releases[-1]):
        return S2agPlan(start, chain, end, None)
    if releases:
        return S2agPlan(start, [], releases[-1], root / releases[-1])
    if (root / "papers").is_dir():
        return S2agPlan(None, [], None, root)
    raise InputError(f"{root}: no S2AG release (expected {root}/<release_id>/papers/ or {root}/papers/), and no "
                     "increments after a release the last run read")


@dataclass(frozen=True)
class S2agRead:
    """The corpus papers whose S2 answer a read changed: to give again whole (``again``), or to patch
    (``patched``: only their references to ``recited``, papers updated under the same URL)."""

    again: set[str]
    patched: set[str]
    recited: set[int]


def s2ag_read(settings: Settings, plan: S2agPlan, corpus: pl.DataFrame) -> S2agRead:
    """Bring what the graph stage keeps up to ``plan``'s release and return the corpus papers
    whose S2 answer changed: every one it covers after a release read whole, those an increment
    changed after increments (none for a folder without release ids: its new papers alone are
    answered). What no later run starts from is removed."""
    home = state_root(settings)
    mapper, threads = pieces_of(settings)
    again: set[str] = set()
    patched: set[str] = set()
    recited: set[int] = set()
    if plan.whole is not None:
        build_state(plan.whole, home / plan.kept, corpus, mapper, threads)
        again = set(covered_ids(home / plan.kept)) if plan.release else set()
    for frm, to, folder in plan.increments:
        # one step alone on the flow's host: all its cores, not a piece's share of them
        step = apply_diff(home / frm, folder, home / to, corpus, os.cpu_count() or 1)
        again |= set(step.changed)
        patched |= set(step.patched)
        recited |= set(step.recited)
    for stale in home.iterdir():
        if stale.name not in {plan.start, plan.kept}:
            shutil.rmtree(stale, ignore_errors=True)
    return S2agRead(again, patched - again, recited)


def s2ag_first(run: Any, settings: Settings, root: Path, todo: dict[str, list[str]], last: dict[str, Any] | None
               ) -> BulkAnswer:
    """The S2AG answers of this run from what the graph stage keeps of a release: after the
    recorded release, only its increments are read, and the papers they changed answered again
    with this run's new ones; without one (a first run, another folder, or a newer full release
    than the increments reach), the newest release is read whole and every corpus paper it holds
    answered. A corpus paper S2 deleted since loses its S2 answer and is asked over the API."""
    plan = s2ag_plan(settings, root, last)
    home = state_root(settings)
    before = set(covered_ids(home / plan.start)) if plan.start else set()
    read = s2ag_read(settings, plan, run.wh.graph.paper_identifiers().select("arxiv_id", "title"))
    covered = set(covered_ids(home / plan.kept))
    ids = (read.again | set().union(*todo.values())) & covered
    got = s2ag_framed(sorted(ids), *s2ag_answers(home / plan.kept, ids)).held()
    patch = sorted((read.patched & covered) - ids)
    if patch:
        cited = s2ag_cited_papers(home / plan.kept, read.recited)
        stored = run.wh.graph.references_naming(patch, "s2", cited_s2_ids(cited), columns=PATCH_READS)
        got.patched = patched_references(stored, cited)
    dropped = sorted(before - covered)
    if dropped:
        run.wh.graph.forget_answers(dropped, "s2")
    if plan.release:
        run.wh.runs.add_run_parameters(run.run_id, {through_key("s2"): {"dir": str(root.resolve()), "release": plan.release}})
    left = {kind: sorted(set(a) | set(dropped)) for kind, a in left_for_api(todo, got).items()}
    notes = {"dir": str(root), "answered": len(got.answered()), "release": plan.release,
             "from_release": plan.start, "whole": plan.whole is not None,
             "increments": [f"{f}_{t}" for f, t, _ in plan.increments], "deleted": dropped, "patched": len(patch)}
    return BulkAnswer(got, left, notes)
