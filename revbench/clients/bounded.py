"""Answers read up to a size cap, whichever HTTP library a client speaks through.

Every reader streams: a declared ``Content-Length`` over the cap is refused before any of the
body is read, and an undeclared (chunked, or lying) body is counted as it arrives and dropped
at the first byte over the cap, so an endless answer never holds more than the cap in memory.
Over the cap is ``ResponseTooLarge`` (one line: the service, its URL without query, the cap);
``PdfClient`` keeps its own ``pdf_too_large`` (a property of the paper, see ``revbench.clients.pdf``).

A list a service can grow without end is read up to a cap too (``cut_list``, ``Cut``): a paper's
references, its authors, an author's works, topics, institutions. Each answer is capped in bytes,
but a list paged over many answers is not, and one record with a huge list must not fill memory
nor the warehouse. The caps are settings (``s2.max_*``, ``openalex.max_*``) set well above any real
paper; a list cut at one is named, so a run says which papers it kept short.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import requests

from revbench.retry import ResponseTooLarge, TransientError

CHUNK = 64 * 1024


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The body length a response declares, or None (absent or not a number)."""
    value = headers.get("content-length")
    return int(value) if value is not None and value.strip().isdigit() else None


def capped(chunks: Iterable[bytes], limit: int, over: Callable[[], Exception]) -> Iterator[bytes]:
    """``chunks`` passed through until more than ``limit`` bytes came, then ``over()`` is raised."""
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        if seen > limit:
            raise over()
        yield chunk


def read_httpx(resp: httpx.Response, limit: int, service: str) -> bytes:
    """The (decoded) body of a response opened with ``stream=True``, at most ``limit`` bytes."""

    def over() -> ResponseTooLarge:
        return ResponseTooLarge(service, str(resp.request.url), limit)

    declared = declared_length(resp.headers)
    if declared is not None and declared > limit:
        raise over()
    return b"".join(capped(resp.iter_bytes(), limit, over))


def send_streamed(client: httpx.Client, request: httpx.Request, limit: int, service: str,
                  what: str) -> tuple[httpx.Response, bytes]:
    """Send ``request`` and read its answer up to ``limit`` bytes (closed either way); a timeout or
    a broken transfer is a ``TransientError`` named ``what: timeout (...)`` or ``what: ...``."""
    try:
        resp = client.send(request, stream=True)
        try:
            return resp, read_httpx(resp, limit, service)
        finally:
            resp.close()
    except httpx.TimeoutException as exc:
        raise TransientError(f"{what}: timeout ({exc})", kind="timeout") from exc
    except httpx.TransportError as exc:
        raise TransientError(f"{what}: {exc}", kind="transport") from exc


def read_requests(resp: requests.Response, limit: int, service: str) -> bytes:
    """The (decoded) body of a ``requests`` response opened with ``stream=True``, at most
    ``limit`` bytes; it is also kept as the response's content, so ``.content`` and ``.text``
    answer from it as they would have without streaming. The connection is released."""

    def over() -> ResponseTooLarge:
        resp.close()
        return ResponseTooLarge(service, str(resp.url), limit)

    declared = declared_length(resp.headers)
    if declared is not None and declared > limit:
        raise over()
    body = b"".join(capped(resp.iter_content(CHUNK), limit, over))
    # What requests itself does once it has read a body (Response.content): later reads use it.
    resp._content = body
    resp._content_consumed = True
    resp.close()
    return body


def cap_responses(client: Any, limit: int, service: str) -> None:
    """Make every response ``client`` reads stop past ``limit`` bytes on the wire, for a client
    whose reads we do not drive (the openai SDK's; ``httpx`` or its fork ``httpx2``, whichever
    the SDK's version speaks). Its response hook runs before the body is read: it refuses a
    declared length over the cap and wraps the body's stream in one that counts."""

    def hook(response: Any) -> None:
        def over() -> ResponseTooLarge:
            return ResponseTooLarge(service, str(response.request.url), limit)

        declared = declared_length(response.headers)
        if declared is not None and declared > limit:
            response.close()
            raise over()
        response.stream = _counted(type(response.stream))(response.stream, limit, over)

    client.event_hooks["response"] = [*client.event_hooks["response"], hook]


@functools.cache
def _counted(stream_type: type) -> type:
    # The response insists on its own library's SyncByteStream, so the wrapper derives from it.
    base = next(c for c in stream_type.__mro__ if c.__name__ == "SyncByteStream")

    class Counted(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, limit: int, over: Callable[[], Exception]):
            self.inner, self.limit, self.over = inner, limit, over

        def __iter__(self) -> Iterator[bytes]:
            return capped(self.inner, self.limit, self.over)

        def close(self) -> None:
            self.inner.close()

    return Counted


@dataclass(frozen=True)
class Cut:
    """One list kept short at its cap: its source, what it was (``references of ARXIV:2401.00001``),
    how many items were kept and, when the answer said, how many were left out."""

    source: str
    of: str
    kept: int
    dropped: int | None = None

    def line(self) -> str:
        """The cut in one line, as a log or a run's notes show it."""
        more = f"{self.dropped} more" if self.dropped is not None else "more"
        return f"{self.source} {self.of}: kept the first {self.kept}, {more} left out at the cap"

    def row(self) -> dict[str, Any]:
        """The cut as a plain record (a stage's notes)."""
        return asdict(self)


def cut_list(record: dict[str, Any], key: str, most: int) -> int:
    """Cut ``record[key]``, when it is a list, to its first ``most`` items; how many were left out (0: none)."""
    items = record.get(key)
    if not isinstance(items, list) or len(items) <= most:
        return 0
    dropped = len(items) - most
    del items[most:]
    return dropped
