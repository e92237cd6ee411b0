"""The ratings flow: survey answers -> de-duplicated ratings -> quality flags -> curator decisions
-> pointwise and pairwise tuples -> statistics and figures -> (optionally) the evaluation of every
configured scorer on the warehouse benchmark.

Everything derived (ratings, flags, tuples) is recomputed from the full event history on every
run, so a re-run after a crash or with nothing new gives the same tables; the events themselves
are pulled from the survey store by id, once. Decisions are kept by (flag, evidence): a flag
whose evidence is unchanged is never asked again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import datetime
from typing import Any

import polars as pl

from revbench.errors import UsageError
from revbench.flows.common import Run, flow_run, prefect_active, publish_markdown, publish_table, revbench_flow, stage, stage_task
from revbench.flows.survey import opt_out_stage
from revbench.schemas.quality import DataQualityError, validate_frames
from revbench.schemas.tables import (
    EVENT_REJECTS,
    FLAG_DECISIONS,
    RATING_FLAGS,
    RATING_TUPLES,
    RATINGS,
    SURVEY_EPOCHS,
    SURVEY_EVENTS,
)
from revbench.settings import Settings
from revbench.tasks import ratings as tasks
from revbench.warehouse import utcnow
from revbench.warehouse.survey_store import SurveyStore

log = logging.getLogger("revbench.ratings")
DECISIONS = ("keep", "drop")


def lost_since_pull(store: SurveyStore, epoch: str, high_water: int, digest: str | None) -> bool:
    """Whether the store no longer holds, as it was pulled, the event at its epoch's high-water
    mark: it was emptied or restored from an older backup, and its ids may name new answers."""
    if not high_water:
        return False
    held = store.event(high_water)
    return held is None or (digest is not None and tasks.store_events([held], epoch)["digest"][0] != digest)


@stage_task("pull-events")
def pull_stage(run: Run, store: SurveyStore) -> dict[str, Any]:
    """New events from the survey store, every event resolved again (a new answer supersedes an
    older one), and the ratings they give.

    Events are pulled by (epoch, id) above the epoch's high-water mark; an answer already pulled
    from another epoch (a restored backup, a store given an epoch on upgrade) is recognised by
    its digest and not counted twice. A store that no longer holds the event at its epoch's mark
    was emptied or restored from an older backup: its epoch is renewed (the ids it hands out
    again name new answers) and every answer it holds is checked by digest. What was pulled stays
    in the warehouse whatever the store loses."""
    with stage(run, "pull") as st:
        ctx = st.wh.ratings_context()
        old = tasks.with_digests(st.wh.read(SURVEY_EVENTS))
        known = set(old["digest"].to_list())
        marks = st.wh.survey_epoch_marks()
        epochs = st.wh.read(SURVEY_EPOCHS, order_by=["last_pulled_at"])
        previous = epochs["epoch"][-1] if epochs.height else None
        ident = store.identity()
        epoch = str(ident["epoch"])
        after, at_mark = marks.get(epoch, (0, None))
        lost: dict[str, Any] = {}
        if lost_since_pull(store, epoch, after, at_mark):
            lost = {"lost_from": epoch, "pulled_up_to": after}
            store.renew_epoch(epoch)
            after = 0
        ident, rows = store.snapshot(after)
        if ident["epoch"] != epoch and not lost:  # renewed by another pull meanwhile: all of it, by digest
            after = 0
            ident, rows = store.snapshot(0)
        epoch = str(ident["epoch"])
        read = tasks.store_events(rows, epoch)
        if lost:  # the digests leave the epoch out: the store read once, after its renewal, tells the gap
            lost["held_up_to"] = tasks.restored_up_to(read, known, lost["pulled_up_to"])
        fresh = ~pl.col("digest").is_in(list(known))
        incoming = read.filter(fresh).unique("digest", keep="first", maintain_order=True)
        found = tasks.PullFound(epoch=epoch, origin=str(ident["origin"]), after=after, new=incoming.height,
                                known=read.height - incoming.height, first=not marks and not lost,
                                previous=previous, **lost)
        now = utcnow()
        incoming = incoming.with_columns(pl.lit(run.run_id).alias("run_id"), pl.lit(now).alias("pulled_at"))
        cols = [*tasks.EVENT_COLUMNS, "run_id", "pulled_at"]
        events = pl.concat([old.select(cols), incoming.select(cols)], how="vertical_relaxed")
        resolved = tasks.resolve_events(events, ctx["invitations"])
        # Rows pulled before keep their run; a changed disposition or a first digest updates them.
        st.wh.upsert(SURVEY_EVENTS, resolved, only_if="survey_events.disposition IS DISTINCT FROM excluded.disposition "
                                                      "OR survey_events.digest IS NULL")
        top = read.sort("event_id").tail(1)
        seen = epochs.filter(pl.col("epoch") == epoch)
        st.wh.upsert(SURVEY_EPOCHS, SURVEY_EPOCHS.conform(pl.DataFrame([{
            "epoch": epoch, "high_water": int(top["event_id"][0]) if top.height else after,
            "high_water_digest": top["digest"][0] if top.height else marks.get(epoch, (0, None))[1],
            "origin": ident["origin"], "renewed_from": ident["renewed_from"],
            "store_created_at": datetime.fromisoformat(str(ident["created_at"])) if ident["created_at"] else None,
            "first_pulled_at": seen["first_pulled_at"][0] if seen.height else now, "last_pulled_at": now,
            "new_events": incoming.height, "known_events": found.known, "summary": found.line(), "run_id": run.run_id}])))
        ratings = tasks.latest_ratings(resolved, ctx["invitations"], ctx["categories"])
        by = dict(resolved.group_by("disposition").len().iter_rows())
        st.result.rows_in, st.result.rows_out = incoming.height, ratings.height
        st.result.rejected = sum(by.get(k, 0) for k in EVENT_REJECTS)
    return {"resolved": resolved, "ratings": ratings, "similarity": ctx["similarity"], "pulled": incoming.height,
            "events": resolved.height, "dispositions": by, "found": found}


@stage_task("flag")
def flag_stage(run: Run, pulled: dict[str, Any]) -> pl.DataFrame:
    """Every rule over the current ratings; flags that no longer fire stay, marked inactive."""
    with stage(run, "flag") as st:
        flags = tasks.find_flags(pulled["ratings"], pulled["resolved"], pulled["similarity"], st.settings.ratings)
        known = st.wh.read(RATING_FLAGS)
        gone = known.filter(~pl.col("flag_id").is_in(flags["flag_id"].implode()) & pl.col("active"))
        rows = flags.join(known.select("flag_id", "evidence_hash", "flagged_at"), on=["flag_id", "evidence_hash"], how="left")
        rows = rows.with_columns(pl.lit(True).alias("active"), pl.lit(run.run_id).alias("run_id"),
                                 pl.col("flagged_at").fill_null(utcnow()))
        st.wh.upsert(RATING_FLAGS, pl.concat([RATING_FLAGS.conform(rows), gone.with_columns(pl.lit(False).alias("active"))]))
        st.result.rows_in, st.result.rows_out = pulled["ratings"].height, flags.height
    return flags


def flags_markdown(flags: pl.DataFrame, ratings: pl.DataFrame) -> str:
    """The flagged annotators and ratings with their evidence, for the curator."""
    if flags.height == 0:
        return "No flags."
    lines = ["| flag | rule | annotator | ratings in doubt | evidence |", "|---|---|---|---|---|"]
    values = {(r, p): v for r, p, v in ratings.select("reviewer_id", "paper_id", "rating").iter_rows()}
    for f in flags.iter_rows(named=True):
        shown = ", ".join(f"{p}={values.get((f['reviewer_id'], p), '?')}" for p in f["paper_ids"])
        lines.append(f"| `{f['flag_id']}` | {f['rule']} | {f['reviewer_id']} | {shown} | `{f['evidence']}` |")
    return "\n".join(lines)


def _decide(run: Run, open_flags: pl.DataFrame, decide: str | None, curator: str) -> pl.DataFrame:
    """Decisions for the undecided flags: given on the command line, by the unattended policy,
    or asked of the curator in the Prefect UI (the run pauses, letting go of the warehouse)."""
    now = utcnow()

    def rows(decided: dict[str, tuple[str, str]], by: str) -> pl.DataFrame:
        """``decided``: flag id -> (decision, reason); flags left out stay undecided."""
        return pl.DataFrame([{"flag_id": f, "evidence_hash": h, "decision": decided[f][0], "reason": decided[f][1],
                              "decided_by": by, "decided_at": now, "run_id": run.run_id}
                             for f, h in open_flags.select("flag_id", "evidence_hash").iter_rows() if f in decided],
                            schema=FLAG_DECISIONS.polars_schema)

    every = open_flags["flag_id"].to_list()
    if decide is not None:
        return rows(dict.fromkeys(every, (decide, "")), curator or f"command line (--decide {decide})")
    policy = run.settings.ratings.unattended_decision
    if policy != "wait":
        return rows(dict.fromkeys(every, (policy, "")), f"policy (REVBENCH_RATINGS__UNATTENDED_DECISION={policy})")
    if not prefect_active():
        raise UsageError(f"{open_flags.height} flags wait for a curator's decision (their ratings are pending): pass "
                         "--decide keep or --decide drop, set REVBENCH_RATINGS__UNATTENDED_DECISION, or run tracked "
                         "and answer in the Prefect UI")
    from prefect.flow_runs import pause_flow_run

    from revbench.flows.ratings_input import FlagDecisions

    form = FlagDecisions.with_initial_data(
        description=f"{open_flags.height} flags wait for a decision. Review the 'ratings-flags' artifact, then keep or drop "
                    "each flag's ratings.",
        decisions=[{"flag_id": f, "decision": "keep", "reason": ""} for f in open_flags["flag_id"].to_list()])
    with run.released(run.settings.ratings.decision_timeout_seconds):
        answer = pause_flow_run(wait_for_input=form, timeout=run.settings.ratings.decision_timeout_seconds, poll_interval=2)
    decided = {d.flag_id: (d.decision, d.reason) for d in answer.decisions if d.flag_id in set(every)}
    unknown = [d.flag_id for d in answer.decisions if d.flag_id not in decided]
    if unknown:
        log.warning("decisions on unknown flags ignored: %s", ", ".join(unknown))
    return rows(decided, answer.curator or "Prefect UI")


@stage_task("record-decisions")
def record_decisions_stage(run: Run, new: pl.DataFrame, asked: int) -> pl.DataFrame:
    """Store the new decisions; returns every decision on record."""
    with stage(run, "decide") as st:
        if new.height:
            st.wh.upsert(FLAG_DECISIONS, new)
        st.result.rows_in, st.result.rows_out = asked, new.height
        return st.wh.read(FLAG_DECISIONS)


@stage_task("tuples")
def tuples_stage(run: Run, ratings: pl.DataFrame, flags: pl.DataFrame, decisions: pl.DataFrame) -> dict[str, Any]:
    """Apply the decisions, store the ratings (dropped ones marked) and the tuples of the kept ones."""
    with stage(run, "tuples") as st:
        final = tasks.apply_decisions(ratings, flags, decisions)
        report = validate_frames({RATINGS: final})
        if not report.success:
            publish_markdown("ratings-data-quality", report.to_markdown(), "Checks that stopped the load")
            raise DataQualityError(report)
        pairs = tasks.tuples(final)
        st.wh.replace_all(RATINGS, final)
        st.wh.replace_all(RATING_TUPLES, pairs)
        st.result.rows_in, st.result.rows_out = final.height, pairs.height
        st.result.rejected = final.filter(pl.col("status") == "dropped").height
    return {"ratings": final, "tuples": pairs}


@revbench_flow("ratings")
def ratings_flow(settings: Settings, decide: str | None = None, curator: str = "", evaluate: bool | None = None) -> dict[str, Any]:
    """Pull survey answers into ratings, flag suspicious patterns, apply curator decisions, build
    the tuples and statistics, then (``evaluate``, default from settings) evaluate the
    configured scorers on the warehouse benchmark."""
    if decide is not None and decide not in DECISIONS:
        raise UsageError(f"--decide {decide!r}: expected keep or drop")
    cfg = settings.ratings
    run_evaluation = cfg.evaluate_after if evaluate is None else evaluate
    if run_evaluation:  # checked before any work, not after the ratings are built
        from revbench.evaluation.plan import check_scorers

        check_scorers(settings, list(cfg.evaluate_scorers), "REVBENCH_RATINGS__EVALUATE_SCORERS")
    store = SurveyStore(settings.survey_store_path)
    report_dir = settings.data_dir / "reports" / "ratings"
    with flow_run(settings, "ratings", {"decide": decide, "curator": curator, "evaluate": evaluate}) as run:
        pulled = pull_stage(run, store)
        # Opt-outs reach the warehouse with the answers, not only before the next wave: a store
        # replaced meanwhile would take them with it.
        before = run.wh.opted_out_emails()
        opted_out = opt_out_stage(run, store)
        found = dataclasses.replace(pulled["found"], opt_outs=len(opted_out - before))
        log.info("%s", found.line())
        flags = flag_stage(run, pulled)
        # Asked from the flow itself: Prefect pauses flow runs, not task runs.
        earlier = run.wh.read(FLAG_DECISIONS)
        open_flags = tasks.undecided(flags, earlier)
        publish_markdown("ratings-flags", flags_markdown(flags, pulled["ratings"]),
                         "Flagged annotators and ratings, with the evidence")
        if open_flags.height:
            # Stored before asking: while flags wait, their ratings are kept as rows, pending.
            tuples_stage(run, pulled["ratings"], flags, earlier)
        new = _decide(run, open_flags, decide, curator) if open_flags.height else FLAG_DECISIONS.empty()
        decisions = record_decisions_stage(run, new, open_flags.height)
        built = tuples_stage(run, pulled["ratings"], flags, decisions)
        final, pairs = built["ratings"], built["tuples"]
        stats = tasks.statistics(final)
        figure = tasks.plot_distributions(stats, report_dir / "distributions.png") if stats.ratings else None
        md = stats.markdown()
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / "statistics.md").write_text(md)
        status = dict(final.group_by("status").len().iter_rows())
        kinds = dict(pairs.group_by("kind").len().iter_rows())
        disp = pulled["dispositions"]
        counts = {"events pulled": pulled["pulled"], "events already known": found.known, "opt-outs pulled": found.opt_outs,
                  "events": pulled["events"], "duplicates": disp.get("superseded", 0),
                  "skips": disp.get("skip", 0), "unknown invitation": disp.get("unknown_invitation", 0),
                  "unknown paper": disp.get("unknown_paper", 0), "invalid rating": disp.get("invalid_rating", 0),
                  "ratings": final.height, "kept": status.get("kept", 0),
                  "dropped": status.get("dropped", 0), "pending": status.get("pending", 0), "flags": flags.height,
                  "flags asked": open_flags.height, "paper-centric tuples": kinds.get("paper_centric", 0),
                  "reviewer-centric tuples": kinds.get("reviewer_centric", 0)}
        publish_table("ratings-counts", [{"what": k, "n": v} for k, v in counts.items()], "Events in, ratings out, by outcome")
        publish_markdown("ratings-statistics", md + (f"\n\nFigure: `{figure}`" if figure else ""),
                         "Counts by category and round, agreement")
        flag_rows = flags.join(decisions.select("flag_id", "evidence_hash", "decision", "decided_by"),
                               on=["flag_id", "evidence_hash"], how="left")
        out = {"run_id": run.run_id, "survey store": found.line(), **counts, "alpha": stats.alpha,
               "alpha_papers": stats.alpha_papers,
               "statistics": md, "figure": str(figure) if figure else None,
               "flag_list": [{k: (json.loads(v) if k == "evidence" else v) for k, v in r.items()} for r in flag_rows.to_dicts()]}
    if run_evaluation and final.filter(pl.col("status") == "kept").height:
        from revbench.flows.evaluate import evaluate_configured

        out["evaluation"] = evaluate_configured(settings, f"warehouse={settings.warehouse_path}",
                                                settings.data_dir / "reports" / "warehouse")
    return out
