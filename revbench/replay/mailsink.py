"""A real SMTP server on loopback (``aiosmtpd``) that keeps what it receives: the demo's and the
tests' mail server. It can answer chosen messages with a temporary (4xx) or permanent (5xx)
reply, the way a real server sometimes does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from revbench.replay.server import free_port


class MailSink:
    """``with MailSink() as sink: ...`` runs the server; ``sink.messages`` holds what arrived.

    ``reply(n, message)`` may return an SMTP reply string (``"451 try later"``) to refuse the
    n-th delivery attempt (counted from 1) instead of accepting it."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, reply: Callable[[int, EmailMessage], str | None] | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.reply = reply
        self.messages: list[EmailMessage] = []
        self.attempts = 0
        self._lock = threading.Lock()
        self._controller: Any = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's hook name)
        msg = message_from_bytes(envelope.content, policy=policy.default)
        with self._lock:
            self.attempts += 1
            n = self.attempts
        answer = self.reply(n, msg) if self.reply else None  # type: ignore[arg-type]
        if answer:
            return answer
        with self._lock:
            self.messages.append(msg)  # type: ignore[arg-type]
        return "250 Message accepted for delivery"

    def start(self) -> MailSink:
        from aiosmtpd.controller import Controller

        self._controller = Controller(self, hostname=self.host, port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> MailSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def smtp_overrides(self) -> dict[str, Any]:
        """The ``smtp`` settings section that sends here."""
        return {"host": self.host, "port": self.port, "security": "none", "username": "", "password": None}
