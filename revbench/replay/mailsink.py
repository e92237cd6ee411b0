"""A real SMTP server on loopback (``aiosmtpd``) that keeps what it receives: the demo's and the
tests' mail server. It can misbehave the ways real servers do: refuse a message with a temporary
(4xx) or permanent (5xx) reply, store a message and then answer too late, drop the connection or
never answer, and accept a connection without ever greeting it."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any, Literal

from revbench.replay.server import free_port


@dataclass(frozen=True)
class Fault:
    """A misbehaviour of the sink (see ``MailSink``). After a message's data, the message is stored
    first: ``slow`` answers 250 after ``seconds``, ``drop`` closes the connection without a reply,
    ``hang`` never answers. On a new connection, ``hang`` never greets and ``mute`` greets and then
    never answers anything."""

    action: Literal["slow", "drop", "hang", "mute"]
    seconds: float = 0.0


def slow_reply(seconds: float) -> Fault:
    """Store the message and answer 250 only after ``seconds``."""
    return Fault("slow", seconds)


DROP = Fault("drop")
HANG = Fault("hang")
MUTE = Fault("mute")
_FOREVER = 3600.0


class MailSink:
    """``with MailSink() as sink: ...`` runs the server; ``sink.messages`` holds what it stored.

    ``reply(n, message)`` is asked about the n-th delivery attempt (counted from 1): ``None``
    accepts it; an SMTP reply string (``"451 try later"``, ``"550 no such user"``) refuses it
    (nothing stored); a ``Fault`` stores it and then answers late, drops the connection or never
    answers. ``connect(n)`` is asked about the n-th connection: ``HANG`` or ``MUTE``, or ``None``.
    With ``tls`` (a server context) it offers STARTTLS (``require_starttls``: and refuses anything
    else before it), or with ``implicit_tls`` speaks TLS from the first byte (port 465 style). With
    ``login`` (user, password) it requires AUTH (over TLS when it offers TLS) and answers any other
    pair 535, as a real submission server does."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0,
                 reply: Callable[[int, EmailMessage], str | Fault | None] | None = None,
                 connect: Callable[[int], Fault | None] | None = None,
                 tls: ssl.SSLContext | None = None, implicit_tls: bool = False, require_starttls: bool = False,
                 login: tuple[str, str] | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.reply = reply
        self.connect = connect
        self.tls = tls
        self.implicit_tls = implicit_tls
        self.require_starttls = require_starttls
        self.login = login
        self.logins: list[tuple[str, bool]] = []
        """Each AUTH attempt: the user name and whether it was accepted."""
        self.messages: list[EmailMessage] = []
        self.attempts = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._controller: Any = None
        self._open: set[Any] = set()
        self._counting = False

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's hook name)
        msg = message_from_bytes(envelope.content, policy=policy.default)
        with self._lock:
            self.attempts += 1
            n = self.attempts
        answer = self.reply(n, msg) if self.reply else None  # type: ignore[arg-type]
        if isinstance(answer, str):
            return answer
        with self._lock:
            self.messages.append(msg)  # type: ignore[arg-type]
        if answer is not None:
            if answer.action == "drop":
                server.transport.close()
            await asyncio.sleep(answer.seconds if answer.action == "slow" else _FOREVER)
        return "250 Message accepted for delivery"

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> Any:
        from aiosmtpd.smtp import AuthResult, LoginPassword

        ok = False
        user = ""
        if isinstance(auth_data, LoginPassword) and self.login is not None:
            user = auth_data.login.decode(errors="replace")
            ok = (user, auth_data.password.decode(errors="replace")) == self.login
        with self._lock:
            self.logins.append((user, ok))
        return AuthResult(success=ok, handled=False)

    def _on_connect(self) -> Fault | None:
        with self._lock:
            if not self._counting:  # aiosmtpd's own check that the server is up
                return None
            self.connections += 1
            n = self.connections
        return self.connect(n) if self.connect else None

    def start(self) -> MailSink:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import SMTP

        sink = self

        class Server(SMTP):  # type: ignore[misc]
            fault: Fault | None = None
            greeted = False

            def connection_made(self, transport: Any) -> None:
                self.fault = sink._on_connect()
                sink._open.add(self)
                super().connection_made(transport)

            def connection_lost(self, error: Exception | None) -> None:
                sink._open.discard(self)
                super().connection_lost(error)

            async def push(self, status: Any) -> None:
                first, self.greeted = not self.greeted, True
                if self.fault is not None and (self.fault.action == "hang" if first else self.fault.action == "mute"):
                    await asyncio.sleep(_FOREVER)
                await super().push(status)

        class Faulty(Controller):  # type: ignore[misc]
            def factory(self) -> SMTP:
                return Server(self.handler, **self.SMTP_kwargs)

        tls: dict[str, Any] = ({"ssl_context": self.tls} if self.implicit_tls else
                               {"tls_context": self.tls, "require_starttls": self.require_starttls} if self.tls else {})
        if self.login is not None:
            tls.update(authenticator=self._authenticate, auth_required=True,
                       auth_require_tls=self.tls is not None and not self.implicit_tls)
        self._controller = Faulty(self, hostname=self.host, port=self.port, **tls)
        self._controller.start()
        self._counting = True
        return self

    def stop(self) -> None:
        if self._controller is not None:
            # Close what a fault holds open, so the server's shutdown does not wait on it.
            def close_all() -> None:
                for conn in list(self._open):
                    if conn.transport is not None:
                        conn.transport.close()

            self._controller.loop.call_soon_threadsafe(close_all)
            self._controller.stop()
            self._controller = None
            self._counting = False

    def __enter__(self) -> MailSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def smtp_overrides(self) -> dict[str, Any]:
        """The ``smtp`` settings section that sends here."""
        security = "ssl" if self.implicit_tls else "starttls" if self.tls else "none"
        user, password = self.login or ("", None)
        return {"host": self.host, "port": self.port, "security": security, "username": user, "password": password}
