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

import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from revbench.errors import ServiceUnavailable, UsageError, note_interrupt
from revbench.flows.common import (
    Run,
    Stage,
    flow_run,
    publish_markdown,
    publish_table,
    revbench_flow,
    stage,
    stage_task,
)
from revbench.flows.curator import DecidedElsewhere, Waiting, decision_made, wait_for_curator
from revbench.flows.opt_outs import opt_out_stage
from revbench.flows.pieces import prefect_active
from revbench.flows.results import FlowResult
from revbench.retry import PermanentError, TransientError
from revbench.schemas.tables import SURVEY_APPROVALS, SURVEY_INVITATIONS, SURVEY_MESSAGES
from revbench.settings import Settings
from revbench.survey.tokens import LinkSigner
from revbench.tasks import survey as tasks
from revbench.warehouse import utcnow
from revbench.warehouse.store import SurveyStore

if TYPE_CHECKING:
    from revbench.clients.smtp import SmtpSender

log = logging.getLogger("revbench.survey")


@dataclass(frozen=True)
class SendCounts:
    """What became of the messages one send stage was given."""

    sent: int = 0
    failed: int = 0
    deferred: int = 0
    unconfirmed: int = 0


@dataclass(frozen=True)
class Prepared:
    """What rendering a wave found: its candidates, the messages rendered now, the people left
    out with the reason and, for reminders, the invitees who answered every paper."""

    candidates: int
    rendered: int
    left_out: list[dict[str, Any]]
    finished: int | None = None


@dataclass(frozen=True)
class Delivery:
    """How a wave ended: written to an outbox, decided on (and what was sent), or nothing to send."""

    counts: SendCounts = SendCounts()
    outbox: str | None = None
    decision: str | None = None
    approved: int | None = None
    approver: str | None = None


@dataclass(frozen=True, kw_only=True)
class SurveyWave(FlowResult):
    """What one wave did: rendered, waiting, left out, the curator's decision, what was sent,
    and the messages in doubt. ``finished`` only for reminders; the decision only once asked."""

    round: int
    kind: str
    candidates: int
    rendered: int
    left_out: list[dict[str, Any]]
    finished: int | None
    pending: int
    interrupted: int
    opted_out: int
    sent: int
    failed: int
    deferred: int
    unconfirmed: int
    outbox: str | None
    run_id: str
    decision: str | None
    approved: int | None
    approver: str | None
    unconfirmed_messages: list[dict[str, str]]


@dataclass(frozen=True, kw_only=True)
class SurveyResend(FlowResult):
    """What one resend of named messages did."""

    requested: int
    opted_out: int
    interrupted: int
    sent: int
    failed: int
    deferred: int
    unconfirmed: int
    approver: str
    run_id: str
    unconfirmed_messages: list[dict[str, str]]


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


@stage_task("render-invitations")
def invitation_stage(run: Run, round: int, signer: LinkSigner, store: SurveyStore, opted_out: set[str]) -> Prepared:
    """The round's invitations and their emails (new ones only: a re-run keeps what exists)."""
    with stage(run, "render") as st:
        candidates = st.wh.survey.survey_candidates(round)
        if candidates.height == 0:
            raise UsageError(f"round {round} has no invitations yet: run `revbench pools --round {round}` first")
        existing = st.wh.survey.survey_invitations(round)
        invitations, left_out = tasks.plan_invitations(candidates, existing, opted_out, st.wh.survey.contacted_emails(round),
                                                       utcnow())
        if invitations.height:
            st.wh.survey.upsert(SURVEY_INVITATIONS, invitations)
        papers = st.wh.survey.paper_texts(sorted({p for ids in candidates["query_ids"].to_list() for p in ids}))
        store.publish_invitations([{"invitation_id": r["invitation_id"], "round": r["round"],
                                    "papers": [{"paper_id": p, **papers[p]} for p in r["paper_ids"]]}
                                   for r in invitations.iter_rows(named=True)])
        have = set(st.wh.survey.survey_messages(round).filter(pl.col("kind") == "invitation")["invitation_id"].to_list())
        todo = [tasks.ToRender(r, "invitation") for r in invitations.iter_rows(named=True) if r["invitation_id"] not in have]
        messages = tasks.message_rows(todo, papers, signer, st.settings.survey, run.run_id, utcnow())
        if messages.height:
            st.wh.survey.upsert(SURVEY_MESSAGES, messages)
        st.result.rows_in, st.result.rows_out, st.result.rejected = candidates.height, messages.height, left_out.height
    return Prepared(candidates.height, messages.height, left_out.to_dicts())


@stage_task("render-reminders")
def reminder_stage(run: Run, round: int, signer: LinkSigner, store: SurveyStore, opted_out: set[str]) -> Prepared:
    """A reminder to each invitee with unanswered papers, the last email long enough ago, who
    has not opted out and has had fewer reminders than allowed."""
    with stage(run, "render") as st:
        sv = st.settings.survey
        invitations = st.wh.survey.survey_invitations(round)
        due_before = utcnow() - timedelta(days=sv.reminder_delay_days)
        reminders = tasks.due_reminders(invitations, st.wh.survey.survey_messages(round), store.answered(), opted_out,
                                        due_before, sv.reminder_count)
        papers = st.wh.survey.paper_texts(sorted({p for r in reminders.due for p in r.invitation["paper_ids"]}))
        rendered = tasks.message_rows(reminders.due, papers, signer, sv, run.run_id, utcnow())
        if rendered.height:
            st.wh.survey.upsert(SURVEY_MESSAGES, rendered)
        st.result.rows_in, st.result.rows_out = invitations.height, rendered.height
    return Prepared(invitations.height, rendered.height, [], reminders.finished)


def _publish_wave(round: int, kind: str, pending: pl.DataFrame, left_out: list[dict[str, Any]]) -> None:
    publish_table("survey-recipients", tasks.recipient_rows(pending), f"Round {round}: {kind} messages waiting to be sent")
    publish_table("survey-left-out", left_out, "People left out of this wave, with the reason")
    if pending.height:
        publish_markdown("survey-sample", "```\n" + pending.row(0, named=True)["text"] + "\n```",
                         f"A rendered {kind} message (plain-text part)")


def _publish_unconfirmed(rows: list[dict[str, Any]]) -> None:
    publish_table("survey-unconfirmed", rows, "Messages that may or may not have arrived (the server's reply was "
                  "lost, or a run stopped while sending): never sent again by themselves; check with the "
                  "recipient or the server's log, then `revbench survey resend MESSAGE_ID` sends one again")


def _ask_curator(run: Run, round: int, kind: str, pending: pl.DataFrame, approve: tuple[str, int] | None,
                 approver: str) -> tuple[str, int, str] | DecidedElsewhere:
    """(decision, how many, who): given on the command line, automatic by setting, or asked
    of the curator in the Prefect UI (a tracked run pauses until the form is answered, or until
    another run records the wave's decision: then ``DecidedElsewhere``)."""
    if approve is not None:
        return approve[0], pending.height if approve[1] < 0 else min(approve[1], pending.height), approver or "command line"
    if run.settings.survey.auto_approve:
        return "auto", pending.height, "REVBENCH_SURVEY__AUTO_APPROVE"
    if not prefect_active():
        raise UsageError(f"{pending.height} {kind} messages of round {round} wait for a curator's go: pass --approve all, "
                         "--approve N (the first N) or --approve cancel, or run tracked and answer in the Prefect UI")
    from revbench.flows.survey_input import SendApproval

    form = SendApproval.with_initial_data(description=(
        f"Send {pending.height} {kind} emails of round {round}? Review the 'survey-recipients' and "
        "'survey-sample' artifacts first."))
    command = f"revbench survey {'send' if kind == 'invitation' else 'remind'} --round {round} --approve all|N|cancel"
    # Refreshes may write the warehouse while the run waits.
    answer = wait_for_curator(run, form, Waiting(f"a curator's go to send {pending.height} {kind} emails of round {round}",
                                                 command, run.settings.survey.approval_timeout_seconds,
                                                 f"survey:{round}:{kind}"))
    if isinstance(answer, DecidedElsewhere):
        return answer
    n = pending.height if answer.decision == "approve_all" else min(answer.first_n, pending.height)
    return answer.decision, 0 if answer.decision == "cancel" else n, answer.approver or "Prefect UI"


class _Tally:
    """A wave's outcomes as they come. A server that defers message after message, or loses reply
    after reply, is in trouble: the wave stops (the rest stay 'rendered' for the next run) instead
    of spending every message's retries on it or leaving every message in doubt."""

    def __init__(self, breaker: int, url: str):
        self.counts = {"sent": 0, "failed": 0, "deferred": 0, "unconfirmed": 0}
        self.breaker = breaker
        self.url = url
        self.in_a_row = 0
        self.streak: set[str] = set()

    def done(self, what: str) -> None:
        """A message sent, or refused for good (which says nothing of the server's health)."""
        self.counts[what] += 1
        if what == "sent":
            self.in_a_row = 0
            self.streak.clear()

    def trouble(self, what: str, exc: Exception) -> None:
        """A message deferred or in doubt; the breaker-th in a row stops the wave."""
        self.counts[what] += 1
        self.in_a_row += 1
        self.streak.add(what)
        if self.in_a_row >= self.breaker:
            raise ServiceUnavailable("SMTP server", self.url, f"{self.in_a_row} messages in a row "
                                     f"{' or '.join(sorted(self.streak))}, the last with {exc}; the rest stay unsent "
                                     "for the next run") from None

    def result(self) -> SendCounts:
        return SendCounts(**self.counts)


def _send_one(st: Stage, sender: SmtpSender, row: dict[str, Any], tally: _Tally) -> None:
    """Hand one message to the server and record what became of it, interrupts held meanwhile."""
    from revbench.clients.smtp import OutcomeUnknown

    msg = tasks.email_message(row, st.settings.survey)
    with deferred_interrupts():
        st.wh.survey.set_message_state(row["message_id"], "sending", attempts=row["attempts"] + 1, smtp_server=sender.server)
        try:
            reply = sender.send(msg)
        except PermanentError as exc:
            st.wh.survey.set_message_state(row["message_id"], "failed", reply=str(exc))
            tally.done("failed")
        except OutcomeUnknown as exc:
            # It may be in the recipient's mailbox: sending it again could make a copy.
            st.wh.survey.set_message_state(row["message_id"], "unconfirmed", reply=str(exc), unconfirmed_at=utcnow())
            log.warning("message %s to %s is unconfirmed: %s", row["message_id"], row["to_email"], exc)
            tally.trouble("unconfirmed", exc)
        except TransientError as exc:
            st.wh.survey.set_message_state(row["message_id"], "rendered", reply=str(exc))  # tried again next run
            tally.trouble("deferred", exc)
        except BaseException:
            # Raised before the message's end of data left (``SmtpSender`` turns anything
            # later into OutcomeUnknown): nothing can have been delivered.
            st.wh.survey.set_message_state(row["message_id"], "rendered")
            raise
        else:
            st.wh.survey.set_message_state(row["message_id"], "sent", reply=reply, sent_at=utcnow())
            tally.done("sent")


@stage_task("send")
def send_stage(run: Run, batch: pl.DataFrame) -> SendCounts:
    """Send ``batch`` (already approved), paced, committing each message's state as it goes."""
    from revbench.clients.smtp import SmtpSender

    with stage(run, "send") as st:
        sv = st.settings.survey
        sender = SmtpSender(st.settings.smtp, attempts=sv.smtp_attempts)
        sender.probe()
        tally = _Tally(st.settings.http.breaker_failures, sender.url)
        interval = 60.0 / sv.messages_per_minute
        with sender, st.progress(batch.height, f"send {batch.height} emails") as progress:
            last = 0.0
            for row in batch.iter_rows(named=True):
                wait = interval - (time.monotonic() - last)
                if wait > 0 and last:
                    time.sleep(wait)
                last = time.monotonic()
                _send_one(st, sender, row, tally)
                progress.advance()
        counts = tally.result()
        st.result.rows_in, st.result.rows_out, st.result.rejected = batch.height, counts.sent, counts.failed
    return counts


def write_outbox(settings: Settings, batch: pl.DataFrame, round: int) -> str:
    """``--dry-run``: every pending message as an .eml file for review; nothing is sent."""
    out = settings.data_dir / "survey" / f"round-{round}" / "outbox"
    out.mkdir(parents=True, exist_ok=True)
    for row in batch.iter_rows(named=True):
        name = row["message_id"].strip("<>").split("@")[0]
        (out / f"{name}.eml").write_bytes(tasks.email_message(row, settings.survey).as_bytes())
    return str(out)


def _deliver(run: Run, round: int, kind: str, pending: pl.DataFrame, dry_run: bool,
             approve: tuple[str, int] | None, approver: str) -> Delivery:
    """The pending messages as .eml files (a dry run), or sent as far as the curator says."""
    if dry_run:
        return Delivery(outbox=write_outbox(run.settings, pending, round))
    if pending.height == 0:
        return Delivery()
    asked = _ask_curator(run, round, kind, pending, approve, approver)
    if isinstance(asked, DecidedElsewhere):
        # The run that decided recorded the go and sent what it approved: nothing is sent twice.
        return Delivery(decision=asked.facts.get("decision"), approved=asked.facts.get("approved"), approver=asked.by)
    decision, n, who = asked
    run.wh.survey.upsert(SURVEY_APPROVALS, pl.DataFrame([{"run_id": run.run_id, "round": round, "kind": kind, "decision": decision,
                                                     "approved": n, "approver": who, "decided_at": utcnow()}]))
    decision_made(run, f"survey:{round}:{kind}", who, f"round {round}'s {kind} wave: {decision} ({n}) by {who}",
                  {"decision": "approve_all" if decision == "auto" else decision, "first_n": n, "approver": who},
                  {"decision": decision, "approved": n})
    decided = Delivery(decision=decision, approved=n, approver=who)
    if decision == "cancel" or n == 0:
        return decided
    # While the run waited for the go it let go of the warehouse: another run (the command the
    # waiting block names) may have sent some of these messages, or their addressees opted out.
    still = tasks.pending_messages(run.wh.survey.survey_messages(round), kind, run.wh.survey.opted_out_emails())
    batch = pending.head(n).join(still.select("message_id"), on="message_id", how="semi")
    if batch.height < min(n, pending.height):
        log.warning("%d of the %d approved messages were sent or opted out while this run waited; they are not sent again",
                    min(n, pending.height) - batch.height, min(n, pending.height))
    return dataclasses.replace(decided, counts=send_stage(run, batch))


@revbench_flow("survey")
def survey_flow(settings: Settings, round: int = 1, kind: str = "invitation", dry_run: bool = False,
                approve: str | None = None, approver: str = "") -> SurveyWave:
    """Render and send one wave of survey emails for a round: ``kind`` is ``invitation`` or
    ``reminder``. Nothing is sent without a curator's go (``approve``, the Prefect UI, or
    REVBENCH_SURVEY__AUTO_APPROVE) or with ``dry_run``."""
    if kind not in ("invitation", "reminder"):
        raise UsageError(f"unknown kind {kind!r}: invitation or reminder")
    decision_given = parse_approval(approve)
    signer = LinkSigner.from_settings(settings.survey)
    if not dry_run and not settings.smtp.host:
        raise UsageError("REVBENCH_SMTP__HOST is not set: nothing can be sent (use --dry-run to write .eml files)")
    params = {"round": round, "kind": kind, "dry_run": dry_run, "approve": approve}
    with SurveyStore(settings.survey_store_path) as store, flow_run(settings, "survey", params) as run:
        interrupted = _recover(run)
        opted_out = opt_out_stage(run, store)
        prep = (invitation_stage if kind == "invitation" else reminder_stage)(run, round, signer, store, opted_out)
        pending = tasks.pending_messages(run.wh.survey.survey_messages(round), kind, opted_out)
        _publish_wave(round, kind, pending, prep.left_out)
        try:
            done = _deliver(run, round, kind, pending, dry_run, decision_given, approver)
        finally:
            # Listed however the wave ended: a breaker that stopped it leaves its doubts too.
            unconfirmed = tasks.unconfirmed_rows(run.wh.survey.unconfirmed_messages(round))
            _publish_unconfirmed(unconfirmed)
        c = done.counts
        return SurveyWave(round=round, kind=kind, candidates=prep.candidates, rendered=prep.rendered,
                          left_out=prep.left_out, finished=prep.finished, pending=pending.height,
                          interrupted=interrupted, opted_out=len(opted_out), sent=c.sent, failed=c.failed,
                          deferred=c.deferred, unconfirmed=c.unconfirmed, outbox=done.outbox, run_id=run.run_id,
                          decision=done.decision, approved=done.approved, approver=done.approver,
                          unconfirmed_messages=unconfirmed)


def _recover(run: Run) -> int:
    """Messages an earlier run left 'sending' (killed mid-send) become unconfirmed."""
    n = run.wh.survey.mark_unconfirmed()
    if n:
        log.warning("%d messages were being sent when an earlier run stopped: marked unconfirmed, not sent again "
                    "(`revbench survey status` lists them; `revbench survey resend MESSAGE_ID` sends one again)", n)
    return n


def message_id(given: str) -> str:
    """A Message-ID as a curator may type it, with or without its angle brackets."""
    given = given.strip()
    return given if given.startswith("<") else f"<{given}>"


def _check_resendable(wanted: list[str], msgs: pl.DataFrame) -> None:
    """Only messages that exist and are unconfirmed are sent again by name."""
    states = dict(msgs.select("message_id", "state").iter_rows())
    for m in wanted:
        if m not in states:
            raise UsageError(f"no message {m} in the warehouse: `revbench survey status` lists the unconfirmed ones")
        if states[m] != "unconfirmed":
            raise UsageError(f"message {m} is {states[m]}, not unconfirmed: only an unconfirmed message is sent "
                             "again by name (a rendered one goes with its wave)")


@revbench_flow("survey-resend")
def survey_resend_flow(settings: Settings, message_ids: list[str], approver: str = "") -> SurveyResend:
    """Send again the unconfirmed messages a curator names (after checking they did not arrive):
    the only way a message that may have left goes out again. Each keeps its Message-ID, so a
    mailbox that has the first copy can recognise the second."""
    if not message_ids:
        raise UsageError("name the message(s) to send again: `revbench survey status` lists the unconfirmed ones")
    if not settings.smtp.host:
        raise UsageError("REVBENCH_SMTP__HOST is not set: nothing can be sent")
    wanted = list(dict.fromkeys(message_id(m) for m in message_ids))
    with (SurveyStore(settings.survey_store_path) as store,
          flow_run(settings, "survey-resend", {"message_ids": wanted, "approver": approver}) as run):
        interrupted = _recover(run)
        msgs = run.wh.survey.survey_messages().filter(pl.col("message_id").is_in(wanted))
        _check_resendable(wanted, msgs)
        opted_out = opt_out_stage(run, store)
        batch = msgs.filter(~pl.col("to_email").is_in(list(opted_out))).sort("message_id")
        try:
            c = send_stage(run, batch) if batch.height else SendCounts()
        finally:
            unconfirmed = tasks.unconfirmed_rows(run.wh.survey.unconfirmed_messages())
            _publish_unconfirmed(unconfirmed)
        return SurveyResend(requested=len(wanted), opted_out=msgs.height - batch.height, interrupted=interrupted,
                            sent=c.sent, failed=c.failed, deferred=c.deferred, unconfirmed=c.unconfirmed,
                            approver=approver or "command line", run_id=run.run_id, unconfirmed_messages=unconfirmed)
