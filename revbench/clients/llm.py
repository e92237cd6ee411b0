"""OpenAI-compatible chat completions with our retry policy and a response cache."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from revbench.clients.bounded import cap_responses
from revbench.health import Probe, ProbeContext, http_client, ms, read, short, unreachable
from revbench.retry import Breaker, PermanentError, TransientError, call_with_retries, parse_retry_after
from revbench.settings import HttpSettings, LlmSettings
from revbench.text_clean import clean_text


class LlmUnavailable(ValueError):
    """No LLM endpoint is configured."""


def prompt_hash(model: str, prompt: str) -> str:
    return hashlib.sha256(f"{model}\x1f{prompt}".encode()).hexdigest()


class LlmCache:
    """Answers by (model, prompt) hash, appended to a JSONL file so reruns ask nothing twice."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._answers: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    self._answers[rec["hash"]] = rec

    def get(self, key: str) -> str | None:
        rec = self._answers.get(key)
        return rec["answer"] if rec else None

    def put(self, key: str, answer: str, meta: dict[str, Any]) -> None:
        rec = {"hash": key, "answer": answer, **meta}
        with self._lock:
            self._answers[key] = rec
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")


class LlmClient:
    """``complete(prompt)`` through the ``openai`` client at ``settings.base_url``."""

    def __init__(self, settings: LlmSettings, http: HttpSettings, cache_dir: Path | None = None):
        if not settings.base_url:
            raise LlmUnavailable("no LLM configured (set REVBENCH_LLM__BASE_URL)")
        from openai import DefaultHttpxClient, OpenAI

        self.settings = settings
        self.http = http
        key = settings.api_key.get_secret_value() if settings.api_key else "unused"
        # The SDK reads each answer whole; its HTTP client stops past the cap (an endless answer
        # ends as ResponseTooLarge, which the SDK lets through unwrapped).
        http_client = DefaultHttpxClient()
        cap_responses(http_client, http.max_response_bytes, "LLM")
        # Our retry policy governs (Retry-After, backoff); the SDK's own retries are off.
        self._client = OpenAI(base_url=settings.base_url, api_key=key, timeout=http.timeout_seconds, max_retries=0,
                              http_client=http_client)
        self.cache = LlmCache(cache_dir / "llm" / f"{hashlib.sha1(settings.model.encode()).hexdigest()[:10]}.jsonl") if cache_dir else None
        self.requests_made = 0
        self.cache_hits = 0
        self.cleaned = 0
        """Characters of answers that UTF-8 cannot hold (lone surrogates), replaced by U+FFFD."""
        self.breaker = Breaker("LLM", settings.base_url, http.breaker_failures)

    def _once(self, prompt: str) -> str:
        import openai

        self.requests_made += 1
        try:
            resp = self._client.chat.completions.create(
                model=self.settings.model, messages=[{"role": "user", "content": prompt}], temperature=0
            )
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise TransientError(f"LLM transport: {exc}", kind="timeout") from exc
        except openai.RateLimitError as exc:
            # parse_retry_after reads an HTTP date too, which float() would turn into a crash.
            ra = parse_retry_after(exc.response.headers) if exc.response is not None else None
            raise TransientError("LLM rate limited", retry_after=ra, kind="rate_limited") from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500:
                raise TransientError(f"LLM HTTP {exc.status_code}", kind="server_error") from exc
            raise PermanentError(f"LLM HTTP {exc.status_code}: {exc.message}", kind=f"http_{exc.status_code}") from exc
        except (json.JSONDecodeError, ValueError) as exc:
            raise TransientError(f"LLM answer unreadable: {exc}", kind="malformed") from exc
        try:
            content = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise TransientError("LLM answer has no choices[0].message.content", kind="malformed") from exc
        if content is None:
            raise TransientError("LLM answered with empty content", kind="malformed")
        # The answer is cached as UTF-8 and read into frames: a lone surrogate in it would fail both.
        content, replaced = clean_text(str(content))
        self.cleaned += replaced
        return content

    def complete(self, prompt: str, meta: dict[str, Any] | None = None, use_cache: bool = True) -> str:
        """The model's answer to ``prompt``, from the cache when it was asked before."""
        key = prompt_hash(self.settings.model, prompt)
        if use_cache and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return hit
        answer = call_with_retries(lambda: self._once(prompt), self.http, "LLM completion", breaker=self.breaker)
        if self.cache is not None:
            self.cache.put(key, answer, {"model": self.settings.model, **(meta or {})})
        return answer


# What `revbench doctor` asks this service (registered in revbench/services.py).

MODELS_CAP = 4 * 2**20
"""The most the LLM probe reads of ``/models``: the one list whose length is the service's own
(an OpenAI-compatible router lists hundreds of models with their descriptions, about 1 MB)."""


def probe_llm(ctx: ProbeContext) -> Probe:
    """``GET /models`` with the key; the configured model must be listed. An endpoint without a
    model list gets a one-token completion with the model instead."""
    import httpx

    settings, clock = ctx.settings, ctx.clock
    llm = settings.llm
    base = (llm.base_url or "").rstrip("/")
    key = llm.api_key.get_secret_value() if llm.api_key is not None else ""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        with http_client(settings, clock, headers=headers) as client:
            t0 = time.monotonic()
            resp = read(client, "GET", f"{base}/models", "/models", MODELS_CAP, timeout=clock.left())
            latency = ms(t0)
            if resp.status_code in (404, 405):
                resp = read(client, "POST", f"{base}/chat/completions", "/chat/completions", timeout=clock.left(), json={
                    "model": llm.model, "max_tokens": 1, "messages": [{"role": "user", "content": "Say OK."}]})
                return _llm_completion(base, llm.model, resp, latency)
    except httpx.HTTPError as exc:
        return unreachable("llm", base, exc, clock, "REVBENCH_LLM__BASE_URL")
    if resp.status_code in (401, 403):
        return Probe("llm", base, "fail", f"the API key was refused: HTTP {resp.status_code}{_llm_said(resp)}", latency,
                     fix="check REVBENCH_LLM__API_KEY")
    try:
        ids = [m["id"] for m in resp.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return Probe("llm", base, "fail", f"/models answered HTTP {resp.status_code}{_llm_said(resp)}, not a model list",
                     latency, fix="set REVBENCH_LLM__BASE_URL to an OpenAI-compatible root ending in /v1")
    if llm.model not in ids:
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        return Probe("llm", base, "fail", f"model {llm.model!r} is not among the {len(ids)} it serves ({shown})", latency,
                     fix="set REVBENCH_LLM__MODEL to a model it lists")
    return Probe("llm", base, "ok", f"model {llm.model} listed ({len(ids)} models)", latency)


def _llm_said(resp: Any) -> str:
    try:
        message = resp.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return ""
    return f" ({short(str(message), 80)})"


def _llm_completion(base: str, model: str, resp: Any, latency: float) -> Probe:
    if resp.status_code in (401, 403):
        return Probe("llm", base, "fail", f"the API key was refused: HTTP {resp.status_code}{_llm_said(resp)}", latency,
                     fix="check REVBENCH_LLM__API_KEY")
    if resp.status_code != 200:
        return Probe("llm", base, "fail", f"no model list, and a one-token completion with {model!r} answered "
                     f"HTTP {resp.status_code}{_llm_said(resp)}", latency,
                     fix="check REVBENCH_LLM__MODEL and REVBENCH_LLM__BASE_URL (an OpenAI-compatible root ending in /v1)")
    return Probe("llm", base, "ok", f"no model list; a one-token completion with {model} answered", latency)
