"""Exactly-once mail against a mail server that misbehaves (the sink's fault modes, a real
aiosmtpd on loopback): a reply that comes too late, a connection dropped after the message, a
server that never answers, 4xx and 5xx replies. Across a run and two re-runs every recipient
gets one copy at most; a message whose reply was lost is listed and sent again only when a
curator names it; a silent server fails within the deadline."""

from __future__ import annotations

import time
from collections import Counter
from email.message import EmailMessage
from pathlib import Path

import polars as pl
import pytest

from revbench.clients.smtp import OutcomeUnknown, SmtpSender
from revbench.errors import ServiceUnavailable
from revbench.flows.survey import survey_flow
from revbench.replay.mailsink import DROP, HANG, MUTE, Fault, MailSink, slow_reply
from revbench.settings import Settings, SmtpSettings
from revbench.warehouse import Warehouse
from tests.support.common import run_cli, settings_env
from tests.support.tls import self_signed_certificate

pytestmark = pytest.mark.slow
DEADLINE = 2.0


def _messages(s: Settings) -> pl.DataFrame:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return wh.survey.survey_messages()


def _copies(sink: MailSink) -> Counter[str]:
    return Counter(str(m["To"]) for m in sink.messages)


def _recipients(s: Settings) -> list[str]:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return sorted(wh.survey.survey_candidates(1)["email"].str.to_lowercase().unique().to_list())


def _faulty(victims: list[str], fault: str | Fault, times: int) -> tuple[Counter[str], object]:
    """A reply hook: the first ``times`` deliveries to each victim get ``fault``; counts every try."""
    tried: Counter[str] = Counter()

    def reply(_n: int, msg: EmailMessage) -> str | Fault | None:
        to = str(msg["To"])
        tried[to] += 1
        return fault if to in victims and tried[to] <= times else None

    return tried, reply


def _use(monkeypatch: pytest.MonkeyPatch, s: Settings) -> None:
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)


MODES: dict[str, tuple[str | Fault, int, str, int]] = {
    # fault, on how many tries per victim, the victims' state after three runs, their copies
    "reply after the deadline": (slow_reply(3 * DEADLINE), 1, "unconfirmed", 1),
    "disconnect after DATA": (DROP, 1, "unconfirmed", 1),
    "no reply after DATA": (HANG, 1, "unconfirmed", 1),
    "4xx": ("451 4.3.0 greylisted, try again later", 2, "sent", 1),
    "5xx": ("550 5.1.1 mailbox unavailable", 99, "failed", 0),
}


@pytest.mark.parametrize("mode", MODES)
def test_each_fault_mode_gives_every_recipient_one_copy_across_three_runs(survey_settings: Settings, mode: str) -> None:
    fault, times, end_state, end_copies = MODES[mode]
    victims = _recipients(survey_settings)[:2]
    tried, reply = _faulty(victims, fault, times)
    with MailSink(reply=reply) as sink:  # type: ignore[arg-type]
        s = survey_settings.with_overrides(smtp={**sink.smtp_overrides(), "timeout_seconds": DEADLINE},
                                           survey={"smtp_attempts": 2})
        runs = [survey_flow.fn(s, round=1, approve="all") for _ in range(3)]
        copies = _copies(sink)
    msgs = _messages(s)
    others = [e for e in msgs["to_email"].to_list() if e not in victims]
    assert len(others) == msgs.height - 2 > 2
    assert all(copies[e] == 1 for e in others) and all(copies[v] == end_copies for v in victims)
    assert sum(copies.values()) == len(sink.messages) == len(others) + 2 * end_copies
    ends = dict(msgs.select("to_email", "state").iter_rows())
    assert [ends[v] for v in victims] == [end_state] * 2 and all(ends[e] == "sent" for e in others)
    assert sum(r.sent for r in runs) == len(others) + (2 if end_state == "sent" else 0)
    assert runs[2].pending == runs[2].sent == 0  # the last re-run had nothing left to send
    doubtful = msgs.filter(pl.col("state") == "unconfirmed")
    if end_state == "unconfirmed":
        assert runs[0].unconfirmed == 2 and all(tried[v] == 1 for v in victims)  # never tried a second time
        assert doubtful["smtp_server"].to_list() == [f"127.0.0.1:{sink.port}"] * 2
        assert doubtful["unconfirmed_at"].null_count() == 0
        assert all("may have stored it" in r for r in doubtful["smtp_reply"])
        assert all([m["message"] for m in r.unconfirmed_messages] == doubtful["message_id"].to_list() for r in runs)
    elif end_state == "sent":  # deferred by the first run (2 tries each), sent by the second
        assert runs[0].deferred == 2 and runs[1].sent == 2 and all(tried[v] == 3 for v in victims)
    else:  # refused for good, in the server's words, and never tried again
        assert runs[0].failed == 2 and all(tried[v] == 1 for v in victims)
        failed = msgs.filter(pl.col("state") == "failed")
        assert all(r.startswith("SMTP 550 5.1.1 mailbox unavailable") for r in failed["smtp_reply"])
    if end_state != "unconfirmed":
        assert doubtful.height == 0


def test_unconfirmed_messages_are_listed_and_sent_again_only_when_named(survey_settings: Settings,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    victims = _recipients(survey_settings)[:2]
    tried, reply = _faulty(victims, DROP, 1)
    with MailSink(reply=reply) as sink:  # type: ignore[arg-type]
        s = survey_settings.with_overrides(smtp={**sink.smtp_overrides(), "timeout_seconds": DEADLINE})
        _use(monkeypatch, s)
        code, out, err = run_cli("survey", "send", "--approve", "all", "--no-track")
        assert code == 0, err
        assert "2 unconfirmed" in out and "2 unconfirmed messages: they may have arrived" in out
        ids = dict(_messages(s).filter(pl.col("state") == "unconfirmed").select("to_email", "message_id").iter_rows())
        assert sorted(ids) == victims
        code, out, err = run_cli("survey", "status")
        assert code == 0, err
        listed = [line for line in out.splitlines() if "  to " in line]
        assert len(listed) == 2
        for v in victims:
            line = next(x for x in listed if f"to {v} " in x)
            assert ids[v] in line and f"server 127.0.0.1:{sink.port}" in line and "connection was lost" in line
        # A re-run, or the old flag, sends nothing again.
        assert run_cli("survey", "send", "--approve", "all", "--no-track")[0] == 0
        code, _out, err = run_cli("survey", "send", "--approve", "all", "--resend-unconfirmed", "--no-track")
        assert code == 2 and "--resend-unconfirmed" in err
        assert _copies(sink)[victims[0]] == _copies(sink)[victims[1]] == 1
        # Named (here without its angle brackets), the first goes again; the second waits.
        code, out, err = run_cli("survey", "resend", ids[victims[0]].strip("<>"), "--no-track")
        assert code == 0, err
        assert "1 sent" in out and ids[victims[1]] in out and ids[victims[0]] not in out
        assert _copies(sink)[victims[0]] == 2 and _copies(sink)[victims[1]] == 1
        assert [m["Message-ID"] for m in sink.messages if str(m["To"]) == victims[0]] == [ids[victims[0]]] * 2
        states = dict(_messages(s).select("to_email", "state").iter_rows())
        assert states[victims[0]] == "sent" and states[victims[1]] == "unconfirmed"
        # Unknown, already sent, or no id at all: one line, exit 2, nothing sent.
        before = len(sink.messages)
        for args, words in ((["<nope@test.example>"], "no message <nope@test.example> in the warehouse"),
                            ([ids[victims[0]]], "is sent, not unconfirmed"),
                            ([ids[victims[1]], "<nope@test.example>"], "no message <nope@test.example>"),
                            ([], "Missing argument")):
            code, _out, err = run_cli("survey", "resend", *args, "--no-track")
            assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
        assert len(sink.messages) == before
        assert dict(_messages(s).select("to_email", "state").iter_rows()) == states


def test_a_server_losing_every_reply_stops_the_wave(survey_settings: Settings) -> None:
    with MailSink(reply=lambda n, msg: DROP) as lossy:
        s = survey_settings.with_overrides(smtp=lossy.smtp_overrides(), http={"breaker_failures": 3})
        with pytest.raises(ServiceUnavailable, match="3 messages in a row unconfirmed, the last with the connection was lost"):
            survey_flow.fn(s, round=1, approve="all")
        assert len(lossy.messages) == 3
    msgs = _messages(s)
    assert (msgs["state"] == "unconfirmed").sum() == 3 and set(msgs["state"]) == {"unconfirmed", "rendered"}
    with MailSink(port=lossy.port) as back:
        again = survey_flow.fn(s, round=1, approve="all")
    assert again.sent == msgs.height - 3 == len(back.messages)
    assert not set(_copies(lossy)) & set(_copies(back))  # nobody got a second copy


@pytest.mark.parametrize("connect", ["never greets", "greets, then silent", "silent after the probe"])
def test_a_server_that_never_answers_fails_within_the_deadline(survey_settings: Settings, monkeypatch: pytest.MonkeyPatch,
                                                               connect: str) -> None:
    fault = {"never greets": lambda n: HANG, "greets, then silent": lambda n: MUTE,
             "silent after the probe": lambda n: MUTE if n > 1 else None}[connect]
    with MailSink(connect=fault) as silent:
        s = survey_settings.with_overrides(smtp={**silent.smtp_overrides(), "timeout_seconds": DEADLINE})
        _use(monkeypatch, s)
        started = time.monotonic()
        code, _out, err = run_cli("survey", "send", "--approve", "all", "--no-track")
        took = time.monotonic() - started
        assert silent.messages == [] and silent.connections >= 1
    assert code == 3 and len(err.strip().splitlines()) == 1, err
    assert f"SMTP server at smtp://127.0.0.1:{silent.port} is unreachable (no reply to " in err
    assert f"within {DEADLINE:g} s" in err
    assert took < 30  # generous: the deadline is 2 s
    assert set(_messages(s)["state"]) == {"rendered"}  # nothing left, nothing lost
    with MailSink(port=silent.port) as back:
        stats = survey_flow.fn(s, round=1, approve="all")
    assert stats.sent == len(back.messages) == _messages(s).height and set(_copies(back).values()) == {1}


def test_the_default_deadline_fails_a_silent_server_within_30_seconds() -> None:
    assert SmtpSettings().timeout_seconds <= 30
    with MailSink(connect=lambda n: HANG) as silent:
        sender = SmtpSender(SmtpSettings(**silent.smtp_overrides()))
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable, match=r"no reply to the greeting within 20 s"):
            sender.probe()
        assert time.monotonic() - started < 30


def test_a_server_dripping_its_reply_cannot_outlast_the_deadline() -> None:
    """A reply trickling in a byte at a time resets no per-read timeout: the deadline holds."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def drip() -> None:
        conn, _ = listener.accept()
        with conn:
            for byte in b"220 s" + b"l" * 1000:
                if stop.wait(0.2):
                    return
                conn.sendall(bytes([byte]))

    server = threading.Thread(target=drip, daemon=True)
    server.start()
    try:
        sender = SmtpSender(SmtpSettings(host="127.0.0.1", port=port, security="none", timeout_seconds=DEADLINE))
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable, match=f"no reply to the greeting within {DEADLINE:g} s"):
            sender.probe()
        assert time.monotonic() - started < 30
    finally:
        stop.set()
        listener.close()


def _message(to: str) -> EmailMessage:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"], m["Message-ID"] = "s@test.example", to, "hi", f"<{to}>"
    m.set_content(".a line starting with a dot\nand the end\n")
    return m


def test_the_client_retries_a_connection_lost_before_the_end_of_data_and_never_after() -> None:
    tried, reply = _faulty(["b@test.example"], DROP, 1)
    with MailSink(reply=reply) as sink:  # type: ignore[arg-type]
        settings = SmtpSettings(**sink.smtp_overrides(), timeout_seconds=DEADLINE)
        with SmtpSender(settings, backoff_seconds=0.01) as sender:
            assert sender.send(_message("a@test.example")).startswith("250")
            with pytest.raises(OutcomeUnknown, match="connection was lost") as lost:
                sender.send(_message("b@test.example"))
            assert lost.value.server == f"127.0.0.1:{sink.port}"
            assert sender.send(_message("c@test.example")).startswith("250")  # on a new connection
            sink.stop()  # the server restarts: the open connection dies before the next MAIL
            with MailSink(port=sink.port) as restarted:
                assert sender.send(_message("d@test.example")).startswith("250")
    assert _copies(sink) == Counter({"a@test.example": 1, "b@test.example": 1, "c@test.example": 1})
    assert _copies(restarted) == Counter({"d@test.example": 1}) and restarted.connections == 1
    assert tried["b@test.example"] == 1
    assert sink.messages[0].get_content().startswith(".a line starting with a dot")  # dot-stuffing undone


@pytest.mark.parametrize("implicit", [False, True], ids=["starttls", "ssl"])
def test_over_tls_the_server_is_verified_and_a_lost_reply_still_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                            implicit: bool) -> None:
    import ssl

    cert_file, key_file = self_signed_certificate(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert_file, key_file)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))  # the client trusts this certificate, verified as usual
    tried, reply = _faulty(["b@test.example"], DROP, 1)
    with MailSink(reply=reply, tls=server_tls, implicit_tls=implicit) as sink:  # type: ignore[arg-type]
        settings = SmtpSettings(**sink.smtp_overrides(), timeout_seconds=DEADLINE)
        assert settings.security == ("ssl" if implicit else "starttls")
        with SmtpSender(settings, backoff_seconds=0.01) as sender:
            for to in ("a@test.example", "b@test.example", "c@test.example"):
                try:
                    sender.send(_message(to))
                except OutcomeUnknown:
                    assert to == "b@test.example"
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(ServiceUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
            SmtpSender(settings).probe()  # an unknown certificate is refused
    assert _copies(sink) == Counter({"a@test.example": 1, "b@test.example": 1, "c@test.example": 1})
