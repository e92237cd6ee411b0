"""Outgoing mail through ``smtplib``: STARTTLS, SSL or plain (a local server), with a login when set.

Exactly once, as far as SMTP allows. Until the message's end of data is on the wire nothing can
have been delivered, so a 4xx reply or a broken connection before then is retried (with backoff,
reconnecting); a 5xx reply is permanent and raised with the server's words. Once the whole text
was sent, a reply that never comes (a timeout, a dropped connection) leaves the outcome unknown:
the server may have stored the message. RFC 5321 §6.1 forbids settling that doubt by sending
again, so it is ``OutcomeUnknown`` and never retried here.

One deadline (``SmtpSettings.timeout_seconds``) bounds an attempt from the TCP connect to the final
reply: before each read or write the socket gets only the time left, so a server that accepts and
then never answers, or answers a byte at a time, fails within it. A server that cannot be reached
or stops answering before the message left is ``ServiceUnavailable``.
"""

from __future__ import annotations

import re
import smtplib
import socket
import ssl
import time
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any

from revbench.errors import ServiceUnavailable, UsageError
from revbench.health import Probe, ProbeContext, cert_problem, is_loopback, ms, short
from revbench.retry import PermanentError, TransientError
from revbench.settings import SmtpSettings


class OutcomeUnknown(Exception):
    """The message's whole text reached the server but no reply came back: it may have been stored."""

    def __init__(self, message: str, server: str):
        super().__init__(message)
        self.server = server


class _DeadlinePassed(TimeoutError):
    """The attempt's deadline passed (a ``TimeoutError``, so smtplib treats it as a dead socket)."""


def _code_and_text(exc: smtplib.SMTPException) -> tuple[int, str]:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, text = next(iter(exc.recipients.values()))
        return int(code), text.decode(errors="replace") if isinstance(text, bytes) else str(text)
    if isinstance(exc, smtplib.SMTPResponseException):
        text = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        return int(exc.smtp_code), text
    return 0, str(exc)


class _Reader:
    """What smtplib reads replies from: lines off the socket, with the time left set before every
    ``recv`` (a buffered file would let a server that drips a byte at a time outlast the deadline)."""

    def __init__(self, smtp: _Bounded):
        self.smtp = smtp
        self.buffer = b""

    def readline(self, limit: int = -1) -> bytes:
        sock = self.smtp.sock
        while b"\n" not in self.buffer and (limit < 0 or len(self.buffer) < limit):
            sock.settimeout(self.smtp.remaining())
            chunk = sock.recv(4096)
            if not chunk:
                break
            self.buffer += chunk
        end = self.buffer.find(b"\n") + 1 or len(self.buffer)
        if limit >= 0:
            end = min(end, limit)
        line, self.buffer = self.buffer[:end], self.buffer[end:]
        return line

    def close(self) -> None:
        self.buffer = b""


class _Bounded(smtplib.SMTP):
    """smtplib under one deadline per attempt, knowing when the outcome became unknown: from the
    moment the message's end of data was handed to the socket until a well-formed final reply."""

    deadline = float("inf")
    seconds = 0.0
    step = "the greeting"
    unknown = False
    final_reply = ""

    def bound(self, seconds: float) -> None:
        """Start an attempt: ``seconds`` from now for everything it does."""
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.unknown = False

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _DeadlinePassed(f"no reply to {self.step} within {self.seconds:g} s")
        return left

    def connect(self, host: str = "localhost", port: int = 0, source_address: Any = None) -> tuple[int, bytes]:
        # smtplib takes the name TLS verifies from the constructor's host, which we leave empty
        # so that connecting happens here, under the deadline.
        self._host = host
        return super().connect(host, port, source_address)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        self.step = "the connection"
        sock = super()._get_socket(host, port, self.remaining())
        self.step = "the greeting"
        return sock

    def putcmd(self, cmd: str, args: str = "") -> None:
        self.step = cmd.split()[0].upper() if cmd else "a command"
        super().putcmd(cmd, args)

    def send(self, s: Any) -> None:
        if self.sock is not None:
            self.sock.settimeout(self.remaining())
        try:
            super().send(s)
        except smtplib.SMTPServerDisconnected as exc:
            if isinstance(exc.__context__, TimeoutError):
                raise _DeadlinePassed(f"no room to send {self.step} within {self.seconds:g} s") from None
            raise

    def getreply(self) -> tuple[int, bytes]:
        if self.file is None and self.sock is not None:
            self.file = _Reader(self)  # type: ignore[assignment]
        try:
            return super().getreply()
        except smtplib.SMTPServerDisconnected as exc:
            if isinstance(exc.__context__, TimeoutError):
                raise _DeadlinePassed(f"no reply to {self.step} within {self.seconds:g} s") from None
            raise

    def data(self, msg: Any) -> tuple[int, bytes]:
        """smtplib's DATA, marking the instant the outcome becomes unknown."""
        self.putcmd("data")
        code, repl = self.getreply()
        if code != 354:
            raise smtplib.SMTPDataError(code, repl)
        body = msg.encode("ascii") if isinstance(msg, str) else msg
        body = re.sub(rb"(?m)^\.", b"..", body)
        if not body.endswith(b"\r\n"):
            body += b"\r\n"
        self.step = "the message's end of data"
        # If the body's send fails, its last bytes (the end-of-data mark) never left: no server
        # can have accepted it. Once send returns, they may have.
        self.send(body + b".\r\n")
        self.unknown = True
        code, repl = self.getreply()
        if not 200 <= code < 600:
            raise smtplib.SMTPResponseException(code, repl)  # still unknown: not a reply we can read
        self.unknown = False
        self.final_reply = f"{code} {repl.decode(errors='replace')}".strip()
        return code, repl


class _BoundedSSL(_Bounded, smtplib.SMTP_SSL):
    """The same over implicit TLS (port 465)."""


def bounded_connection(settings: SmtpSettings, seconds: float) -> _Bounded:
    """An SMTP client, not yet connected, whose connect, every read and every write share one
    deadline of ``seconds`` from now; over implicit TLS (the system's CAs) for ``security=ssl``.
    ``connect(host, port)`` verifies the certificate against ``host``."""
    smtp: _Bounded
    if settings.security == "ssl":
        smtp = _BoundedSSL(timeout=seconds, context=ssl.create_default_context())
    else:
        smtp = _Bounded(timeout=seconds)
    smtp.bound(seconds)
    return smtp


class SmtpSender:
    """One connection, reused for a wave of messages (``with SmtpSender(...) as s: s.send(m)``)."""

    def __init__(self, settings: SmtpSettings, attempts: int = 4, backoff_seconds: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep):
        if not settings.host:
            raise UsageError("REVBENCH_SMTP__HOST is not set: nothing can be sent (use --dry-run to write .eml files)")
        self.settings = settings
        self.attempts = attempts
        self.backoff = backoff_seconds
        self.sleep = sleep
        self.deadline = settings.timeout_seconds
        self._smtp: _Bounded | None = None
        self.server = f"{settings.host}:{settings.port}"
        self.url = f"smtp://{self.server}"

    def _unavailable(self, exc: BaseException) -> ServiceUnavailable:
        return ServiceUnavailable("SMTP server", self.url, str(exc) or type(exc).__name__)

    def _open(self) -> _Bounded:
        """A new connection, greeted, secured and logged in within the deadline just started."""
        s = self.settings
        smtp = bounded_connection(s, self.deadline)
        try:
            smtp.connect(s.host, s.port)
            if s.security == "starttls":
                smtp.starttls(context=ssl.create_default_context())
            if s.username:
                smtp.login(s.username, s.password.get_secret_value() if s.password else "")
            return smtp
        except smtplib.SMTPAuthenticationError as exc:
            smtp.close()
            raise UsageError(f"the SMTP server at {self.url} refused the login of {s.username!r}: {_code_and_text(exc)[1]}") from None
        except (OSError, smtplib.SMTPException) as exc:
            smtp.close()
            raise self._unavailable(exc) from None

    def probe(self) -> None:
        """Connect, say NOOP, leave, within the deadline: ``ServiceUnavailable`` when the server
        cannot be used."""
        smtp = self._open()
        try:
            smtp.noop()
        except (OSError, smtplib.SMTPException) as exc:
            smtp.close()
            raise self._unavailable(exc) from None
        self._close(smtp)

    def __enter__(self) -> SmtpSender:
        self._smtp = self._open()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._smtp is not None:
            self._close(self._smtp)
            self._smtp = None

    def _close(self, smtp: _Bounded) -> None:
        smtp.bound(min(self.deadline, 5.0))
        try:
            smtp.quit()
        except (OSError, smtplib.SMTPException):
            smtp.close()

    def send(self, msg: EmailMessage) -> str:
        """Send one message; returns the server's reply. ``PermanentError`` for a 5xx reply,
        ``TransientError`` when 4xx replies or a connection broken before the end of data outlast
        the attempts, ``OutcomeUnknown`` when the text left and no reply came (never retried),
        ``ServiceUnavailable`` when the server cannot be reached or stops answering before that."""
        last = ""
        for attempt in range(1, self.attempts + 1):
            if self._smtp is None:
                self._smtp = self._open()
            else:
                self._smtp.bound(self.deadline)
            smtp = self._smtp
            try:
                smtp.send_message(msg)
                return smtp.final_reply or "250 accepted"
            except Exception as exc:
                if smtp.unknown:
                    self._drop()
                    what = (f"no reply within {self.deadline:g} s" if isinstance(exc, TimeoutError)
                            else f"the connection was lost ({exc})" if isinstance(exc, OSError | smtplib.SMTPServerDisconnected)
                            else f"an unreadable reply ({exc})")
                    raise OutcomeUnknown(f"{what} after the message's end of data: the server at {self.server} "
                                         "may have stored it; not sent again unless named for a resend",
                                         self.server) from None
                if isinstance(exc, _DeadlinePassed):
                    self._drop()
                    raise self._unavailable(exc) from None
                if isinstance(exc, smtplib.SMTPServerDisconnected | ConnectionError):
                    last = f"connection lost: {exc}"
                    self._drop()
                elif isinstance(exc, smtplib.SMTPException):
                    code, text = _code_and_text(exc)
                    last = f"{code} {text}".strip()
                    if 500 <= code < 600:
                        raise PermanentError(f"SMTP {last}", kind="smtp_permanent") from None
                    self._reset()
                else:
                    raise
            if attempt < self.attempts:
                self.sleep(self.backoff * 2 ** (attempt - 1))
        raise TransientError(f"SMTP {last} after {self.attempts} attempts", kind="smtp_temporary")

    def _drop(self) -> None:
        if self._smtp is not None:
            self._smtp.close()
            self._smtp = None

    def _reset(self) -> None:
        """After a refusal: RSET on the same connection (a 421 has already closed it)."""
        try:
            if self._smtp is not None and self._smtp.sock is not None:
                self._smtp.rset()
            else:
                self._smtp = None
        except (OSError, smtplib.SMTPException):
            self._drop()


# What `revbench doctor` asks this service (registered in revbench/services.py).

def probe_smtp(ctx: ProbeContext) -> Probe:
    """Connect, EHLO, STARTTLS (security=starttls), AUTH (a username set), QUIT: nothing is sent.
    Certificates are verified as the sender verifies them (the system's CAs, or SSL_CERT_FILE)."""
    settings, clock = ctx.settings, ctx.clock
    sm = settings.smtp
    url = f"smtp://{sm.host}:{sm.port}" if sm.host else ""
    if not sm.host:
        return Probe("smtp", url, "fail", "REVBENCH_SMTP__HOST is not set: nothing can be sent",
                     fix="set REVBENCH_SMTP__HOST (and PORT, SECURITY, USERNAME, PASSWORD) to your mail server")
    if sm.security == "none" and not is_loopback(sm.host):
        return Probe("smtp", url, "fail", "security=none outside this machine: mail and the password would travel in clear",
                     fix="set REVBENCH_SMTP__SECURITY=starttls (port 587) or ssl (port 465)")

    smtp: smtplib.SMTP | None = None
    steps: list[str] = []
    step = "connect"
    latency: float | None = None
    banner: str | None = None
    try:
        # The sender's own connection: every read and write within the probe's time left (a server
        # that drips its replies a byte at a time cannot outlast it), the certificate checked alike.
        smtp = bounded_connection(sm, clock.left())
        t0 = time.monotonic()
        _code, greeting = smtp.connect(sm.host, sm.port)
        latency = ms(t0)
        banner = short(greeting.decode(errors="replace"), 60) or None
        step = "EHLO"
        code, _ = smtp.ehlo()
        if code != 250:
            return Probe("smtp", url, "fail", f"EHLO answered {code}", latency, banner, fix="check REVBENCH_SMTP__HOST and PORT")
        steps.append("EHLO")
        if sm.security == "starttls":
            if not smtp.has_extn("starttls"):
                return Probe("smtp", url, "fail", "the server does not offer STARTTLS", latency, banner,
                             fix="use the submission port 587, or REVBENCH_SMTP__SECURITY=ssl on port 465")
            step = "STARTTLS"
            smtp.starttls(context=ssl.create_default_context())
            smtp.ehlo()
            steps.append("STARTTLS")
        if sm.username:
            step = "AUTH"
            if not smtp.has_extn("auth"):
                after = " after STARTTLS" if steps[-1] == "STARTTLS" else ""
                return Probe("smtp", url, "fail", f"the server offers no AUTH{after}", latency, banner,
                             fix="check REVBENCH_SMTP__SECURITY and PORT (servers offer AUTH over TLS only)")
            smtp.login(sm.username, sm.password.get_secret_value() if sm.password else "")
            steps.append(f"AUTH as {sm.username}")
        step = "QUIT"
        smtp.quit()
    except smtplib.SMTPAuthenticationError as exc:
        said = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        return Probe("smtp", url, "fail", f"the login of {sm.username!r} was refused: {exc.smtp_code} {short(said, 80)}",
                     latency, banner, fix="check REVBENCH_SMTP__USERNAME and REVBENCH_SMTP__PASSWORD")
    except (OSError, smtplib.SMTPException) as exc:
        cert = cert_problem(exc)
        if cert is not None:
            return Probe("smtp", url, "fail", f"its TLS certificate is not trusted ({cert})",
                         fix=f"the server's certificate must be valid for {sm.host} (SSL_CERT_FILE names a private CA)")
        if _timed_out(exc):
            what = "no greeting" if step == "connect" else f"no answer to {step}"
            return Probe("smtp", url, "fail", f"{what} within {clock.seconds:g} s",
                         fix="check that it runs and that REVBENCH_SMTP__HOST and PORT are its address")
        if isinstance(exc, smtplib.SMTPNotSupportedError | smtplib.SMTPException) and step != "connect":
            return Probe("smtp", url, "fail", f"{step} failed: {short(str(exc), 100)}",
                         fix="check REVBENCH_SMTP__SECURITY and PORT (587 starttls, 465 ssl)")
        return Probe("smtp", url, "fail", f"cannot connect ({short(str(exc) or type(exc).__name__, 100)})",
                     fix="start it, or set REVBENCH_SMTP__HOST and PORT to where it runs")
    finally:
        _close(smtp)  # after QUIT a no-op; on every early answer above the connection is let go at once
    done = ", ".join(steps)
    if sm.security == "none":
        return Probe("smtp", url, "warn", f"{done}; plain text on this machine (a local server only); nothing sent",
                     latency, banner)
    return Probe("smtp", url, "ok", f"{done}; nothing sent", latency, banner)


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout is behind ``exc`` (smtplib reports one as a closed connection)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TimeoutError) or "timed out" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _close(smtp: Any) -> None:
    try:
        if smtp is not None:
            smtp.close()
    except OSError:
        pass
