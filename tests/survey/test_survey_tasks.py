"""The survey flow's frame work on its own: opt-outs to keep, reminders due, the wave still to
send, the curator's recipient list and the rendered message rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
from pydantic import SecretStr

from revbench.schemas.tables import SURVEY_MESSAGES
from revbench.settings import SurveySettings
from revbench.survey.tokens import LinkSigner
from revbench.tasks import survey as tasks

NOW = datetime(2026, 9, 10, 12, 0, tzinfo=UTC)
INVITATIONS = pl.DataFrame({"invitation_id": ["i1", "i2", "i3", "i4"], "round": [1] * 4,
                            "email": ["a@x.org", "b@x.org", "c@x.org", "d@x.org"], "name": ["A", "B", "C", "D"],
                            "paper_ids": [["p1", "p2"], ["p1"], ["p2"], ["p1", "p2"]], "example_paper": ["T"] * 4})


def message(iid: str, kind: str, state: str, sent_days_ago: float | None = None, to: str = "") -> dict:
    return {"message_id": f"<{iid}.{kind}@x>", "invitation_id": iid, "kind": kind, "round": 1, "to_email": to,
            "text": "", "state": state,
            "sent_at": None if sent_days_ago is None else NOW - timedelta(days=sent_days_ago)}


def test_new_opt_outs_are_kept_by_address_once() -> None:
    new = tasks.new_opt_outs(INVITATIONS, ["i1", "i2", "nobody"], {"b@x.org"}, NOW)
    assert new.rows() == [("a@x.org", "i1", "survey", NOW)]
    empty = tasks.new_opt_outs(INVITATIONS.head(0), ["i1"], set(), NOW)
    assert empty.height == 0 and empty.columns == ["email", "invitation_id", "source", "opted_out_at"]


def test_reminders_go_to_who_has_open_papers_was_emailed_long_enough_ago_and_may_be_reminded() -> None:
    messages = pl.DataFrame([
        message("i1", "invitation", "sent", 5),  # one paper answered, the other open: due
        message("i2", "invitation", "sent", 5),  # every paper answered: finished
        message("i3", "invitation", "sent", 1),  # emailed too recently
        message("i4", "invitation", "sent", 9), message("i4", "reminder-1", "sent", 6),  # reminded once already
    ])
    answered = {"i1": {"p1": 3}, "i2": {"p1": None}}
    due = tasks.due_reminders(INVITATIONS, messages, answered, set(), NOW - timedelta(days=3), most=2)
    assert [(t.invitation["invitation_id"], t.kind, t.open_papers) for t in due.due] == [
        ("i1", "reminder-1", 1), ("i4", "reminder-2", 2)]
    assert due.finished == 1
    assert tasks.due_reminders(INVITATIONS, messages, answered, {"a@x.org"}, NOW - timedelta(days=3), most=1).due == []


def test_the_pending_wave_is_what_is_rendered_for_whoever_did_not_opt_out() -> None:
    messages = pl.DataFrame([message("i2", "invitation", "rendered", to="b@x.org"),
                             message("i1", "invitation", "rendered", to="a@x.org"),
                             message("i3", "invitation", "sent", 1, to="c@x.org"),
                             message("i4", "reminder-1", "rendered", to="d@x.org")])
    pending = tasks.pending_messages(messages, "invitation", {"b@x.org"})
    assert pending["message_id"].to_list() == ["<i1.invitation@x>"]
    assert tasks.pending_messages(messages, "reminder", set())["invitation_id"].to_list() == ["i4"]


def test_message_rows_render_each_invitation_waiting_to_be_sent() -> None:
    sv = SurveySettings(signing_key=SecretStr("k" * 32))
    signer = LinkSigner(sv.signing_key)
    papers = {p: {"title": f"Title {p}", "abstract": "An abstract."} for p in ("p1", "p2")}
    inv = INVITATIONS.row(0, named=True)
    rows = tasks.message_rows([tasks.ToRender(inv, "invitation"), tasks.ToRender(inv, "reminder-1", 2)], papers, signer, sv,
                              "run1", NOW)
    assert set(rows.columns) <= set(SURVEY_MESSAGES.names)
    assert rows.select("kind", "state", "attempts", "run_id", "rendered_at").rows() == [
        ("invitation", "rendered", 0, "run1", NOW), ("reminder-1", "rendered", 0, "run1", NOW)]
    assert rows["subject"][1].startswith("Reminder: ") and rows["to_email"].to_list() == ["a@x.org"] * 2
    recipients = tasks.recipient_rows(rows)
    assert [(r["to"], r["papers"], r["state"]) for r in recipients] == [("a@x.org", 2, "rendered")] * 2
    assert tasks.message_rows([], papers, signer, sv, "run1", NOW).height == 0
