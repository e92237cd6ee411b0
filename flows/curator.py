"""Waiting for a curator: a tracked run pauses for a form in the Prefect UI, lets go of the
warehouse meanwhile, and ends its wait when the form is answered, when its timeout passes, or when
another run (a command, a policy, another run's form) records the same decision; and an outcome a
curator must not miss, shown on the run.

Only a tracked run waits: in-process, a flow decides by flag or policy before it gets here.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from revbench.flows.common import PauseExpired, Run, end_in_state, publish_markdown
from revbench.flows.pieces import prefect_active
from revbench.warehouse.holder import clear_waiting, describe_waiting, read_decision, read_waiting, write_decision, write_waiting

# One logger for every line of a run, whichever module writes it (the terminal of an in-process run).
log = logging.getLogger("revbench.flows")


@dataclass(frozen=True)
class Waiting:
    """What a paused run waits for, the command that decides it without the UI, and the
    decision's key: every run waiting for the same ``decision`` ends its wait when any run records
    it (``decision_made``)."""

    what: str
    command: str
    timeout_seconds: int
    decision: str


@dataclass(frozen=True)
class DecidedElsewhere:
    """``wait_for_curator``'s answer when the wait ended because another run (a command, a
    policy, another run's form) recorded the decision: it is in the warehouse, and this run
    finishes with it. ``facts``: what the deciding run said it decided."""

    by: str
    run_id: str
    what: str
    facts: dict[str, Any]


class DecisionWatcher:
    """While a run waits, resumes its own paused flow run as soon as a note says the decision was
    made elsewhere (``decision_made``), with the input the note carries.

    The waiting process resumes itself, rather than the command that decided resuming it through
    the API, because that command may run in-process (no Prefect at all) or against another
    Prefect API than the one the pause lives on (a process without PREFECT_API_URL gets a
    temporary server of its own), while the paused process always reaches its own. The note is a
    file beside the warehouse: it needs neither the warehouse's lock (the deciding command holds
    it) nor the API. Polling the warehouse instead would take its lock every few seconds for a day,
    in every writer's way; a loop of short pauses would make the UI's form vanish and come back
    under the curator's hands."""

    def __init__(self, db: Path, run_id: str, interval: float = 1.0):
        self.db, self.run_id, self.interval = db, run_id, interval
        self.note: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> DecisionWatcher:
        ctx = contextvars.copy_context()  # Prefect's settings (the API the pause lives on) go along
        self._thread = threading.Thread(target=ctx.run, args=(self._watch,), name=f"decision-{self.run_id[:8]}",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.note is None:  # a decision that crossed an answer in the form counts all the same
            self.note = read_decision(self.db, self.run_id)

    def _watch(self) -> None:
        from prefect.exceptions import FlowPauseTimeout, NotPausedError
        from prefect.flow_runs import resume_flow_run

        run_input: dict[str, Any] | None = None
        while not self._stop.wait(self.interval):
            note = read_decision(self.db, self.run_id)
            if note is None:
                continue
            self.note = note
            run_input = dict(note.get("run_input") or {}) if run_input is None else run_input
            try:
                resume_flow_run(uuid.UUID(self.run_id), run_input=run_input)
                return
            except NotPausedError:
                continue  # not paused yet, or its own form answered at the same moment
            except FlowPauseTimeout:
                return
            except RuntimeError as exc:  # the form refused the input: its defaults do (the warehouse holds the decision)
                log.warning("run %s: resuming with the deciding run's input was refused (%s); resuming with the "
                            "form's defaults", self.run_id, exc)
                run_input = {}
            except Exception as exc:  # the API is away for a moment: the next look tries again
                log.warning("run %s: could not resume it after the decision made elsewhere: %s", self.run_id, exc)


def say(line: str, level: int = logging.WARNING) -> None:
    """One line in the run's log: the Prefect UI's log of a tracked run, the terminal's otherwise."""
    if prefect_active():
        from prefect.logging import get_run_logger

        get_run_logger().log(level, "%s", line)
    else:
        log.log(level, "%s", line)


def mark_outcome(run: Run, label: str, markdown: str, state: str | None = None) -> None:
    """Make an outcome a curator must not miss (a rejected release, dropped flags, an expired
    wait) visible on the run. Tracked: the run's name ends with ``(label)`` in the Prefect UI, its
    log has a line, an ``outcome`` artifact holds ``markdown``, and with ``state`` the run ends in
    a Completed state of that name; in-process the line is logged."""
    line = f"{run.flow} run {run.run_id}: {label}"
    say(line)
    if not prefect_active():
        return
    from prefect.client.orchestration import get_client

    publish_markdown("outcome", markdown, line)
    if state is not None:
        end_in_state(run.run_id, state, label)
    try:
        with get_client(sync_client=True) as client:
            name = client.read_flow_run(uuid.UUID(run.run_id)).name
            if not name.endswith(f"({label})"):
                client.update_flow_run(uuid.UUID(run.run_id), name=f"{name} ({label})")
    except Exception as exc:  # the outcome is recorded already; the name only shows it
        log.warning("run %s: could not rename it to show %r: %s", run.run_id, label, exc)


def decision_made(run: Run, decision: str, by: str, what: str, run_input: dict[str, Any],
                  facts: dict[str, Any] | None = None) -> int:
    """Once this run has recorded ``decision`` (committed in the warehouse): every other run, in
    any process, that waits for it ends its wait and finishes with it (``run_input`` is what its
    form is resumed with, ``facts`` what it is told; see ``DecisionWatcher``). Returns how many."""
    db = run.wh.path
    note = {"by": by, "run_id": run.run_id, "what": what, "run_input": run_input, "facts": facts or {}}
    told = [str(w["run_id"]) for w in read_waiting(db)
            if w.get("decision") == decision and str(w.get("run_id")) != run.run_id and w["alive"] and not w["decided"]
            and write_decision(db, str(w["run_id"]), note)]
    if told:
        say(f"{what}: {len(told)} run(s) waiting for this decision end their wait with it ({', '.join(told)})")
    return len(told)


def waiting_markdown(info: dict[str, Any]) -> str:
    """What a waiting run waits for, as markdown: the same facts as ``describe_waiting``, each on
    its own line and the address whole (a log cut at 80 columns would break it)."""
    url = info.get("url")
    return "\n".join([
        f"**This run waits for {info.get('what')}.**", "",
        f"- Answer here, in this form{f': <{url}>' if url else ''}.",
        f"- Or decide on the command line: `{info.get('command')}`",
        f"- It waits until {info.get('until')} ({info.get('timeout_seconds')} s), then ends as paused-expired; "
        "what it waited for stays pending for the next run.",
    ])


def run_url(run_id: str) -> str | None:
    """The run's page in the Prefect UI (None without a configured UI, e.g. a temporary server)."""
    from prefect.utilities.urls import url_for

    return url_for("flow-run", obj_id=run_id)


def wait_for_curator(run: Run, form: Any, waiting: Waiting) -> Any:
    """Pause the tracked run for ``form`` (a Prefect ``RunInput``), letting go of the warehouse:
    says once what it waits for, where and until when, records it for ``revbench status`` (the
    runs row reads ``waiting``). Returns the form's answer, or ``DecidedElsewhere`` when another
    run recorded the decision meanwhile (the wait ends within seconds of it); a timeout ends the
    run as ``PauseExpired``, shown on the run in the Prefect UI."""
    from prefect.exceptions import FlowPauseTimeout
    from prefect.flow_runs import pause_flow_run

    now = datetime.now(UTC)
    info = {"run_id": run.run_id, "flow": run.flow, "what": waiting.what, "url": run_url(run.run_id),
            "command": waiting.command, "timeout_seconds": waiting.timeout_seconds, "decision": waiting.decision,
            "since": now.isoformat(timespec="seconds"),
            "until": (now + timedelta(seconds=waiting.timeout_seconds)).isoformat(timespec="seconds")}
    path = run.wh.path
    run.wh.runs.set_run_status(run.run_id, "waiting")
    write_waiting(path, info)
    # Where the curator looks: the terminal and the run's log in the Prefect UI (revbench's loggers
    # reach it, see ``prepare_process``), a "waiting" artifact, and the top of the form itself.
    log.warning("%s", describe_waiting(info))
    publish_markdown("waiting", waiting_markdown(info), f"{run.flow} run waits for {waiting.what}")
    own = form._description if isinstance(getattr(form, "_description", None), str) else ""
    form = form.with_initial_data(description=waiting_markdown(info) + ("\n\n---\n\n" + own if own else ""))
    answer, expired = None, False
    try:
        with run.released(waiting.timeout_seconds), DecisionWatcher(path, run.run_id) as watcher:
            try:
                answer = pause_flow_run(wait_for_input=form, timeout=waiting.timeout_seconds, poll_interval=2)
            except FlowPauseTimeout:
                expired = True
    finally:
        clear_waiting(path, run.run_id)
    if watcher.note is not None:  # recorded first, so it stands even if the form was answered too
        run.wh.runs.set_run_status(run.run_id, "running")
        n = watcher.note
        # `what` names who decided already ("release v2 rejected by ada").
        say(f"no longer waits: {n.get('what')} (run {n.get('run_id')}); this run finishes with that decision")
        return DecidedElsewhere(str(n.get("by")), str(n.get("run_id")), str(n.get("what")), dict(n.get("facts") or {}))
    if expired:
        text = (f"{run.flow} run {run.run_id}: nobody answered within {waiting.timeout_seconds} s ({waiting.what}); "
                f"the run ended as paused-expired, `{waiting.command}` decides")
        mark_outcome(run, "wait expired", f"## The wait expired\n\n{text}.\n\nWhat waited stays pending for the next run.")
        raise PauseExpired(text)
    run.wh.runs.set_run_status(run.run_id, "running")
    return answer
