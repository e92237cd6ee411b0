"""The survey flow: render a round's invitation emails (or reminders), show them to a curator,
wait for the go, and send them, paced, each exactly once.

A message moves rendered -> sending -> sent (or failed, with the SMTP reply); each step is
committed before the next, Ctrl-C and SIGTERM wait for the message in flight to be recorded,
and a re-run sends only what is still 'rendered'. A message that may have left without our
knowing (its text reached the server and the reply was lost, or it was found 'sending' after a
crash) is 'unconfirmed', with the time and the server: it is listed for the curator and sent again
only by ``survey_resend_flow`` naming it (``revbench survey resend MESSAGE_ID``), never by a
re-run. Opt-outs (from the survey store) are pulled first and honoured in every wave.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import polars as pl

from revbench.errors import ServiceUnavailable, UsageError, note_interrupt
from revbench.flows.common import Run, flow_run, publish_markdown, publish_table, revbench_flow, stage, stage_task
from revbench.retry import PermanentError, TransientError
from revbench.schemas.tables import SURVEY_APPROVALS, SURVEY_INVITATIONS, SURVEY_MESSAGES, SURVEY_OPT_OUTS
from revbench.settings import Settings
from revbench.survey.tokens import LinkSigner
from revbench.tasks import survey as tasks
from revbench.warehouse import utcnow
from revbench.warehouse.survey_store import SurveyStore

log = logging.getLogger("revbench.survey")


def parse_approval(approve: str | None) -> tuple[str, int] | None:
    """``all`` | ``cancel`` | a number N (the first N) -> (decision, N); None when not given."""
    if approve is None:
        return None
    if approve == "all":
        return "approve_all", -1
    if approve == "cancel":
        return "cancel", 0
    if approve.isdigit():
        return "approve_first_n", int(approve)
    raise UsageError(f"--approve {approve!r}: expected all, cancel, or a number of messages")


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while a message is handed to the server and its state recorded,
    so an interrupt never leaves a sent message unrecorded: it takes effect right after.
    (Python-level handlers, not a signal mask: any thread of the process may receive the
    signal, and Python runs its handler in the main thread whatever that thread's mask.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    def hold(signum: int, _frame: object) -> None:
        note_interrupt()
        held.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            raise KeyboardInterrupt(f"signal {held[0]} (held until the message was recorded)")


@stage_task("pull-opt-outs")
def opt_out_stage(run: Run, store: SurveyStore) -> set[str]:
    """Opt-outs recorded by the survey server, kept in the warehouse by address for good."""
    with stage(run, "opt-outs") as st:
        invitations = st.wh.survey_invitations()
        emails = dict(invitations.select("invitation_id", "email").iter_rows()) if invitations.height else {}
        have = st.wh.opted_out_emails()  # kept as first recorded: a later or replaced store never rewrites them
        new = [{"email": emails[i], "invitation_id": i, "source": "survey", "opted_out_at": utcnow()}
               for i in store.opted_out() if i in emails and emails[i] not in have]
        if new:
            st.wh.upsert(SURVEY_OPT_OUTS, pl.DataFrame(new))
        out = have | {r["email"] for r in new}
        st.result.rows_in, st.result.rows_out = len(new), len(out)
    return out


def _render_rows(invs: list[dict[str, Any]], papers: dict[str, dict[str, str]], signer: LinkSigner, settings: Settings,
                 run_id: str, kind: str, open_counts: dict[str, int] | None = None) -> pl.DataFrame:
    rows = []
    for inv in invs:
        m = tasks.render_message(inv, papers, signer, settings.survey, kind, (open_counts or {}).get(inv["invitation_id"], 0))
        rows.append({"message_id": m.message_id, "invitation_id": inv["invitation_id"], "kind": kind, "round": inv["round"],
                     "to_email": inv["email"], "subject": m.subject, "text": m.text, "html": m.html,
                     "headers": json.dumps(m.headers), "template_version": m.template_version, "state": "rendered",
                     "attempts": 0, "rendered_at": utcnow(), "run_id": run_id})
    return pl.DataFrame(rows) if rows else SURVEY_MESSAGES.empty()


@stage_task("render-invitations")
def invitation_stage(run: Run, round: int, signer: LinkSigner, store: SurveyStore, opted_out: set[str]) -> dict[str, Any]:
    """The round's invitations and their emails (new ones only: a re-run keeps what exists)."""
    with stage(run, "render") as st:
        candidates = st.wh.survey_candidates(round)
        if candidates.height == 0:
            raise UsageError(f"round {round} has no invitations yet: run `revbench pools --round {round}` first")
        existing = st.wh.survey_invitations(round)
        invitations, left_out = tasks.plan_invitations(candidates, existing, opted_out, st.wh.contacted_emails(round),
                                                       utcnow())
        if invitations.height:
            st.wh.upsert(SURVEY_INVITATIONS, invitations)
        papers = st.wh.paper_texts(sorted({p for ids in candidates["query_ids"].to_list() for p in ids}))
        store.publish_invitations([{"invitation_id": r["invitation_id"], "round": r["round"],
                                    "papers": [{"paper_id": p, **papers[p]} for p in r["paper_ids"]]}
                                   for r in invitations.iter_rows(named=True)])
        have = set(st.wh.survey_messages(round).filter(pl.col("kind") == "invitation")["invitation_id"].to_list())
        todo = [r for r in invitations.iter_rows(named=True) if r["invitation_id"] not in have]
        messages = _render_rows(todo, papers, signer, run.settings, run.run_id, "invitation")
        if messages.height:
            st.wh.upsert(SURVEY_MESSAGES, messages)
        st.result.rows_in, st.result.rows_out, st.result.rejected = candidates.height, messages.height, left_out.height
    return {"candidates": candidates.height, "rendered": messages.height, "left_out": left_out.to_dicts()}


@stage_task("render-reminders")
def reminder_stage(run: Run, round: int, signer: LinkSigner, store: SurveyStore, opted_out: set[str]) -> dict[str, Any]:
    """A reminder to each invitee with unanswered papers, the last email long enough ago, who
    has not opted out and has had fewer reminders than allowed."""
    with stage(run, "render") as st:
        sv = st.settings.survey
        invitations = st.wh.survey_invitations(round)
        messages = st.wh.survey_messages(round)
        answered = store.answered()
        due_before = utcnow() - timedelta(days=sv.reminder_delay_days)
        todo, open_counts, finished = [], {}, 0
        for inv in invitations.iter_rows(named=True):
            mine = messages.filter(pl.col("invitation_id") == inv["invitation_id"])
            sent = mine.filter(pl.col("state") == "sent")
            if sent.filter(pl.col("kind") == "invitation").height == 0 or inv["email"] in opted_out:
                continue
            open_papers = [p for p in inv["paper_ids"] if p not in answered.get(inv["invitation_id"], {})]
            if not open_papers:
                finished += 1
                continue
            reminders = mine.filter(pl.col("kind").str.starts_with("reminder")).height
            if reminders >= sv.reminder_count or sent["sent_at"].max() > due_before:
                continue
            todo.append({**inv, "kind": f"reminder-{reminders + 1}"})
            open_counts[inv["invitation_id"]] = len(open_papers)
        papers = st.wh.paper_texts(sorted({p for r in todo for p in r["paper_ids"]}))
        frames = [_render_rows([r], papers, signer, run.settings, run.run_id, r["kind"], open_counts) for r in todo]
        rendered = pl.concat(frames) if frames else SURVEY_MESSAGES.empty()
        if rendered.height:
            st.wh.upsert(SURVEY_MESSAGES, rendered)
        st.result.rows_in, st.result.rows_out = invitations.height, rendered.height
    return {"candidates": invitations.height, "rendered": rendered.height, "finished": finished, "left_out": []}


def _pending(run: Run, round: int, kind: str, opted_out: set[str]) -> pl.DataFrame:
    msgs = run.wh.survey_messages(round)
    wave = msgs.filter(pl.col("kind") == "invitation") if kind == "invitation" else msgs.filter(pl.col("kind").str.starts_with("reminder"))
    return wave.filter((pl.col("state") == "rendered") & ~pl.col("to_email").is_in(list(opted_out))).sort("message_id")


def _publish_unconfirmed(rows: list[dict[str, Any]]) -> None:
    publish_table("survey-unconfirmed", rows, "Messages that may or may not have arrived (the server's reply was "
                  "lost, or a run stopped while sending): never sent again by themselves; check with the "
                  "recipient or the server's log, then `revbench survey resend MESSAGE_ID` sends one again")


def _ask_curator(run: Run, round: int, kind: str, pending: pl.DataFrame, approve: tuple[str, int] | None,
                 approver: str) -> tuple[str, int, str]:
    """(decision, how many, who): given on the command line, automatic by setting, or asked
    of the curator in the Prefect UI (a tracked run pauses until the form is answered)."""
    if approve is not None:
        return approve[0], pending.height if approve[1] < 0 else min(approve[1], pending.height), approver or "command line"
    if run.settings.survey.auto_approve:
        return "auto", pending.height, "REVBENCH_SURVEY__AUTO_APPROVE"
    from revbench.flows.common import prefect_active

    if not prefect_active():
        raise UsageError(f"{pending.height} {kind} messages of round {round} wait for a curator's go: pass --approve all, "
                         "--approve N (the first N) or --approve cancel, or run tracked and answer in the Prefect UI")
    from prefect.flow_runs import pause_flow_run

    from revbench.flows.survey_input import SendApproval

    form = SendApproval.with_initial_data(description=(
        f"Send {pending.height} {kind} emails of round {round}? Review the 'survey-recipients' and "
        "'survey-sample' artifacts first."))
    with run.released(run.settings.survey.approval_timeout_seconds):  # refreshes may write meanwhile
        answer = pause_flow_run(wait_for_input=form, timeout=run.settings.survey.approval_timeout_seconds, poll_interval=2)
    n = pending.height if answer.decision == "approve_all" else min(answer.first_n, pending.height)
    return answer.decision, 0 if answer.decision == "cancel" else n, answer.approver or "Prefect UI"


@stage_task("send")
def send_stage(run: Run, batch: pl.DataFrame) -> dict[str, int]:
    """Send ``batch`` (already approved), paced, committing each message's state as it goes."""
    from revbench.clients.smtp import OutcomeUnknown, SmtpSender

    with stage(run, "send") as st:
        sv = st.settings.survey
        sender = SmtpSender(st.settings.smtp, attempts=sv.smtp_attempts)
        sender.probe()
        counts = {"sent": 0, "failed": 0, "deferred": 0, "unconfirmed": 0}
        # A server that defers message after message, or loses reply after reply, is in trouble:
        # stop the wave (the rest stay 'rendered' for the next run) instead of spending every
        # message's retries on it or leaving every message in doubt.
        in_a_row, breaker = 0, st.settings.http.breaker_failures
        streak: set[str] = set()

        def count_trouble(what: str, exc: Exception) -> None:
            nonlocal in_a_row
            counts[what] += 1
            in_a_row += 1
            streak.add(what)
            if in_a_row >= breaker:
                raise ServiceUnavailable("SMTP server", sender.url, f"{in_a_row} messages in a row {' or '.join(sorted(streak))}, "
                                         f"the last with {exc}; the rest stay unsent for the next run") from None

        interval = 60.0 / sv.messages_per_minute
        with sender, st.progress(batch.height, f"send {batch.height} emails") as progress:
            last = 0.0
            for row in batch.iter_rows(named=True):
                wait = interval - (time.monotonic() - last)
                if wait > 0 and last:
                    time.sleep(wait)
                last = time.monotonic()
                msg = tasks.email_message(row, sv)
                with deferred_interrupts():
                    st.wh.set_message_state(row["message_id"], "sending", attempts=row["attempts"] + 1,
                                            smtp_server=sender.server)
                    try:
                        reply = sender.send(msg)
                    except PermanentError as exc:
                        st.wh.set_message_state(row["message_id"], "failed", reply=str(exc))
                        counts["failed"] += 1
                    except OutcomeUnknown as exc:
                        # It may be in the recipient's mailbox: sending it again could make a copy.
                        st.wh.set_message_state(row["message_id"], "unconfirmed", reply=str(exc), unconfirmed_at=utcnow())
                        log.warning("message %s to %s is unconfirmed: %s", row["message_id"], row["to_email"], exc)
                        count_trouble("unconfirmed", exc)
                    except TransientError as exc:
                        st.wh.set_message_state(row["message_id"], "rendered", reply=str(exc))  # tried again next run
                        count_trouble("deferred", exc)
                    except BaseException:
                        # Raised before the message's end of data left (``SmtpSender`` turns anything
                        # later into OutcomeUnknown): nothing can have been delivered.
                        st.wh.set_message_state(row["message_id"], "rendered")
                        raise
                    else:
                        st.wh.set_message_state(row["message_id"], "sent", reply=reply, sent_at=utcnow())
                        counts["sent"] += 1
                        in_a_row = 0
                        streak.clear()
                progress.advance()
        st.result.rows_in, st.result.rows_out, st.result.rejected = batch.height, counts["sent"], counts["failed"]
    return counts


def write_outbox(settings: Settings, batch: pl.DataFrame, round: int) -> str:
    """``--dry-run``: every pending message as an .eml file for review; nothing is sent."""
    out = settings.data_dir / "survey" / f"round-{round}" / "outbox"
    out.mkdir(parents=True, exist_ok=True)
    for row in batch.iter_rows(named=True):
        name = row["message_id"].strip("<>").split("@")[0]
        (out / f"{name}.eml").write_bytes(tasks.email_message(row, settings.survey).as_bytes())
    return str(out)


@revbench_flow("survey")
def survey_flow(settings: Settings, round: int = 1, kind: str = "invitation", dry_run: bool = False,
                approve: str | None = None, approver: str = "") -> dict[str, Any]:
    """Render and send one wave of survey emails for a round: ``kind`` is ``invitation`` or
    ``reminder``. Nothing is sent without a curator's go (``approve``, the Prefect UI, or
    REVBENCH_SURVEY__AUTO_APPROVE) or with ``dry_run``."""
    if kind not in ("invitation", "reminder"):
        raise UsageError(f"unknown kind {kind!r}: invitation or reminder")
    decision_given = parse_approval(approve)
    sv = settings.survey
    signer = LinkSigner(sv.signing_key, sv.old_signing_keys, sv.link_max_age_days)
    if not dry_run and not settings.smtp.host:
        raise UsageError("REVBENCH_SMTP__HOST is not set: nothing can be sent (use --dry-run to write .eml files)")
    store = SurveyStore(settings.survey_store_path)
    params = {"round": round, "kind": kind, "dry_run": dry_run, "approve": approve}
    with flow_run(settings, "survey", params) as run:
        interrupted = _recover(run)
        opted_out = opt_out_stage(run, store)
        prep = (invitation_stage if kind == "invitation" else reminder_stage)(run, round, signer, store, opted_out)
        pending = _pending(run, round, kind, opted_out)
        recipients = [{"to": r["to_email"], "papers": r["text"].count("\n5 (Top Expert): "), "message": r["message_id"],
                       "state": r["state"]} for r in pending.iter_rows(named=True)]
        publish_table("survey-recipients", recipients, f"Round {round}: {kind} messages waiting to be sent")
        publish_table("survey-left-out", prep["left_out"], "People left out of this wave, with the reason")
        if pending.height:
            publish_markdown("survey-sample", "```\n" + pending.row(0, named=True)["text"] + "\n```",
                             f"A rendered {kind} message (plain-text part)")
        stats = {"round": round, "kind": kind, **prep, "pending": pending.height, "interrupted": interrupted,
                 "opted_out": len(opted_out), "sent": 0, "failed": 0, "deferred": 0, "unconfirmed": 0, "outbox": None,
                 "run_id": run.run_id}
        try:
            if dry_run:
                stats["outbox"] = write_outbox(settings, pending, round)
                return stats
            if pending.height == 0:
                return stats
            decision, n, who = _ask_curator(run, round, kind, pending, decision_given, approver)
            run.wh.upsert(SURVEY_APPROVALS, pl.DataFrame([{"run_id": run.run_id, "round": round, "kind": kind,
                                                             "decision": decision, "approved": n, "approver": who,
                                                             "decided_at": utcnow()}]))
            stats.update(decision=decision, approved=n, approver=who)
            if decision == "cancel" or n == 0:
                return stats
            stats.update(send_stage(run, pending.head(n)))
            return stats
        finally:
            # Listed however the wave ended: a breaker that stopped it leaves its doubts too.
            stats["unconfirmed_messages"] = tasks.unconfirmed_rows(run.wh.unconfirmed_messages(round))
            _publish_unconfirmed(stats["unconfirmed_messages"])


def _recover(run: Run) -> int:
    """Messages an earlier run left 'sending' (killed mid-send) become unconfirmed."""
    n = run.wh.mark_unconfirmed()
    if n:
        log.warning("%d messages were being sent when an earlier run stopped: marked unconfirmed, not sent again "
                    "(`revbench survey status` lists them; `revbench survey resend MESSAGE_ID` sends one again)", n)
    return n


def message_id(given: str) -> str:
    """A Message-ID as a curator may type it, with or without its angle brackets."""
    given = given.strip()
    return given if given.startswith("<") else f"<{given}>"


@revbench_flow("survey-resend")
def survey_resend_flow(settings: Settings, message_ids: list[str], approver: str = "") -> dict[str, Any]:
    """Send again the unconfirmed messages a curator names (after checking they did not arrive):
    the only way a message that may have left goes out again. Each keeps its Message-ID, so a
    mailbox that has the first copy can recognise the second."""
    if not message_ids:
        raise UsageError("name the message(s) to send again: `revbench survey status` lists the unconfirmed ones")
    if not settings.smtp.host:
        raise UsageError("REVBENCH_SMTP__HOST is not set: nothing can be sent")
    wanted = list(dict.fromkeys(message_id(m) for m in message_ids))
    store = SurveyStore(settings.survey_store_path)
    with flow_run(settings, "survey-resend", {"message_ids": wanted, "approver": approver}) as run:
        interrupted = _recover(run)
        msgs = run.wh.survey_messages().filter(pl.col("message_id").is_in(wanted))
        states = dict(msgs.select("message_id", "state").iter_rows())
        for m in wanted:
            if m not in states:
                raise UsageError(f"no message {m} in the warehouse: `revbench survey status` lists the unconfirmed ones")
            if states[m] != "unconfirmed":
                raise UsageError(f"message {m} is {states[m]}, not unconfirmed: only an unconfirmed message is sent "
                                 "again by name (a rendered one goes with its wave)")
        opted_out = opt_out_stage(run, store)
        batch = msgs.filter(~pl.col("to_email").is_in(list(opted_out))).sort("message_id")
        stats: dict[str, Any] = {"requested": len(wanted), "opted_out": msgs.height - batch.height,
                                 "interrupted": interrupted, "sent": 0, "failed": 0, "deferred": 0, "unconfirmed": 0,
                                 "approver": approver or "command line", "run_id": run.run_id}
        try:
            if batch.height:
                stats.update(send_stage(run, batch))
            return stats
        finally:
            stats["unconfirmed_messages"] = tasks.unconfirmed_rows(run.wh.unconfirmed_messages())
            _publish_unconfirmed(stats["unconfirmed_messages"])
