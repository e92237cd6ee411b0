"""``revbench survey``: the invitation and reminder waves, resending unconfirmed messages, the
survey server, and the survey's counts, with what each prints."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table as RichTable

from revbench.app.cli_common import Track, setup
from revbench.app.console import console
from revbench.app.entry import build_settings, resolve_track
from revbench.errors import UsageError

if TYPE_CHECKING:  # the flows load only when a command runs one
    from revbench.flows.survey import SurveyResend, SurveyWave

survey_app = typer.Typer(help="Invitation emails, the survey server and its answers.", no_args_is_help=True)


def _survey_wave(kind: str, round: int, dry_run: bool, approve: str | None, approver: str, track: bool | None) -> None:
    settings = setup()
    from revbench.flows.survey import parse_approval, survey_flow

    parse_approval(approve)
    stats = survey_flow.run(settings, round=round, kind=kind, dry_run=dry_run, approve=approve,
                            approver=approver or os.environ.get("USER", ""),
                            track=resolve_track(track, long_flow=True))
    print_survey_wave(stats)


Approve = Annotated[str | None, typer.Option(help="The curator's go: all, N (the first N) or cancel; without it a tracked run waits for the answer in the Prefect UI")]


@survey_app.command("send")
def survey_send(
    round: Annotated[int, typer.Option("--round", min=1, help="The pools round whose invitations are sent")] = 1,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write .eml files to data/survey/round-N/outbox and send nothing")] = False,
    approve: Approve = None,
    approver: Annotated[str, typer.Option(help="Who approves (recorded with the decision)")] = "",
    track: Track = None,
) -> None:
    """Render a round's invitation emails and send them after a curator's go (each exactly once)."""
    _survey_wave("invitation", round, dry_run, approve, approver, track)


@survey_app.command("remind")
def survey_remind(
    round: Annotated[int, typer.Option("--round", min=1, help="The round whose invitees are reminded")] = 1,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write .eml files and send nothing")] = False,
    approve: Approve = None,
    approver: Annotated[str, typer.Option(help="Who approves (recorded with the decision)")] = "",
    track: Track = None,
) -> None:
    """Remind invitees with unanswered papers (not those who finished or opted out)."""
    _survey_wave("reminder", round, dry_run, approve, approver, track)


@survey_app.command("resend")
def survey_resend(
    message_ids: Annotated[list[str], typer.Argument(help="Message-IDs of unconfirmed messages (`revbench survey status` lists them)", show_default=False)],
    approver: Annotated[str, typer.Option(help="Who decided to send them again (recorded with the run)")] = "",
    track: Track = None,
) -> None:
    """Send again unconfirmed messages, named one by one: they may have arrived (their reply was
    lost), so nothing else sends them again; check with the recipient or the server's log first."""
    settings = setup()
    from revbench.flows.survey import survey_resend_flow

    stats = survey_resend_flow.run(settings, message_ids=message_ids, approver=approver or os.environ.get("USER", ""),
                                   track=resolve_track(track, long_flow=False))
    print_survey_resend(stats)


@survey_app.command("serve")
def survey_serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on [default: 127.0.0.1]", show_default=False)] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port [default: 8765]", show_default=False)] = None,
    socket: Annotated[Path | None, typer.Option("--socket", help="Listen on this unix socket instead (for a proxy on the same host; the server then needs no network)", show_default=False)] = None,
) -> None:
    """Run the survey server (its own store; runs beside every flow). It refuses to start holding a
    secret that is not its own (only its signing keys: no SMTP password, API keys, release or
    backup key, nor Prefect credentials)."""
    if socket is not None and (host is not None or port is not None):
        flag = "--host" if host is not None else "--port"
        raise UsageError(f"--socket {socket}: not with {flag} (a unix socket is one address; give one or the other)")
    from revbench.app.entry import prepare_process
    from revbench.survey.privilege import foreign_secrets, without_foreign_secrets

    # Checked on what the operator handed it (environment and .env): a demo's data folder adds
    # its own keys to every command, and those are dropped below instead.
    dotenv: dict[str, str] = {}
    if Path(".env").is_file():
        from dotenv import dotenv_values

        dotenv = {k: v or "" for k, v in dotenv_values(".env").items()}
    held = foreign_secrets(build_settings(demo_data=False), {**dotenv, **os.environ})
    if held:
        raise UsageError(f"the survey server holds secrets it must not: {', '.join(held)}; give it only its own "
                         "settings (deploy/survey.env.example: its signing keys, store and pages; docs/going-live.md)")
    settings = without_foreign_secrets(build_settings())
    prepare_process(settings, prefect=False)
    from revbench.survey.server import serve

    try:
        serve(settings, host or "127.0.0.1", port or 8765, announce=console.print, uds=socket)
    except KeyboardInterrupt:
        # Stopping the server is its normal end: uvicorn has finished the requests in flight, and
        # every acknowledged answer was committed before it was acknowledged.
        pass
    console.print(f"survey server stopped; answers are in {settings.survey_store_path}")


@survey_app.command("status")
def survey_status() -> None:
    """Sent, answered, skipped and opted-out counts (from the survey store; the warehouse when free),
    and the unconfirmed messages: id, recipient, since when, the server."""
    settings = build_settings()
    from revbench.tasks.survey import unconfirmed_rows
    from revbench.warehouse.status import survey_counts, unconfirmed_messages

    unconfirmed = unconfirmed_messages(settings.warehouse_path)
    print_survey_status(survey_counts(settings.warehouse_path, settings.survey_store_path),
                        unconfirmed_rows(unconfirmed) if unconfirmed is not None else [])


def print_survey_wave(stats: SurveyWave) -> None:
    """What one survey wave did."""
    line = (f"round {stats.round} {stats.kind}s: {stats.rendered} rendered now, {stats.pending} waiting to be sent, "
            f"{len(stats.left_out)} people left out, {stats.opted_out} opted out in all")
    if stats.outbox:
        line += f"; dry run: .eml files in {stats.outbox}, nothing sent"
    elif stats.decision is not None:
        line += (f"; {stats.decision} by {stats.approver}: {stats.sent} sent, {stats.failed} failed, "
                 f"{stats.deferred} deferred to the next run, {stats.unconfirmed} unconfirmed")
    if stats.interrupted:
        line += f"; {stats.interrupted} found unconfirmed after an interrupted run"
    console.print(line)
    print_unconfirmed(stats.unconfirmed_messages)


def print_survey_resend(stats: SurveyResend) -> None:
    """What one resend did."""
    console.print(f"resend of {stats.requested} named messages by {stats.approver}: {stats.sent} sent, "
                  f"{stats.failed} failed, {stats.deferred} deferred (they wait with their wave), "
                  f"{stats.unconfirmed} unconfirmed again, {stats.opted_out} not sent (opted out)")
    print_unconfirmed(stats.unconfirmed_messages)


def print_unconfirmed(rows: list[dict[str, Any]]) -> None:
    """Messages that may or may not have arrived, for the curator to check before any resend."""
    if not rows:
        return
    # Plain lines, never wrapped: the ids are copied from here into `survey resend`.
    say = functools.partial(console.print, markup=False, highlight=False, soft_wrap=True)
    say(f"{len(rows)} unconfirmed messages: they may have arrived, so nothing sends them again by itself; check with the "
        "recipient or the server's log, then `revbench survey resend MESSAGE_ID ...` sends those named:")
    for r in rows:
        say(f"  {r['message']}  to {r['to']}  ({r['kind']}, round {r['round']})  since {r['since'] or '?'}  "
            f"server {r['server'] or '?'}: {r['why']}")


def print_survey_status(counts: dict[str, Any], unconfirmed: list[dict[str, Any]] | None = None) -> None:
    """Survey counts as a table, then the unconfirmed messages."""
    t = RichTable(title="Survey")
    t.add_column("what")
    t.add_column("count", justify="right")
    for k, v in counts.items():
        t.add_row(k.replace("_", " "), str(v))
    console.print(t)
    print_unconfirmed(unconfirmed or [])
