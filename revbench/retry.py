"""The retry policy every client shares: exponential backoff with jitter, Retry-After honoured."""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
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


class PermanentError(Exception):
    """A fault that retrying cannot fix (404, a body that is not what was asked for)."""

    def __init__(self, message: str, kind: str = "permanent"):
        super().__init__(message)
        self.kind = kind


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
            return min(exc.retry_after, self.http.retry_after_max_seconds)
        return float(self.backoff(state))


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

    retrying = Retrying(
        stop=stop_after_attempt(http.max_attempts),
        wait=_Wait(http),
        retry=retry_if_exception_type(TransientError),
        reraise=True,
        before_sleep=before_sleep,
        sleep=sleep,
    )
    return retrying(fn)


def classify_status(status: int, headers: Mapping[str, str], what: str) -> None:
    """Raise the right error for a non-2xx status; return for success."""
    if 200 <= status < 300:
        return
    if status in RETRYABLE_STATUS:
        kind = "rate_limited" if status == 429 else "server_error"
        raise TransientError(f"{what}: HTTP {status}", retry_after=parse_retry_after(headers), kind=kind)
    raise PermanentError(f"{what}: HTTP {status}", kind="not_found" if status == 404 else f"http_{status}")
