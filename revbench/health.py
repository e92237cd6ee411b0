"""What every service probe shares: the ``Probe`` it answers, its clock, and how it asks.

A probe (``revbench doctor``'s check of one service, registered in :mod:`revbench.services`) lives
beside the code that talks to its service, takes one :class:`ProbeContext` and answers one
:class:`Probe`. It asks the first question a run would ask, within its :class:`Clock`, and reads
no answer past a small prefix: a probe asks one short question (a health flag, a version, a
one-result feed, a one-paper batch, a model list), so a longer answer is not the service it should
be; a server that streams an endless body would otherwise fill memory until the probe's deadline,
and past it in the thread left behind. Every body a probe reads goes through :func:`read` (httpx)
or, for the arXiv probe that reads through our own client, a session made by :func:`cap_session`
(requests); past its cap the probe ends in one line saying so.

Nothing here imports the network libraries at module level: the survey and the warehouse import
this module too, and the doctor loads it before it knows which services it will probe.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import httpx
    import requests

    from revbench.settings import Settings

Status = Literal["ok", "warn", "fail", "skipped"]


@dataclass(frozen=True)
class Probe:
    """What one probe found. ``status``: ok, warn (works, with a caveat), fail (a configured stage
    would fail), skipped (not configured, or no configured stage needs it). ``fix`` says what to
    change when it is not ok."""

    service: str
    url: str
    status: Status
    detail: str = ""
    latency_ms: float | None = None
    version: str | None = None
    fix: str = ""
    label: str = ""
    """The service's label in the doctor's table (its registry entry's): set by the doctor."""


class Clock:
    """One probe's deadline: every request gets the time left, never more."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)


@dataclass(frozen=True)
class ProbeContext:
    """What every probe is given: the settings, its clock, and the entry point's readings of
    PREFECT_API_URL and PREFECT_API_AUTH_STRING (None: not set)."""

    settings: Settings
    clock: Clock
    prefect_api_url: str | None = None
    prefect_auth: str | None = None


def http_client(settings: Settings, clock: Clock, verify: Any = True, **kw: Any) -> httpx.Client:
    """An httpx client for one probe: our user agent, the probe's time left, no redirects followed."""
    import httpx

    return httpx.Client(timeout=clock.left(), verify=verify, follow_redirects=False,
                        headers={"user-agent": settings.http.user_agent, **kw.pop("headers", {})}, **kw)


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine (the demo's and the tests' servers)."""
    import ipaddress

    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def version_tuple(text: str) -> tuple[int, ...]:
    """``0.8.3-SNAPSHOT`` -> (0, 8, 3)."""
    return tuple(int(n) for n in re.findall(r"\d+", text)[:3])


def cert_problem(exc: BaseException) -> str | None:
    """The certificate verification failure behind ``exc``, if that is what it is."""
    import ssl

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen.verify_message or str(seen)
        if "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return str(seen).split("certificate verify failed:")[-1].split("(_ssl")[0].strip() or "verify failed"
        seen = seen.__cause__ or seen.__context__
    return None


def unreachable(name: str, url: str, exc: BaseException, clock: Clock, setting: str) -> Probe:
    """A request that got no HTTP answer: refused, timed out, or a certificate not trusted."""
    import httpx

    cert = cert_problem(exc)
    if cert is not None:
        return Probe(name, url, "fail", f"its TLS certificate is not trusted ({cert})",
                     fix="give it a certificate from a public CA, or name its CA's root in REVBENCH_HTTP__CA_BUNDLE")
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return Probe(name, url, "fail", f"no answer within {clock.seconds:g} s",
                     fix=f"check that it runs and that {setting} is its address (a service that accepts and never "
                         "answers stalls every run)")
    return Probe(name, url, "fail", f"cannot connect ({str(exc) or type(exc).__name__})",
                 fix=f"start it, or set {setting} to where it runs")


def root_cause(exc: BaseException) -> str:
    """The innermost reason of a chain of wrapped errors (urllib3 inside requests inside ours)."""
    while (exc.__cause__ or exc.__context__) is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    text = str(exc) or type(exc).__name__
    return short(text.rpartition("]: ")[2] if "]: " in text else text.split(": ", 1)[-1], 100)


def short(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def ms(t0: float) -> float:
    return (time.monotonic() - t0) * 1000


def userinfo(url: str) -> tuple[str, str | None, str]:
    """(``scheme://user``, the password or None, ``@host...``) of a URL, read without parsing the
    host: a URL ``urlsplit`` refuses (``http://u:pw@[::1``) still has its password found."""
    m = re.match(r"([a-z][a-z0-9+.-]*://)([^/?#\s]*)(.*)", url, re.I | re.S)
    if m is None or "@" not in m.group(2):
        return url, None, ""
    info, _, host = m.group(2).rpartition("@")
    user, colon, password = info.partition(":")
    return m.group(1) + user, password if colon else None, f"@{host}{m.group(3)}"


def redact(url: str) -> str:
    """``url`` with the password of its userinfo, and the values of query keys that look secret, as ``***``."""
    head, password, tail = userinfo(url)
    if password is not None:
        url = f"{head}:***{tail}"
    path, mark, query = url.partition("?")
    return path + mark + re.sub(r"(?i)((?:api[-_]?)?key|token|secret|password|sig)=[^&]*", r"\1=***", query)


ANSWER_CAP = 64 * 1024
"""The most a probe reads of one answer. What the probes ask is far smaller: ``true`` (GROBID's
isalive, Prefect's health), a version, ``{"ok": true}`` (the survey server), a one-result Atom feed
(3 to 5 KB from arXiv; the conformance suite serves the probe a recorded ten-result feed, 25 KB),
a one-paper batch of paperIds; the largest real recorded answers a probe is served
(../shared/external/real-responses) are the arXiv feeds of 10 and 15 results, 21 to 35 KB."""
CHUNK = 16 * 1024


class AnswerTooLarge(Exception):
    """An answer longer than a probe reads: not the service the probe asked."""

    def __init__(self, what: str, cap: int, message: str = ""):
        super().__init__(message or f"{what} answered more than {cap} bytes")
        self.what = what
        self.cap = cap


@dataclass(frozen=True)
class Answer:
    """What :func:`read` kept of an answer: its status, headers and (all of its, under the cap) body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ``ValueError`` when it is not."""
        return json.loads(self.content)


def read(client: httpx.Client, method: str, url: str, what: str, cap: int = ANSWER_CAP, **kw: Any) -> Answer:
    """``method url`` through ``client``, its body streamed and kept up to ``cap`` bytes (after
    decompression: a small compressed body cannot unpack into a large one); a longer one closes the
    connection and raises :class:`AnswerTooLarge` naming ``what`` (e.g. ``/api/isalive``)."""
    headers = {"accept-encoding": "identity", **kw.pop("headers", {})}
    with client.stream(method, url, headers=headers, **kw) as resp:
        body = bytearray()
        for chunk in _decoded(resp.iter_raw(CHUNK), resp.headers.get("content-encoding", ""), what, cap):
            body += chunk
            if len(body) > cap:
                raise AnswerTooLarge(what, cap)
        return Answer(resp.status_code, resp.headers, bytes(body))


def _decoded(raw: Iterator[bytes], encoding: str, what: str, cap: int) -> Iterator[bytes]:
    """The body as sent, unpacked when gzip or deflate (the probe asks for neither), never more
    than ``cap + 1`` bytes unpacked from one piece."""
    kind = encoding.strip().lower()
    if kind in ("", "identity"):
        yield from raw
        return
    if kind not in ("gzip", "x-gzip", "deflate"):
        raise AnswerTooLarge(what, cap, f"{what} answered in Content-Encoding {kind}, which the probe did not ask for "
                             "and cannot bound")
    unpack = zlib.decompressobj(zlib.MAX_WBITS | (16 if "gzip" in kind else 32))
    for piece in raw:
        data = piece
        while data:
            out = unpack.decompress(data, cap + 1)
            yield out
            data = unpack.unconsumed_tail
            if not out:
                break


def cap_session(session: requests.Session, what: str, cap: int = ANSWER_CAP) -> None:
    """Make every answer ``session`` reads end at ``cap`` bytes (:class:`AnswerTooLarge` past it),
    however the code that holds the session reads the body (``.content``, ``iter_content``, ``raw``)."""
    import requests

    class CappedAdapter(requests.adapters.HTTPAdapter):
        def send(self, request: Any, *args: Any, **kw: Any) -> Any:
            resp = super().send(request, *args, **kw)
            resp.raw = _CappedRaw(resp.raw, what, cap)
            return resp

    session.headers["Accept-Encoding"] = "identity"
    for prefix in ("http://", "https://"):
        session.mount(prefix, CappedAdapter())


class _CappedRaw:
    """A urllib3 response whose reads count the bytes they return and stop past the cap."""

    def __init__(self, raw: Any, what: str, cap: int):
        self._raw = raw
        self._what = what
        self._cap = cap
        self._seen = 0

    def _count(self, chunk: bytes) -> bytes:
        self._seen += len(chunk)
        if self._seen > self._cap:
            self._raw.close()
            raise AnswerTooLarge(self._what, self._cap)
        return chunk

    def stream(self, amt: int | None = 2**16, decode_content: bool | None = None) -> Iterator[bytes]:
        for chunk in self._raw.stream(min(amt or CHUNK, CHUNK), decode_content=decode_content):
            yield self._count(chunk)

    def read(self, amt: int | None = None, *args: Any, **kw: Any) -> bytes:
        if amt is not None and amt <= CHUNK:
            return self._count(self._raw.read(amt, *args, **kw))
        out = bytearray()
        while amt is None or len(out) < amt:
            chunk = self._count(self._raw.read(CHUNK if amt is None else min(CHUNK, amt - len(out)), *args, **kw))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)
