"""The retry policy every client shares: exponential backoff with jitter, Retry-After honoured.

A Retry-After is waited only while it fits: one longer than ``http.retry_after_max_seconds``, or
than what is left of a throttled client's patience, gives the request up at once as
``RateLimited`` (left for the next run), instead of sleeping a wait the run cannot afford."""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from revbench.errors import ServiceUnavailable
from revbench.settings import HttpSettings

T = TypeVar("T")
log = logging.getLogger("revbench.retry")

RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class TransientError(Exception):
    """A fault worth retrying: 429, 5xx, timeouts, truncated or malformed bodies."""

    def __init__(self, message: str, retry_after: float | None = None, kind: str = "transient"):
        super().__init__(message)
        self.retry_after = retry_after
        self.kind = kind


class RateLimited(TransientError):
    """The service kept answering 429 for longer than the client's patience. It answered, so this
    never trips the breaker, and the client already waited it out, so it is not retried again now:
    the work is left for the next run."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message, retry_after=retry_after, kind="rate_limited")


class PermanentError(Exception):
    """A fault that retrying cannot fix (404, a body that is not what was asked for)."""

    def __init__(self, message: str, kind: str = "permanent"):
        super().__init__(message)
        self.kind = kind


def public_url(url: str) -> str:
    """``url`` as an error line may show it: no user, password, query or fragment (a query can
    carry a key)."""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class ResponseTooLarge(TransientError):
    """A service answered more than the client reads of one answer (``http.max_response_bytes``):
    reading stopped there, so an endless or huge answer never fills memory. Not retried, as a
    ``RateLimited`` is not: the same request would get the same answer. The work is left for the
    next run, and a service that keeps answering so trips the breaker like any other failure."""

    def __init__(self, service: str, url: str, limit: int):
        super().__init__(f"{service} {public_url(url)}: answered more than {limit} bytes", kind="too_large")


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date)."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class _Wait:
    """Backoff that yields to the server's Retry-After when it gave one."""

    def __init__(self, http: HttpSettings):
        self.http = http
        self.backoff = wait_exponential_jitter(initial=http.backoff_initial_seconds, max=http.backoff_max_seconds)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            return min(exc.retry_after, self.http.retry_after_max_seconds)  # over it, the request was given up
        return float(self.backoff(state))


class AdaptivePacer:
    """Spaces one client's requests, shared by its threads. At best they are ``floor`` seconds apart
    (the service's documented rate, the ceiling we never exceed); a 429 without Retry-After doubles
    the pause (to at least ``first_backoff``, at most ``ceiling``) and each success takes
    ``recovery`` seconds off it again, down to ``floor``: multiplicative decrease, additive increase
    of the rate (AIMD), so a throttled run slows down instead of failing and speeds up slowly. A
    Retry-After holds the next request until then without changing the pause: the server said
    exactly how long."""

    def __init__(self, floor: float, ceiling: float, recovery: float, first_backoff: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.floor = floor
        self.ceiling = max(ceiling, floor)
        self.recovery = recovery
        self.first_backoff = first_backoff
        self._clock = clock
        self._sleep = sleep
        self._interval = floor
        self._next: float | None = None
        self._lock = threading.Lock()
        self.slowest = floor

    @property
    def interval(self) -> float:
        """The pause now kept between two requests."""
        with self._lock:
            return self._interval

    def wait(self) -> None:
        """Block until this caller may send its request (each caller reserves its own slot)."""
        with self._lock:
            now = self._clock()
            start = now if self._next is None else max(now, self._next)
            self._next = start + self._interval
        if start > now:
            self._sleep(start - now)

    def throttled(self, retry_after: float | None = None) -> None:
        """The service answered 429: slow down (or, with ``retry_after``, hold until then)."""
        with self._lock:
            now = self._clock()
            if retry_after is not None:
                self._next = max(self._next or now, now + retry_after)
                return
            self._interval = min(self.ceiling, max(self._interval * 2, self.first_backoff, self.floor))
            self.slowest = max(self.slowest, self._interval)
            self._next = max(self._next or now, now + self._interval)

    def success(self) -> None:
        """The service answered without throttling: recover a little of the rate."""
        with self._lock:
            self._interval = max(self.floor, self._interval - self.recovery)


def send_through_429s(send: Callable[[], T], answer: Callable[[T], tuple[int, Mapping[str, str]]], pacer: AdaptivePacer,
                      patience_seconds: float, retry_after_max_seconds: float, what: str,
                      on_429: Callable[[bool], None] | None = None) -> T:
    """``send`` at ``pacer``'s pace until the answer (``answer`` gives its status and headers) is
    not a 429, and return it. A 429 is waited out here, never counted as a failed attempt: the
    service answers, only not this fast, so a Retry-After holds the next request that long and a
    bare 429 slows the pace (``on_429`` is told whether it did), until the service lets us through
    or ``patience_seconds`` have passed: then ``RateLimited``, naming ``what``. A Retry-After past
    the patience left (or past ``retry_after_max_seconds``) is ``RateLimited`` at once: waiting it
    out would outlast the patience anyway. A 2xx answer wins back a little of the pace."""
    patience_ends: float | None = None
    while True:
        pacer.wait()
        resp = send()
        status, headers = answer(resp)
        if status != 429:
            if 200 <= status < 300:
                pacer.success()
            return resp
        retry_after = parse_retry_after(headers)
        now = time.monotonic()
        patience_ends = patience_ends or now + patience_seconds
        if now >= patience_ends:
            raise RateLimited(f"{what}: HTTP 429" + (f" for {patience_seconds:.0f} s" if patience_seconds else ""), retry_after)
        left = patience_ends - now
        if retry_after is not None and retry_after > min(left, retry_after_max_seconds):
            raise RateLimited(f"{what}: HTTP 429 asks to wait {retry_after:.0f} s (Retry-After), longer than the "
                              f"{min(left, retry_after_max_seconds):.0f} s it may still wait; left for the next run",
                              retry_after)
        before = pacer.interval
        pacer.throttled(None if retry_after is None else min(retry_after, retry_after_max_seconds))
        if on_429 is not None:
            on_429(pacer.interval > before)


class Breaker:
    """One per service client: calls that still fail after all their retries, in a row, mean the
    service is down or unusable, and the run must stop as failed instead of recording thousands
    of failures (or rejecting papers) because our side could not reach it."""

    def __init__(self, service: str, url: str, threshold: int):
        self.service = service
        self.url = url
        self.threshold = threshold
        self.failures = 0
        self._lock = threading.Lock()

    def success(self) -> None:
        with self._lock:
            self.failures = 0

    def failure(self, exc: TransientError) -> None:
        """Count one failed call; raise ``ServiceUnavailable`` once ``threshold`` are in a row."""
        with self._lock:
            self.failures += 1
            tripped = self.failures >= self.threshold
        if tripped:
            raise ServiceUnavailable(self.service, self.url, f"{self.failures} calls in a row failed; last: {exc}") from exc


def call_with_retries(
    fn: Callable[[], T],
    http: HttpSettings,
    what: str,
    on_retry: Callable[[int, BaseException], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    breaker: Breaker | None = None,
) -> T:
    """Call ``fn`` until it succeeds, retrying ``TransientError`` up to ``http.max_attempts``
    times; the last ``TransientError`` (or any other exception) propagates, unless ``breaker``
    turns it into ``ServiceUnavailable``."""
    if breaker is None:
        return _retrying(fn, http, what, on_retry, sleep)
    try:
        result = _retrying(fn, http, what, on_retry, sleep)
    except RateLimited:
        raise  # the service answers, only slowly: a slowed run is not a failed one
    except TransientError as exc:
        breaker.failure(exc)
        raise
    except PermanentError:
        breaker.success()  # the service answered: it is reachable, the request was wrong
        raise
    breaker.success()
    return result


def _retrying(
    fn: Callable[[], T], http: HttpSettings, what: str, on_retry: Callable[[int, BaseException], None] | None,
    sleep: Callable[[float], None],
) -> T:

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.debug("retrying %s after attempt %d: %s", what, state.attempt_number, exc)
        if on_retry and exc is not None:
            on_retry(state.attempt_number, exc)

    def attempt() -> T:
        try:
            return fn()
        except (RateLimited, ResponseTooLarge):
            raise
        except TransientError as exc:
            if exc.retry_after is not None and exc.retry_after > http.retry_after_max_seconds:
                # Sleeping that long (or cutting the wait short only to be refused again) costs the
                # run more than the request is worth: it is left for the next run.
                raise RateLimited(f"{exc}; Retry-After {exc.retry_after:.0f} s is longer than the "
                                  f"{http.retry_after_max_seconds:.0f} s a request waits (http.retry_after_max_seconds)",
                                  exc.retry_after) from exc
            raise

    retrying = Retrying(
        stop=stop_after_attempt(http.max_attempts),
        wait=_Wait(http),
        retry=retry_if_exception(lambda e: isinstance(e, TransientError) and not isinstance(e, RateLimited | ResponseTooLarge)),
        reraise=True,
        before_sleep=before_sleep,
        sleep=sleep,
    )
    return retrying(attempt)


def classify_status(status: int, headers: Mapping[str, str], what: str, detail: str | None = None) -> None:
    """Raise the right error for a non-2xx status; return for success. ``detail`` (the service's
    own error text) goes into the message."""
    if 200 <= status < 300:
        return
    message = f"{what}: HTTP {status}" + (f" ({detail})" if detail else "")
    if status in RETRYABLE_STATUS:
        kind = "rate_limited" if status == 429 else "server_error"
        raise TransientError(message, retry_after=parse_retry_after(headers), kind=kind)
    raise PermanentError(message, kind="not_found" if status == 404 else f"http_{status}")
