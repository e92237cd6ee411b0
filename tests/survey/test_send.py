"""Invitation emails through a real SMTP server (aiosmtpd on loopback): content, links, replies,
approval, interrupted waves, opt-outs and reminders."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from email.message import EmailMessage
from pathlib import Path

import polars as pl
import pytest
from fastapi.testclient import TestClient

from revbench.errors import ServiceUnavailable, UsageError
from revbench.flows.survey import survey_flow, survey_resend_flow
from revbench.replay.mailsink import MailSink
from revbench.settings import Settings
from revbench.survey.server import create_app
from revbench.survey.tokens import LinkSigner
from revbench.synth.respondents import confirm
from revbench.templates import bars_scale, version
from revbench.warehouse import Warehouse
from revbench.warehouse.store import SurveyStore
from tests.support.common import settings_env
from tests.support.survey import paused_run_id
from tests.support.waiting import assert_waiting, flow_messages

pytestmark = pytest.mark.slow
LINK = re.compile(r"http://127\.0\.0\.1:9(/[riu]/[A-Za-z0-9_.\-]+)")


def _messages(s: Settings) -> pl.DataFrame:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return wh.survey.survey_messages()


def _parts(msg: EmailMessage) -> tuple[str, str]:
    return msg.get_body(("plain",)).get_content(), msg.get_body(("html",)).get_content()  # type: ignore[union-attr]


def test_every_invitation_arrives_complete_with_links_that_verify(survey_settings: Settings, sink: MailSink) -> None:
    stats = survey_flow.fn(survey_settings, round=1, approve="all", approver="tester")
    msgs = _messages(survey_settings)
    assert stats.sent == msgs.height == len(sink.messages) > 3
    signer = LinkSigner(survey_settings.survey.signing_key)
    for m in sink.messages:
        text, html = _parts(m)
        assert m.is_multipart() and m.get_content_type() == "multipart/alternative"
        for part in (text, html, m["Subject"]):
            assert "{{" not in part and "}}" not in part and "None" not in part and "Undefined" not in part
        assert "NOT a request to review" in text and "Test Team at Test Lab, Test University" in text
        assert "because of your paper" in text and "<style" not in html and 'style="' in html  # CSS inlined
        assert m["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click" and m["List-Unsubscribe"].startswith("<http")
        assert re.fullmatch(r"<inv_[0-9a-f]{20}\.invitation@test\.example>", m["Message-ID"])
        links = LINK.findall(text)
        assert len([u for u in links if u.startswith("/r/")]) % 5 == 0 and any(u.startswith("/u/") for u in links)
        for url in links:
            signer.verify(url.split("/", 2)[2])  # every link verifies
    versions = (f"html {version('emails/invitation.html.j2')}, css {version('emails/email.css')}, "
                f"text {version('emails/invitation.txt.j2')}, "
                f"scale {bars_scale()['version']}")
    assert set(msgs["state"]) == {"sent"} and (msgs["template_version"] == versions).all()
    with Warehouse.open(survey_settings.warehouse_path, read_only=True) as wh:
        approvals = wh.read(__import__("revbench.schemas.tables", fromlist=["SURVEY_APPROVALS"]).SURVEY_APPROVALS)
    assert approvals.select("decision", "approver").rows() == [("approve_all", "tester")]
    again = survey_flow.fn(survey_settings, round=1, approve="all")
    assert again.sent == 0 and again.pending == 0 and len(sink.messages) == msgs.height  # never twice


def test_nothing_goes_out_without_a_go(survey_settings: Settings, sink: MailSink) -> None:
    with pytest.raises(UsageError, match="wait for a curator's go"):
        survey_flow.fn(survey_settings, round=1)
    assert sink.messages == []
    first = survey_flow.fn(survey_settings, round=1, approve="2")
    assert first.sent == 2 and len(sink.messages) == 2
    cancelled = survey_flow.fn(survey_settings, round=1, approve="cancel")
    assert cancelled.sent == 0 and cancelled.decision == "cancel" and len(sink.messages) == 2
    with pytest.raises(UsageError, match="--approve"):
        survey_flow.fn(survey_settings, round=1, approve="some")


def test_a_dry_run_writes_eml_files_and_sends_nothing(survey_settings: Settings, sink: MailSink) -> None:
    stats = survey_flow.fn(survey_settings.with_overrides(smtp={"host": ""}), round=1, dry_run=True)
    files = sorted(Path(stats.outbox or "").glob("*.eml"))
    assert len(files) == stats.pending > 0 and sink.messages == []
    assert b"multipart/alternative" in files[0].read_bytes()


def test_temporary_replies_are_retried_and_permanent_ones_recorded(survey_settings: Settings) -> None:
    seen: dict[str, int] = {}

    def reply(n: int, msg: EmailMessage) -> str | None:
        to = str(msg["To"])
        seen[to] = seen.get(to, 0) + 1
        if to == first_to:
            return "550 5.1.1 mailbox unavailable"
        return "451 4.3.0 try again later" if seen[to] == 1 else None

    with Warehouse.open(survey_settings.warehouse_path, read_only=True) as wh:
        first_to = sorted(wh.survey.survey_candidates(1)["email"].str.to_lowercase().to_list())[0]
    with MailSink(reply=reply) as flaky:
        s = survey_settings.with_overrides(smtp=flaky.smtp_overrides(), survey={"smtp_attempts": 3})
        stats = survey_flow.fn(s, round=1, approve="all")
    msgs = _messages(s)
    failed = msgs.filter(pl.col("state") == "failed")
    assert failed["to_email"].to_list() == [first_to] and failed["smtp_reply"][0].startswith("SMTP 550 5.1.1")
    assert stats.failed == 1 and stats.sent == msgs.height - 1 == len(flaky.messages)
    assert all(n == 2 for to, n in seen.items() if to != first_to)  # each 451 answered by one retry


def test_a_mail_server_that_is_down_fails_the_wave_and_loses_nothing(survey_settings: Settings, sink: MailSink) -> None:
    sink.stop()
    with pytest.raises(ServiceUnavailable, match=rf"SMTP server at smtp://127.0.0.1:{sink.port} is unreachable"):
        survey_flow.fn(survey_settings, round=1, approve="all")
    assert set(_messages(survey_settings)["state"]) == {"rendered"}  # rendered, waiting, none failed
    with MailSink(port=sink.port) as back:
        stats = survey_flow.fn(survey_settings, round=1, approve="all")
    assert stats.sent == _messages(survey_settings).height == len(back.messages)


def test_a_server_deferring_everything_stops_the_wave(survey_settings: Settings) -> None:
    with MailSink(reply=lambda n, msg: "421 4.7.0 too busy") as busy:
        s = survey_settings.with_overrides(smtp=busy.smtp_overrides(), survey={"smtp_attempts": 2},
                                           http={"breaker_failures": 3})
        with pytest.raises(ServiceUnavailable, match="3 messages in a row deferred, the last with SMTP 421 4.7.0 too busy"):
            survey_flow.fn(s, round=1, approve="all")
        assert busy.attempts == 3 * 2 and busy.messages == []
    msgs = _messages(s)
    assert set(msgs["state"]) == {"rendered"} and msgs["smtp_reply"].drop_nulls().len() == 3


def _cli(s: Settings, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
    env.update(settings_env(s))
    return subprocess.Popen([sys.executable, "-m", "revbench", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_wave_resumes_and_sends_each_message_once(survey_settings: Settings, sig: int) -> None:
    with MailSink() as slow:
        s = survey_settings.with_overrides(smtp=slow.smtp_overrides(), survey={"messages_per_minute": 240})
        proc = _cli(s, "survey", "send", "--round", "1", "--approve", "all", "--no-track")
        deadline = time.monotonic() + 120
        while len(slow.messages) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        before = len(slow.messages)
        msgs = _messages(s)
        assert (msgs["state"] == "sent").sum() == before and not (msgs["state"] == "sending").any()
        again = survey_flow.fn(s, round=1, approve="all")
        ids = [m["Message-ID"] for m in slow.messages]
        assert len(ids) == len(set(ids)) == msgs.height and again.sent == msgs.height - before


def test_a_killed_wave_never_sends_twice_and_reports_what_it_cannot_know(survey_settings: Settings) -> None:
    with MailSink() as slow:
        s = survey_settings.with_overrides(smtp=slow.smtp_overrides(), survey={"messages_per_minute": 240})
        proc = _cli(s, "survey", "send", "--round", "1", "--approve", "all", "--no-track")
        while len(slow.messages) < 2:
            assert proc.poll() is None
            time.sleep(0.005)
        proc.kill()
        proc.wait()
        again = survey_flow.fn(s, round=1, approve="all")
        ids = [m["Message-ID"] for m in slow.messages]
        assert len(ids) == len(set(ids))  # at most once, whatever instant the kill hit
        msgs = _messages(s)
        assert (msgs["state"] == "sent").sum() + again.interrupted == msgs.height
        doubtful = msgs.filter(pl.col("state") == "unconfirmed")
        assert doubtful.height == again.interrupted and doubtful["unconfirmed_at"].null_count() == 0
        assert [r["message"] for r in again.unconfirmed_messages] == doubtful["message_id"].to_list()
        assert survey_flow.fn(s, round=1, approve="all").sent == 0  # a re-run leaves them be
        if again.interrupted:
            resent = survey_resend_flow.fn(s, doubtful["message_id"].to_list())
            assert resent.sent == again.interrupted


def test_opted_out_people_get_nothing_later(survey_settings: Settings, sink: MailSink) -> None:
    s = survey_settings.with_overrides(survey={"reminder_delay_days": 0, "reminder_count": 2})
    survey_flow.fn(s, round=1, approve="all")
    store = SurveyStore(s.survey_store_path)
    client = TestClient(create_app(s, store))
    texts = {str(m["To"]): _parts(m)[0] for m in sink.messages}
    emails = sorted(texts)
    quitter, finisher = emails[0], emails[1]
    optout = next(u for u in LINK.findall(texts[quitter]) if u.startswith("/u/"))
    assert client.post(optout, content=b"List-Unsubscribe=One-Click").status_code == 200  # the one-click header
    for url in [u for u in LINK.findall(texts[finisher]) if u.startswith("/r/")][2::5]:  # a 3 for every paper
        assert confirm(client, url).status_code == 200  # the link, then Confirm
    sent_before = len(sink.messages)
    reminders = survey_flow.fn(s, round=1, kind="reminder", approve="all")
    reminded = {str(m["To"]) for m in sink.messages[sent_before:]}
    assert reminders.sent == len(reminded) == len(emails) - 2
    assert quitter not in reminded and finisher not in reminded
    assert all(m["Subject"].startswith("Reminder: ") for m in sink.messages[sent_before:])
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert quitter in wh.survey.opted_out_emails()
    # A rebuilt round and a second reminder still leave them out.
    second = survey_flow.fn(s, round=1, kind="reminder", approve="all")
    assert quitter not in {str(m["To"]) for m in sink.messages[sent_before + reminders.sent:]}
    assert second.sent <= reminders.sent


def test_a_tracked_wave_waits_for_the_curator_in_the_ui(prefect_server, survey_settings: Settings, sink: MailSink) -> None:
    import threading

    from prefect.flow_runs import resume_flow_run

    result: dict[str, object] = {}
    runner = threading.Thread(target=lambda: result.update(out=survey_flow(survey_settings, round=1)))
    with flow_messages() as said:
        runner.start()
        run_id = paused_run_id(runner, result)
        assert_waiting(survey_settings, run_id, said, "invitation emails of round 1",
                       "revbench survey send --round 1 --approve all|N|cancel")
    assert sink.messages == []
    resume_flow_run(run_id, run_input={"decision": "approve_first_n", "first_n": 1, "approver": "curator ada"})
    runner.join(timeout=120)
    out = result["out"]
    assert out.decision == "approve_first_n" and out.approver == "curator ada"  # type: ignore[attr-defined]
    assert len(sink.messages) == 1


def test_a_go_given_in_one_waves_form_ends_the_wait_of_every_wave_waiting_for_it(
        prefect_server, survey_settings: Settings, sink: MailSink) -> None:
    """Two tracked runs wait for a go on round 1's invitations; the curator answers one's form
    (send the first message): that run sends it, the other ends its wait by itself, sends nothing
    a second time and reports the go given in the first."""
    import threading

    from prefect.flow_runs import resume_flow_run

    from revbench.warehouse.status import read_status

    results: list[dict[str, object]] = [{}, {}]
    runners = [threading.Thread(target=lambda r=r: r.update(out=survey_flow(survey_settings, round=1))) for r in results]
    runners[0].start()
    first = paused_run_id(runners[0], results[0])
    runners[1].start()
    second = paused_run_id(runners[1], results[1], besides=(first,))
    assert {w["run_id"] for w in read_status(survey_settings.warehouse_path).waiting} == {str(first), str(second)}
    resume_flow_run(first, run_input={"decision": "approve_first_n", "first_n": 1, "approver": "curator ada"})
    for runner in runners:
        runner.join(timeout=90)
    assert not any(r.is_alive() for r in runners), "the other wave did not end its wait"
    answered, told = results[0]["out"], results[1]["out"]
    assert answered.sent == 1 and told.sent == 0 and len(sink.messages) == 1  # type: ignore[attr-defined]
    assert (told.decision, told.approved, told.approver) == ("approve_first_n", 1, "curator ada")  # type: ignore[attr-defined]
    assert read_status(survey_settings.warehouse_path).waiting == []
