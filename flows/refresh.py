"""The refresh flow: every configured stage in order, each as its own (sub)flow run, each skipped
when its inputs did not change since the refresh that last ran it.

A stage is planned before it runs: the plan reads a few counts and digests from the warehouse
(cheap next to the stage) and says in words why the stage runs or why it does not. The refresh
holds the warehouse only while planning and recording, so the stage flows (and other commands)
can open it in between; what each refresh did is kept in ``refresh_stages``. The stages, their
order, flows and plans are the table in ``revbench.stages``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from revbench.flows.common import (
    RevbenchFlow,
    code_version,
    current_run_id,
    open_warehouse,
    publish_markdown,
    publish_table,
    revbench_flow,
)
from revbench.flows.pieces import no_worker_profiler, prefect_active
from revbench.flows.results import FlowResult, Scalar
from revbench.schemas.graph import PAPER_AUTHORSHIPS
from revbench.schemas.model import Table
from revbench.schemas.tables import AUTHORS, MENTIONS, PAPERS, RATING_TUPLES, RATINGS, REFRESH_STAGES
from revbench.settings import Settings
from revbench.stages import STAGE_NAMES, StageSpec, resolve, stage_spec
from revbench.tasks.crawl import plan_slices
from revbench.tasks.graph_fetch import enabled_sources, to_fetch
from revbench.warehouse import Warehouse, utcnow
from revbench.worlds import check_worlds

log = logging.getLogger("revbench.refresh")


@dataclass(frozen=True)
class StageOutcome:
    """What a refresh did with one stage: ran, skipped or failed, why, the run it started, how
    long it took and the scalar counts that run reported (as JSON)."""

    position: int
    stage: str
    reason: str
    child_run_id: str | None
    seconds: float
    summary: str | None
    status: str


@dataclass(frozen=True)
class RefreshResult(FlowResult):
    """A refresh: its window, how it ended and what it did with each stage."""

    run_id: str
    since: str
    until: str
    status: str
    stages: list[StageOutcome]


@dataclass
class Plan:
    """What the refresh will do with one stage, and why."""

    run: bool
    reason: str
    fingerprint: str
    args: dict[str, Any]


def window(settings: Settings, today: date | None = None) -> tuple[date, date]:
    """The ingest window: ``window_days`` ending at REFRESH__UNTIL, or yesterday (UTC): a day
    is crawled once it is over, so an unchanged day is never crawled twice."""
    until = settings.refresh.until or ((today or datetime.now(UTC).date()) - timedelta(days=1))
    return until - timedelta(days=settings.refresh.window_days - 1), until


def content_columns(table: Table) -> list[str]:
    """The columns that hold content, not bookkeeping (run ids, timestamps)."""
    return [c.name for c in table.columns if c.name != "run_id" and not c.name.endswith("_at")]


def _fp(*parts: Any) -> str:
    return json.dumps(parts, default=str, sort_keys=True)


def _unchanged(wh: Warehouse, stage: str, fingerprint: str, what: str) -> Plan | None:
    """A skip when the last refresh that ran ``stage`` saw the same inputs."""
    last = wh.runs.last_refresh_fingerprint(stage)
    if last and last[0] == fingerprint:
        return Plan(False, f"{what} unchanged since refresh {last[1][:8]} at {last[2]:%Y-%m-%d %H:%M} UTC", fingerprint, {})
    return None


def plan_ingest(settings: Settings, wh: Warehouse, since: date, until: date) -> Plan:
    cats = settings.arxiv.categories
    done = wh.ingest.completed_slices()
    slices = [(c, s, e) for c in cats for s, e in plan_slices(since, until, settings.arxiv.slice_days)]
    todo = [x for x in slices if x not in done]
    pending, missing = wh.ingest.pending_documents().height, len(wh.ingest.ids_missing_s2())
    fp = _fp(since, until, cats, len(slices) - len(todo), pending, missing)
    args = {"since": since, "until": until}
    if todo or pending or missing:
        return Plan(True, f"{len(todo)} of {len(slices)} day slices of {since}..{until} to crawl, {pending} documents "
                          f"to extract, {missing} papers to look up in Semantic Scholar", fp, args)
    return Plan(False, f"all {len(slices)} day slices of {since}..{until} crawled; no document or lookup pending", fp, args)


def plan_graph(settings: Settings, wh: Warehouse) -> Plan:
    sources = enabled_sources(settings)
    todo = {f"{src}/{kind}": len(ids) for (src, kind), ids in to_fetch(sources, wh.graph.papers_to_fetch).items()}
    fp = _fp(todo, sources, settings.grobid.fulltext)
    waiting = {k: n for k, n in todo.items() if n}
    if not waiting:
        return Plan(False, f"every paper asked of {', '.join(sources)} already", fp, {})
    said = ", ".join(f"{n} for {k}" for k, n in waiting.items())
    return Plan(True, f"papers not asked yet: {said}", fp, {})


def plan_disambiguate(settings: Settings, wh: Warehouse) -> Plan:
    d = settings.disambiguate
    n = wh.count(MENTIONS)
    decider = [d.model_dump(), settings.llm.model, bool(settings.llm.base_url)]
    # Titles and years too: a block's decision reads its papers' titles, an author's counts their years.
    papers: Any = wh.digest(PAPERS, ["arxiv_id", "title", "year"])
    if wh.count(PAPER_AUTHORSHIPS):  # the graph's ids are evidence too; a graph-less warehouse keeps its fingerprint
        papers = [papers, wh.digest(PAPER_AUTHORSHIPS, PAPER_AUTHORSHIPS.names)]
    fp = _fp(wh.digest(MENTIONS, content_columns(MENTIONS)), papers, *decider)
    if n == 0:
        return Plan(False, "no author mentions yet", fp, {})
    unchanged = _unchanged(wh, "disambiguate", fp, f"the {n} mentions, their papers and the decider")
    if unchanged:
        return unchanged
    last_fp = wh.runs.last_refresh_fingerprint("disambiguate")
    if last_fp is None:
        return Plan(True, f"no disambiguation by a refresh yet ({n} mentions; only changed name blocks are decided)", fp, {})
    last = wh.disambiguate.last_disambiguation()
    if json.loads(last_fp[0])[2:] != json.loads(_fp(*decider)) or last is None or last["status"] != "completed":
        return Plan(True, f"the decider or its settings changed since the last refresh that ran it, or the last "
                          f"disambiguation did not complete ({n} mentions; only changed name blocks are decided)", fp, {})
    changed, removed = wh.disambiguate.change_counts(last["started_at"])
    return Plan(True, f"{changed} of {n} mentions new or changed and {removed} removed since the last disambiguation "
                      "(only their name blocks are decided)", fp, {})


def plan_pools(settings: Settings, wh: Warehouse) -> Plan:
    latest = wh.pools.latest_round()
    papers = wh.count(PAPERS)
    if papers == 0 or wh.count(AUTHORS) == 0:
        return Plan(False, "no corpus with authors yet", _fp(papers), {})
    if latest is None:
        return Plan(True, f"no round yet: round 1 over {papers} papers", _fp(papers, 0), {"round": 1})
    new = wh.runs.papers_loaded_since(latest["created_at"])
    need = settings.refresh.new_round_min_papers
    fp = _fp(latest["round"], latest["revision"], new)
    if new >= need:
        return Plan(True, f"{new} papers new since round {latest['round']} (a round needs {need}): round "
                          f"{latest['round'] + 1}", fp, {"round": latest["round"] + 1})
    return Plan(False, f"{new} papers new since round {latest['round']}; a new round needs {need} "
                       "(REVBENCH_REFRESH__NEW_ROUND_MIN_PAPERS)", fp, {})


def plan_survey(settings: Settings, wh: Warehouse) -> Plan:
    latest = wh.pools.latest_round()
    if latest is None:
        return Plan(False, "no pools round to invite yet", _fp(None), {})
    r = latest["round"]
    sent = wh.survey.invitations_sent(r)
    fp = _fp(r, latest["revision"], sent)
    if sent:
        return Plan(False, f"round {r}'s invitations already sent ({sent} emails)", fp, {})
    if not settings.smtp.host:
        return Plan(False, f"round {r}'s {latest['invitations']} invitations wait: REVBENCH_SMTP__HOST is not set", fp, {})
    if settings.survey.signing_key is None:
        return Plan(False, f"round {r}'s invitations wait: REVBENCH_SURVEY__SIGNING_KEY is not set", fp, {})
    return Plan(True, f"round {r}: {latest['invitations']} invitations not sent yet", fp, {"round": r})


def plan_ratings(settings: Settings, wh: Warehouse) -> Plan:
    from revbench.flows.store_pull import lost_since_pull
    from revbench.warehouse.store import SurveyStore

    if not settings.survey_store_path.exists():
        return Plan(False, "no survey store yet (no wave sent)", _fp(0), {})
    with SurveyStore(settings.survey_store_path) as store:
        epoch, newest = store.epoch(), store.max_event_id()
        marks = wh.ratings.survey_epoch_marks()
        pulled, digest = marks.get(epoch, (0, None))
        fp = _fp(epoch, newest)
        if lost_since_pull(store, epoch, pulled, digest):
            return Plan(True, f"the survey store no longer holds event {pulled} of epoch {epoch} as pulled (emptied or "
                              "restored from an older backup): its answers are checked again", fp, {})
        if newest and epoch not in marks:
            return Plan(True, f"a survey store not pulled before (epoch {epoch}): {newest} events to check", fp, {})
        if newest > pulled:
            return Plan(True, f"{newest - pulled} new survey events (after event {pulled} of epoch {epoch})", fp, {})
        opted = store.opted_out()
        if opted:
            emails = dict(wh.survey.survey_invitations().select("invitation_id", "email").iter_rows())
            waiting = {emails[i] for i in opted if i in emails} - wh.survey.opted_out_emails()
            if waiting:
                return Plan(True, f"{len(waiting)} opt-outs in the survey store not in the warehouse yet", fp, {})
        return Plan(False, f"no new survey answers since event {pulled} of epoch {epoch}", fp, {})


def plan_release(settings: Settings, wh: Warehouse) -> Plan:
    n = wh.count(RATINGS)
    fp = _fp(wh.digest(RATINGS, content_columns(RATINGS)))
    if settings.release.id_key is None:
        return Plan(False, "REVBENCH_RELEASE__ID_KEY is not set: no release can be built", fp, {})
    if n == 0:
        return Plan(False, "no ratings yet", fp, {})
    last = wh.release.latest_release()
    if last is None:
        return Plan(True, f"{n} ratings and no release yet", fp, {})
    same = _unchanged(wh, "release", fp, f"the {n} ratings")
    if same:
        return same
    new, need = wh.ratings.ratings_since(last["built_at"]), settings.refresh.release_min_new_ratings
    if new < need:
        return Plan(False, f"{new} ratings answered since release {last['version']}; a release needs {need} "
                           "(REVBENCH_REFRESH__RELEASE_MIN_NEW_RATINGS)", fp, {})
    return Plan(True, f"ratings changed since release {last['version']} ({new} answered since)", fp, {})


def plan_evaluate(settings: Settings, wh: Warehouse) -> Plan:
    n = wh.count(RATING_TUPLES)
    last = wh.release.latest_release()
    fp = _fp(wh.digest(RATING_TUPLES, content_columns(RATING_TUPLES)), settings.ratings.evaluate_scorers,
             settings.ratings.bootstrap, last)
    if n == 0:
        return Plan(False, "no benchmark tuples yet", fp, {})
    # The configured scorers on this warehouse's benchmark (``evaluate_configured``'s arguments).
    args = {"benchmark": f"warehouse={settings.warehouse_path}", "report_dir": settings.data_dir / "reports" / "warehouse"}
    return _unchanged(wh, "evaluate", fp, f"the {n} tuples and the scorers") or Plan(
        True, f"{n} tuples or the scorers changed since the last evaluation (or none ran yet)", fp, args)


def run_stage(settings: Settings, spec: StageSpec, args: dict[str, Any], synthetic: bool, track: bool) -> FlowResult:
    """Run one stage's flow with its plan's arguments (a subflow when the refresh is tracked)."""
    flow = resolve(spec.flow)
    kwargs = {**spec.flow_args, **args, **({"synthetic": synthetic} if spec.window else {})}
    if isinstance(flow, RevbenchFlow):
        return flow.run(settings, track=track, **kwargs)
    # A plain function (the configured evaluation) is a subflow of a tracked refresh by itself.
    out: FlowResult = flow(settings, **kwargs)
    return out


def summarize(out: FlowResult) -> dict[str, Scalar]:
    """The scalar counts a stage reported (nested tables and texts left out)."""
    return out.scalars()


def _session(settings: Settings) -> contextlib.closing[Warehouse]:
    return contextlib.closing(open_warehouse(settings))


@contextmanager
def shared_cluster(settings: Settings, track: bool) -> Iterator[Settings]:
    """One local Dask cluster for every stage of a tracked refresh (instead of one per stage)."""
    r = settings.runner
    if not track or r.kind != "dask" or r.dask_address:
        yield settings
        return
    from distributed import LocalCluster

    no_worker_profiler()
    with LocalCluster(n_workers=r.dask_workers, threads_per_worker=r.dask_threads_per_worker, processes=True,
                      dashboard_address=None) as cluster:
        yield settings.with_overrides(runner={"dask_address": cluster.scheduler_address})


def plan_stage(settings: Settings, spec: StageSpec, since: date, until: date) -> Plan:
    """The plan of one stage, from a warehouse session held only while planning."""
    planner = resolve(spec.planner)
    with _session(settings) as wh:
        plan: Plan = planner(settings, wh, since, until) if spec.window else planner(settings, wh)
        return plan


def refresh_stage(settings: Settings, refresh_id: str, position: int, stage: str, since: date, until: date,
                  synthetic: bool, track: bool, done: list[StageOutcome]) -> None:
    """Plan one stage, run it when the plan says so, and record what happened in
    ``refresh_stages`` and in ``done`` (a failed stage too, before its error goes on)."""
    spec = stage_spec(stage)
    plan = plan_stage(settings, spec, since, until)
    log.debug("%s: %s (%s)", stage, "runs" if plan.run else "skipped", plan.reason)
    if not plan.run:
        outcome = StageOutcome(position, stage, plan.reason, None, 0.0, None, "skipped")
    else:
        t0 = time.monotonic()
        try:
            out = run_stage(settings, spec, plan.args, synthetic, track)
        except BaseException as exc:
            reason = f"{plan.reason}; failed: {type(exc).__name__}: {exc}"[:2000]
            failed = StageOutcome(position, stage, reason, None, time.monotonic() - t0, None, "failed")
            _record(settings, refresh_id, plan.fingerprint, failed)
            done.append(failed)
            raise
        summary = summarize(out)
        child = summary.get("run_id")
        outcome = StageOutcome(position, stage, plan.reason, None if child is None else str(child), time.monotonic() - t0,
                               json.dumps(summary, default=str), "ran")
    _record(settings, refresh_id, plan.fingerprint, outcome)
    done.append(outcome)


@revbench_flow("refresh")
def refresh_flow(settings: Settings, stages: list[str] | None = None, synthetic: bool = False,
                 today: date | None = None, recorded_as: str = "refresh") -> RefreshResult:
    """Run ``stages`` (default REVBENCH_REFRESH__STAGES) in order, each skipped when its inputs
    did not change; a stage that fails stops the refresh (later stages need its output). Stages
    that fetch from real services refuse, before any work, a data folder of the demo's SYNTHETIC
    world (or a ``synthetic`` one) unless REVBENCH_MIX_WORLDS (``revbench.worlds``). The run is
    recorded under ``recorded_as``: a flow that runs the refresh as its body (the ratings pull)
    names itself, so ``revbench status`` says which flow ran."""
    chosen = [s for s in STAGE_NAMES if s in (stages if stages is not None else settings.refresh.stages)]
    unknown = sorted(set(stages or []) - set(STAGE_NAMES))
    if unknown:
        from revbench.errors import UsageError

        raise UsageError(f"unknown refresh stage(s) {', '.join(unknown)}; stages: {', '.join(STAGE_NAMES)}")
    # Here too, not only on the command line: `revbench serve`'s schedules run this flow alone.
    check_worlds(settings, chosen, flag=None, synthetic=synthetic)
    track = prefect_active()
    refresh_id = current_run_id()
    since, until = window(settings, today)
    # The refresh's own row is written when it ends: a stage flow marks rows still 'running'
    # as crashed, and the refresh is still running while its stages do.
    started = utcnow()
    done: list[StageOutcome] = []
    status, error = "completed", None
    try:
        with shared_cluster(settings, track) as s:
            for position, stage in enumerate(chosen):
                refresh_stage(s, refresh_id, position, stage, since, until, synthetic, track, done)
    except KeyboardInterrupt:
        status, error = "cancelled", "interrupted (Ctrl-C or SIGTERM); finished stages are kept"
        raise
    except BaseException as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"[:2000]
        raise
    finally:
        with _session(settings) as wh:
            wh.runs.record_run(refresh_id, recorded_as, {"stages": chosen, "since": since, "until": until}, code_version(),
                          started, status, error)
        _publish(refresh_id, done, since, until, status)
    return RefreshResult(refresh_id, since.isoformat(), until.isoformat(), status, done)


def _record(settings: Settings, refresh_id: str, fingerprint: str, outcome: StageOutcome) -> None:
    import polars as pl

    row = {"refresh_id": refresh_id, "fingerprint": fingerprint, **asdict(outcome), "finished_at": utcnow()}
    with _session(settings) as wh:
        wh.runs.upsert(REFRESH_STAGES, pl.DataFrame([row], schema=REFRESH_STAGES.polars_schema))


def _publish(refresh_id: str, done: list[StageOutcome], since: date, until: date, status: str) -> None:
    """One summary for the curator: each stage, whether it ran, why, how long."""
    table = [{"stage": r.stage, "status": r.status, "why": r.reason, "seconds": round(r.seconds, 1)} for r in done]
    publish_table("refresh-stages", table, "What this refresh did with each stage, and why")
    md = [f"## Refresh {refresh_id[:8]} ({status})", "", f"Window {since}..{until}.", "",
          "| stage | status | why | seconds |", "|---|---|---|---:|"]
    md += [f"| {r['stage']} | {r['status']} | {r['why'].replace('|', '/')} | {r['seconds']} |" for r in table]
    publish_markdown("refresh-summary", "\n".join(md), "Refresh summary")
