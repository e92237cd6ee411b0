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
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import UsageError
from revbench.flows.common import RUN_LOG_ONLY, Run, flow_run, publish_markdown, publish_table, revbench_flow, stage, stage_task
from revbench.flows.curator import DecidedElsewhere, Waiting, decision_made, mark_outcome, wait_for_curator
from revbench.flows.opt_outs import opt_out_stage
from revbench.flows.pieces import prefect_active
from revbench.flows.results import ConfiguredEvaluation, FlowResult
from revbench.flows.store_pull import read_store
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
from revbench.tasks import curator_forms as forms
from revbench.tasks import rating_stats
from revbench.tasks import ratings as tasks
from revbench.warehouse import utcnow
from revbench.warehouse.store import SurveyStore

log = logging.getLogger("revbench.ratings")
DECISIONS = ("keep", "drop")
FLAGS_DECISION = "ratings-flags"
"""The key of the decision ratings runs wait for: any flag decision recorded ends every such wait."""


@dataclass(frozen=True, kw_only=True)
class RatingsResult(FlowResult, tasks.Outcome):
    """What one ratings run did: the survey store's line, events in, ratings out by status and
    tuples by kind (the fields of ``tasks.ratings.Outcome``), flags and their decisions,
    statistics, and the evaluation when it ran."""

    run_id: str
    survey_store: str
    events_pulled: int
    events_already_known: int
    opt_outs_pulled: int
    events: int
    flags: int
    flags_asked: int
    alpha: float | None
    alpha_papers: int
    statistics: str
    figure: str | None
    flag_list: list[dict[str, Any]]
    evaluation: ConfiguredEvaluation | None = None


COUNTS = (("events pulled", "events_pulled"), ("events already known", "events_already_known"),
          ("opt-outs pulled", "opt_outs_pulled"), ("events", "events"), ("duplicates", "duplicates"), ("skips", "skips"),
          ("unknown invitation", "unknown_invitation"), ("unknown paper", "unknown_paper"),
          ("invalid rating", "invalid_rating"), ("ratings", "ratings"), ("kept", "kept"), ("dropped", "dropped"),
          ("pending", "pending"), ("flags", "flags"), ("flags asked", "flags_asked"),
          ("paper-centric tuples", "paper_centric_tuples"), ("reviewer-centric tuples", "reviewer_centric_tuples"))
"""The counts a run shows the curator (label, field of :class:`RatingsResult`)."""


@dataclass(frozen=True)
class Pulled:
    """What the pull stage found: every event resolved, the ratings they give, the pool evidence
    the flags need, how many events were new and in all, events by disposition, and the store."""

    resolved: pl.DataFrame
    ratings: pl.DataFrame
    similarity: pl.DataFrame
    pulled: int
    events: int
    dispositions: dict[str, int]
    found: tasks.PullFound


@dataclass(frozen=True)
class Built:
    """The ratings with the decisions applied, and the tuples of the kept ones."""

    ratings: pl.DataFrame
    tuples: pl.DataFrame


@stage_task("pull-events")
def pull_stage(run: Run, store: SurveyStore) -> Pulled:
    """New events from the survey store, every event resolved again (a new answer supersedes an
    older one), and the ratings they give.

    Events are pulled by (epoch, id) above the epoch's high-water mark; an answer already pulled
    from another epoch (a restored backup, a store given an epoch on upgrade) is recognised by
    its digest and not counted twice. A store that no longer holds the event at its epoch's mark
    was emptied or restored from an older backup: its epoch is renewed (the ids it hands out
    again name new answers) and every answer it holds is checked by digest. What was pulled stays
    in the warehouse whatever the store loses."""
    with stage(run, "pull") as st:
        ctx = st.wh.ratings.ratings_context()
        old = tasks.with_digests(st.wh.read(SURVEY_EVENTS))
        known = set(old["digest"].to_list())
        marks = st.wh.ratings.survey_epoch_marks()
        epochs = st.wh.read(SURVEY_EPOCHS, order_by=["last_pulled_at"])
        snap = read_store(store, marks)
        epoch = str(snap.identity["epoch"])
        read = tasks.store_events(snap.rows, epoch)
        lost = dict(snap.lost)
        if lost:  # the digests leave the epoch out: the store read once, after its renewal, tells the gap
            lost["held_up_to"], lost["missing"] = tasks.lost_events(read, old, known, lost["lost_from"], lost["pulled_up_to"])
        incoming = tasks.fresh_events(read, known)
        found = tasks.PullFound(epoch=epoch, origin=str(snap.identity["origin"]), after=snap.after, new=incoming.height,
                                known=read.height - incoming.height, first=not marks and not lost,
                                previous=epochs["epoch"][-1] if epochs.height else None, **lost)
        now = utcnow()
        resolved = tasks.resolve_events(tasks.event_history(old, incoming, run.run_id, now), ctx["invitations"])
        # Rows pulled before keep their run; a changed disposition or a first digest updates them.
        st.wh.ratings.upsert(SURVEY_EVENTS, resolved, only_if="survey_events.disposition IS DISTINCT FROM excluded.disposition "
                                                      "OR survey_events.digest IS NULL")
        st.wh.ratings.upsert(SURVEY_EPOCHS, tasks.epoch_row(snap.identity, read, found, epochs, marks.get(epoch, (0, None))[1],
                                                    now, run.run_id))
        ratings = tasks.latest_ratings(resolved, ctx["invitations"], ctx["categories"])
        by = tasks.dispositions(resolved)
        st.result.rows_in, st.result.rows_out = incoming.height, ratings.height
        st.result.rejected = sum(by.get(k, 0) for k in EVENT_REJECTS)
    return Pulled(resolved, ratings, ctx["similarity"], incoming.height, resolved.height, by, found)


@stage_task("flag")
def flag_stage(run: Run, pulled: Pulled) -> pl.DataFrame:
    """Every rule over the current ratings; flags that no longer fire stay, marked inactive."""
    with stage(run, "flag") as st:
        flags = tasks.find_flags(pulled.ratings, pulled.resolved, pulled.similarity, st.settings.ratings)
        st.wh.ratings.upsert(RATING_FLAGS, tasks.flag_rows(flags, st.wh.read(RATING_FLAGS), run.run_id, utcnow()))
        st.result.rows_in, st.result.rows_out = pulled.ratings.height, flags.height
    return flags


def flags_markdown(flags: pl.DataFrame, ratings: pl.DataFrame, titles: Mapping[str, str] | None = None) -> str:
    """The flagged annotators and ratings with their evidence, for the curator: each rated paper by
    its title and linked id (``titles``: arXiv id -> title)."""
    if flags.height == 0:
        return "No flags."
    # Two columns: the Prefect UI's cells never wrap and leave a table about 710 pixels at 1,280,
    # so the annotator, the flag's id (what `decisions` names: the rule and whom it flags) and the
    # evidence share one cell, and the papers the other; the artifact's tables are wrapped besides.
    lines = ["Each flag: the annotator in bold, the flag's id and its evidence; beside it the ratings in doubt.", "",
             "| flag | ratings in doubt |", "|---|---|"]
    for g in forms.flag_groups(flags, ratings, titles):
        for f in g["flags"]:
            shown = "<br>".join(forms.paper_line(x).replace("|", "\\|") for x in f["papers"])
            evidence = f["statistic"].replace("|", "\\|")
            lines.append(f"| **{g['respondent']}**<br>`{f['flag_id']}`<br>{evidence} | {shown} |")
    return "\n".join(lines)


def _decide(run: Run, open_flags: pl.DataFrame, ratings: pl.DataFrame, decide: str | None,
            curator: str) -> tuple[pl.DataFrame, bool]:
    """Decisions for the undecided flags: given on the command line, by the unattended policy,
    or asked of the curator in the Prefect UI (the run pauses, letting go of the warehouse);
    and whether the run waited for them."""
    now = utcnow()

    def rows(decided: dict[str, tuple[str, str]], by: str) -> pl.DataFrame:
        """``decided``: flag id -> (decision, reason); flags left out stay undecided."""
        return pl.DataFrame([{"flag_id": f, "evidence_hash": h, "decision": decided[f][0], "reason": decided[f][1],
                              "decided_by": by, "decided_at": now, "run_id": run.run_id}
                             for f, h in open_flags.select("flag_id", "evidence_hash").iter_rows() if f in decided],
                            schema=FLAG_DECISIONS.polars_schema)

    every = open_flags["flag_id"].to_list()
    if not every:
        return FLAG_DECISIONS.empty(), False
    if decide is not None:
        return rows(dict.fromkeys(every, (decide, "")), curator or f"command line (--decide {decide})"), False
    policy = run.settings.ratings.unattended_decision
    if policy != "wait":
        return rows(dict.fromkeys(every, (policy, "")), f"policy (REVBENCH_RATINGS__UNATTENDED_DECISION={policy})"), False
    if not prefect_active():
        raise UsageError(f"{open_flags.height} flags wait for a curator's decision (their ratings are pending): pass "
                         "--decide keep or --decide drop, set REVBENCH_RATINGS__UNATTENDED_DECISION, or run tracked "
                         "and answer in the Prefect UI")
    decided, who = _ask_curator(run, open_flags, ratings)
    return rows(decided, who), True


def _ask_curator(run: Run, open_flags: pl.DataFrame, ratings: pl.DataFrame) -> tuple[dict[str, tuple[str, str]], str]:
    """The curator's decisions from the Prefect UI form (flag id -> (decision, reason)) and who
    made them; flags the answer does not reach stay pending."""
    from revbench.flows.ratings_input import choices, flag_form

    cfg = run.settings.ratings
    titles = run.wh.ratings.paper_titles(sorted({p for ps in open_flags["paper_ids"].to_list() for p in ps}))
    rules, respondents = forms.rule_entries(open_flags, cfg), forms.respondent_entries(open_flags, ratings, titles)
    form = flag_form(rules, respondents).with_initial_data(
        description=forms.flag_form_markdown(open_flags, ratings, cfg, titles))
    answer = wait_for_curator(run, form, Waiting(
        f"a curator's decisions on {open_flags.height} flags (their ratings are pending)",
        "revbench ratings --decide keep|drop --curator NAME", cfg.decision_timeout_seconds, FLAGS_DECISION))
    if isinstance(answer, DecidedElsewhere):  # recorded by the run that decided: read back with the others
        return {}, answer.by
    by_flag = {d.flag_id: (d.decision, d.reason) for d in answer.decisions}
    unknown = forms.unknown_ids(by_flag, open_flags["flag_id"].to_list())
    if unknown:
        log.warning("decisions on unknown flags ignored: %s", ", ".join(unknown))
    by_rule, by_respondent = choices(answer, rules, respondents)
    decided = forms.resolve_flag_decisions(open_flags, answer.all_flags, by_rule, by_respondent, by_flag, answer.reason)
    if len(decided) < open_flags.height:
        log.warning("%d of %d flags left undecided: their ratings stay pending and are asked about next run",
                    open_flags.height - len(decided), open_flags.height)
    return decided, answer.curator or "Prefect UI"


@stage_task("record-decisions")
def record_decisions_stage(run: Run, new: pl.DataFrame, asked: int) -> pl.DataFrame:
    """Store the new decisions; returns every decision on record."""
    with stage(run, "decide") as st:
        # A flag decided by another run while this one waited keeps that decision.
        new = tasks.undecided(new, st.wh.read(FLAG_DECISIONS))
        if new.height:
            st.wh.ratings.upsert(FLAG_DECISIONS, new)
        st.result.rows_in, st.result.rows_out = asked, new.height
        return st.wh.read(FLAG_DECISIONS)


def _announce(run: Run, asked: pl.DataFrame, decisions: pl.DataFrame) -> None:
    """The decisions beyond the data: those this run recorded end the wait of every run waiting
    for flag decisions (which finish with them); flags asked in this run and dropped, decided
    here or elsewhere while it waited, show on the run (name, log line, ``outcome`` artifact)."""
    mine = decisions.filter(pl.col("run_id") == run.run_id)
    if mine.height:
        by = mine["decided_by"][0]
        counts = ", ".join(f"{n} {d}" for d, n in sorted(mine.group_by("decision").len().iter_rows()))
        decision_made(run, FLAGS_DECISION, by, f"{mine.height} flags decided ({counts}) by {by}",
                      {"curator": by, "reason": f"decided by {by} in run {run.run_id} while this run waited"},
                      {"decided": mine.height})
    dropped = [f for f in tasks.flag_list(asked, decisions) if f["decision"] == "drop"]
    if dropped:
        rows = "\n".join(f"| `{f['flag_id']}` | {f['rule']} | {f['reviewer_id']} | {len(f['paper_ids'])} | {f['decided_by']} |"
                         for f in dropped)
        mark_outcome(run, f"{len(dropped)} flags dropped",
                     f"## {len(dropped)} flags dropped\n\nTheir ratings are kept as rows, marked dropped, and left out "
                     f"of the tuples.\n\n| flag | rule | annotator | ratings | decided by |\n|---|---|---|---|---|\n{rows}")


@stage_task("tuples")
def tuples_stage(run: Run, ratings: pl.DataFrame, flags: pl.DataFrame, decisions: pl.DataFrame) -> Built:
    """Apply the decisions, store the ratings (dropped ones marked) and the tuples of the kept ones."""
    with stage(run, "tuples") as st:
        final = tasks.apply_decisions(ratings, flags, decisions)
        report = validate_frames({RATINGS: final})
        if not report.success:
            publish_markdown("ratings-data-quality", report.to_markdown(), "Checks that stopped the load")
            raise DataQualityError(report)
        pairs = tasks.tuples(final)
        st.wh.ratings.replace_all(RATINGS, final)
        st.wh.ratings.replace_all(RATING_TUPLES, pairs)
        st.result.rows_in, st.result.rows_out = final.height, pairs.height
        st.result.rejected = final.filter(pl.col("status") == "dropped").height
    return Built(final, pairs)


def _report(run: Run, report_dir: Path, pulled: Pulled, found: tasks.PullFound, flags: pl.DataFrame, asked: int,
            decisions: pl.DataFrame, built: Built) -> RatingsResult:
    """The run's counts, statistics and figure: written to ``report_dir``, shown as artifacts."""
    stats = rating_stats.statistics(built.ratings)
    figure = (rating_stats.plot_distributions(stats, report_dir / "distributions.png", run.wh.release.synthetic_corpus())
              if stats.ratings else None)
    md = stats.markdown()
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "statistics.md").write_text(md)
    o = tasks.outcome(pulled.dispositions, built.ratings, built.tuples)
    out = RatingsResult(
        run_id=run.run_id, survey_store=found.line(), events_pulled=pulled.pulled, events_already_known=found.known,
        opt_outs_pulled=found.opt_outs, events=pulled.events, **dataclasses.asdict(o), flags=flags.height, flags_asked=asked,
        alpha=stats.alpha, alpha_papers=stats.alpha_papers, statistics=md, figure=str(figure) if figure else None,
        flag_list=tasks.flag_list(flags, decisions))
    publish_table("ratings-counts", [{"what": label, "n": getattr(out, name)} for label, name in COUNTS],
                  "Events in, ratings out, by outcome")
    publish_markdown("ratings-statistics", md + (f"\n\nFigure: `{figure}`" if figure else ""),
                     "Counts by category and round, agreement")
    return out


@revbench_flow("ratings")
def ratings_flow(settings: Settings, decide: str | None = None, curator: str = "", evaluate: bool | None = None) -> RatingsResult:
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
    # Closed on every thread when the run ends: a connection left to the garbage collector would
    # keep the file open, and a store damaged later could still read as this one in this process.
    with (SurveyStore(settings.survey_store_path) as store,
          flow_run(settings, "ratings", {"decide": decide, "curator": curator, "evaluate": evaluate}) as run):
        pulled = pull_stage(run, store)
        # Opt-outs reach the warehouse with the answers, not only before the next wave: a store
        # replaced meanwhile would take them with it.
        before = run.wh.survey.opted_out_emails()
        opted_out = opt_out_stage(run, store)
        found = dataclasses.replace(pulled.found, opt_outs=len(opted_out - before))
        log.info("%s", found.line(), extra=RUN_LOG_ONLY)  # `revbench ratings` prints it
        flags = flag_stage(run, pulled)
        # Asked from the flow itself: Prefect pauses flow runs, not task runs.
        earlier = run.wh.read(FLAG_DECISIONS)
        open_flags = tasks.undecided(flags, earlier)
        flagged = sorted({p for ps in flags["paper_ids"].to_list() for p in ps}) if flags.height else []
        publish_markdown("ratings-flags", flags_markdown(flags, pulled.ratings, run.wh.ratings.paper_titles(flagged)),
                         "Flagged annotators and ratings, with the evidence")
        if open_flags.height:
            # Stored before asking: while flags wait, their ratings are kept as rows, pending.
            tuples_stage(run, pulled.ratings, flags, earlier)
        new, waited = _decide(run, open_flags, pulled.ratings, decide, curator)
        if waited:  # another run may have pulled answers and flagged them while this one waited
            pulled = pull_stage(run, store)
            flags = flag_stage(run, pulled)
        decisions = record_decisions_stage(run, new, open_flags.height)
        _announce(run, open_flags, decisions)
        built = tuples_stage(run, pulled.ratings, flags, decisions)
        out = _report(run, settings.data_dir / "reports" / "ratings", pulled, found, flags, open_flags.height, decisions,
                      built)
        # Inside the run, on the warehouse it holds: let go in between, another command could take
        # it and fail the evaluation; and a run whose evaluation failed is not completed.
        if run_evaluation and built.ratings.filter(pl.col("status") == "kept").height:
            from revbench.flows.evaluate import evaluate_configured

            out = dataclasses.replace(out, evaluation=evaluate_configured(
                settings, f"warehouse={settings.warehouse_path}", settings.data_dir / "reports" / "warehouse"))
    return out
