"""How ``revbench doctor`` reads an answer: streamed, at most a small prefix, then let go.

A probe asks one short question (a health flag, a version, a one-result feed, a one-paper batch,
a model list), so a longer answer is not the service it should be: a server that streams an
endless body would otherwise fill memory until the probe's deadline, and past it in the thread
left behind. Every body a probe reads goes through :func:`read` (httpx) or, for the arXiv probe
that reads through our own client, a session made by :func:`cap_session` (requests); past its cap
the probe ends in one line saying so.

The network libraries are imported inside the functions: the command line loads the doctor for
every command's ``--help``.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx
    import requests

ANSWER_CAP = 64 * 1024
"""The most a probe reads of one answer. What the probes ask is far smaller: ``true`` (GROBID's
isalive, Prefect's health), a version, ``{"ok": true}`` (the survey server), a one-result Atom feed
(3 to 5 KB from arXiv; the conformance suite serves the probe a recorded ten-result feed, 25 KB),
a one-paper batch of paperIds; the largest real recorded answers a probe is served
(../shared/external/real-responses) are the arXiv feeds of 10 and 15 results, 21 to 35 KB."""
MODELS_CAP = 4 * 2**20
"""The most the LLM probe reads of ``/models``: the one list whose length is the service's own
(an OpenAI-compatible router lists hundreds of models with their descriptions, about 1 MB)."""
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
