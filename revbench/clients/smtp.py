"""Outgoing mail through ``smtplib``: STARTTLS, SSL or plain (a local server), with a login when set.

A reply in the 4xx range is temporary and retried (with backoff, reconnecting); a 5xx reply is
permanent and raised with the server's words; a server that cannot be reached is
``ServiceUnavailable`` before anything is sent.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
import time
from collections.abc import Callable
from email.message import EmailMessage

from revbench.errors import ServiceUnavailable, UsageError
from revbench.retry import PermanentError, TransientError
from revbench.settings import SmtpSettings


def _code_and_text(exc: smtplib.SMTPException) -> tuple[int, str]:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, text = next(iter(exc.recipients.values()))
        return int(code), text.decode(errors="replace") if isinstance(text, bytes) else str(text)
    if isinstance(exc, smtplib.SMTPResponseException):
        text = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        return int(exc.smtp_code), text
    return 0, str(exc)


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
        self._smtp: smtplib.SMTP | None = None
        self.url = f"smtp://{settings.host}:{settings.port}"

    def _connect(self) -> smtplib.SMTP:
        s = self.settings
        try:
            if s.security == "ssl":
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(s.host, s.port, timeout=s.timeout_seconds, context=ssl.create_default_context())
            else:
                smtp = smtplib.SMTP(s.host, s.port, timeout=s.timeout_seconds)
                if s.security == "starttls":
                    smtp.starttls(context=ssl.create_default_context())
            if s.username:
                smtp.login(s.username, s.password.get_secret_value() if s.password else "")
            return smtp
        except smtplib.SMTPAuthenticationError as exc:
            raise UsageError(f"the SMTP server at {self.url} refused the login of {s.username!r}: {_code_and_text(exc)[1]}") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise ServiceUnavailable("SMTP server", self.url, str(exc) or type(exc).__name__) from None

    def probe(self) -> None:
        """Connect, say NOOP, leave: ``ServiceUnavailable`` when the server cannot be used."""
        smtp = self._connect()
        try:
            smtp.noop()
        finally:
            self._close(smtp)

    def __enter__(self) -> SmtpSender:
        self._smtp = self._connect()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._smtp is not None:
            self._close(self._smtp)
            self._smtp = None

    @staticmethod
    def _close(smtp: smtplib.SMTP) -> None:
        try:
            smtp.quit()
        except (OSError, smtplib.SMTPException):
            smtp.close()

    def send(self, msg: EmailMessage) -> str:
        """Send one message; returns the server's reply. ``PermanentError`` for a 5xx reply,
        ``TransientError`` when 4xx replies or a broken connection outlast the attempts."""
        last = ""
        for attempt in range(1, self.attempts + 1):
            try:
                if self._smtp is None:
                    self._smtp = self._connect()
                self._smtp.send_message(msg)
                return "250 accepted"
            except (smtplib.SMTPServerDisconnected, socket.timeout, ConnectionError) as exc:
                last = f"connection lost: {exc}"
                self._smtp = None
            except smtplib.SMTPException as exc:
                code, text = _code_and_text(exc)
                last = f"{code} {text}".strip()
                if 500 <= code < 600:
                    raise PermanentError(f"SMTP {last}", kind="smtp_permanent") from None
                self._reset()
            if attempt < self.attempts:
                self.sleep(self.backoff * 2 ** (attempt - 1))
        raise TransientError(f"SMTP {last} after {self.attempts} attempts", kind="smtp_temporary")

    def _reset(self) -> None:
        try:
            if self._smtp is not None:
                self._smtp.rset()
        except (OSError, smtplib.SMTPException):
            self._smtp = None
