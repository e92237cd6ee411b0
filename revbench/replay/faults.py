"""Seeded fault schedule for the replay server.

A request's fate depends only on (seed, its natural key, how many times that key was asked),
never on arrival order, so concurrent clients see the same faults run after run. At most
``max_consecutive`` faults hit one key in a row: the faults are transient by construction, and
a client that retries enough always gets through.

A throttle is the one time-based fault: for its first N seconds after a service's first request,
every request to it is answered 429 without Retry-After, the way a public API's shared rate limit
answers a client that asks too fast.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable

FAULT_KINDS: dict[str, tuple[str, ...]] = {
    "arxiv": ("429", "500", "503", "timeout", "truncated", "malformed", "non_utf8"),
    # The public S2 API's 429s often carry no Retry-After: "429_bare" is one of those.
    "s2": ("429", "500", "timeout", "truncated", "malformed", "non_utf8", "429_bare"),
    "pdf": ("429", "503", "timeout", "truncated"),
    "grobid": ("500", "503", "timeout", "truncated", "malformed"),
    "openalex": ("429", "500", "503", "timeout", "truncated", "malformed"),
    "llm": ("429", "500", "timeout", "truncated", "malformed"),
}


def _unit(*parts: object) -> float:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class FaultInjector:
    """Decides, per request, whether to answer with a fault and which."""

    def __init__(self, rate: float, seed: int, max_consecutive: int = 2, kinds: dict[str, tuple[str, ...]] | None = None,
                 throttle: dict[str, float] | None = None, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.throttle = {k: v for k, v in (throttle or {}).items() if v > 0}
        self._clock = clock
        self._first_seen: dict[str, float] = {}
        self.seed = seed
        self.max_consecutive = max_consecutive
        self.kinds = {**FAULT_KINDS, **(kinds or {})}
        self._attempts: Counter[str] = Counter()
        self._streak: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.injected: Counter[str] = Counter()
        self.served: Counter[str] = Counter()

    def decide(self, service: str, key: str) -> str | None:
        """The fault kind for this request, or None to answer normally."""
        full = f"{service}:{key}"
        with self._lock:
            self.served[service] += 1
            if service in self.throttle:
                now = self._clock()
                if now - self._first_seen.setdefault(service, now) < self.throttle[service]:
                    self.injected[f"{service}:429_bare"] += 1
                    return "429_bare"
            n = self._attempts[full]
            self._attempts[full] += 1
            if self.rate <= 0 or not self.kinds.get(service) or self._streak[full] >= self.max_consecutive:
                self._streak[full] = 0
                return None
            if _unit(self.seed, full, n, "hit") >= self.rate:
                self._streak[full] = 0
                return None
            options = self.kinds[service]
            kind = options[int(_unit(self.seed, full, n, "kind") * len(options))]
            self._streak[full] += 1
            self.injected[f"{service}:{kind}"] += 1
            return kind

    def stats(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {"served": dict(self.served), "injected": dict(self.injected)}


def corrupt(body: bytes, kind: str, content_type: str) -> bytes:
    """Damage a body the way a flaky service does (cut-off transfers are the server's job)."""
    if kind == "non_utf8":
        return b"\xff\xfe\xfa" + body[: len(body) // 3] + b"\xc3\x28"
    if kind == "malformed":
        if "json" in content_type:
            return b'{"error": ' + body[:40] + b"<<<"
        return body.replace(b"</", b"<", 3)
    return body
