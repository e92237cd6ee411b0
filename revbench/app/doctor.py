"""``revbench doctor``: every service the configured stages need, probed with its own protocol.

The services are the entries of :data:`revbench.services.SERVICES`, in table order; each probe
lives beside the code that talks to its service (GROBID's in ``revbench/clients/grobid.py``, the
survey server's in ``revbench/survey/probe.py``, ...) and asks what a run would ask first. This
module keeps what is common to all of them: which to probe (the configured stages' needs and
``--only``), running them at once, each in its own thread and on its own clock (a dead service
costs one timeout; a probe that outlives its deadline is reported as such and left behind), the
scrubbing of every secret out of what they answer, and the machine-readable answer. Nothing is
sent, recorded or locked for writing, and no answer is read past a small prefix (revbench/health.py).

A probe's module is imported only when its service is probed (all of them before any clock
starts), so loading this module loads no client, database or network library.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from revbench.app.settings_probe import plain_values
from revbench.errors import UsageError
from revbench.health import Clock, Probe, ProbeContext, redact, userinfo
from revbench.services import LABELS, SERVICES, Service

if TYPE_CHECKING:
    from collections.abc import Callable

    from revbench.settings import Settings

LOCAL_SECONDS = 30.0
MAX_TIMEOUT_SECONDS = 60.0
"""The longest a service is waited for (``--timeout``'s bound, and REVBENCH_HTTP__PROBE_TIMEOUT_SECONDS
is cut to it): a service that takes longer to say it is there is as good as down, and a person
waits for the answer."""


def parse_only(value: str | None) -> set[str] | None:
    """``--only grobid,s2`` as a set of service names; a name not in the registry is a ``UsageError``."""
    if value is None:
        return None
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    wrong = [n for n in names if n not in LABELS]
    if wrong or not names:
        import difflib

        close = difflib.get_close_matches(wrong[0], LABELS, n=1) if wrong else []
        hint = f" (did you mean {close[0]}?)" if close else ""
        what = f"unknown service {wrong[0]!r}{hint}" if wrong else "no service named"
        raise UsageError(f"--only {value!r}: {what}; services: {', '.join(LABELS)}")
    return set(names)


def needs(settings: Settings, prefect_api_url: str | None) -> dict[str, list[str]]:
    """For each service, the configured stages (REVBENCH_REFRESH__STAGES) that need it; empty: none."""
    return {s.name: s.needs(settings, prefect_api_url) for s in SERVICES}


def run_probes(settings: Settings, prefect_api_url: str | None, only: set[str] | None, timeout: float,
               prefect_auth: str | None = None) -> list[Probe]:
    """Probe every service (or those in ``only``) at once; one ``Probe`` per service, in table order.
    A service no configured stage needs is skipped unless ``only`` names it, and then its failure is
    a warning. ``prefect_api_url`` and ``prefect_auth`` are the entry point's readings of
    PREFECT_API_URL and PREFECT_API_AUTH_STRING (None: not set). ``timeout`` is capped at
    :data:`MAX_TIMEOUT_SECONDS` (the setting it defaults to has no cap)."""
    timeout = min(timeout, MAX_TIMEOUT_SECONDS)
    need = needs(settings, prefect_api_url)
    chosen = [s for s in SERVICES if (only is None and not s.asked_by) or (only and s.name in only)]
    done: dict[str, Probe] = {}
    jobs: dict[str, Service] = {}
    for s in chosen:
        if s.asked_by:
            need[s.name].append(f"{s.asked_by} (--only {s.name})")
        unset = s.unset(settings, prefect_api_url, need[s.name]) if s.unset is not None else None
        if unset is not None:
            done[s.name] = unset
        elif not need[s.name] and (only is None or s.name not in only):
            stages = ", ".join(settings.refresh.stages)
            done[s.name] = Probe(s.name, s.address(settings, prefect_api_url), "skipped",
                                 f"not needed: no stage in REVBENCH_REFRESH__STAGES ({stages}) uses it")
        else:
            jobs[s.name] = s
    done.update(_run_all(jobs, settings, prefect_api_url, prefect_auth, timeout))
    secrets = _secrets(settings, prefect_api_url) + ([prefect_auth] if prefect_auth else [])
    out = []
    for s in chosen:
        p = done[s.name]
        if p.status == "fail" and not need[s.name]:
            p = replace(p, status="warn", detail=f"{p.detail} (not needed by the configured stages)")
        out.append(_scrub(replace(p, label=s.label), secrets))
    return out


def failed(probes: list[Probe]) -> list[Probe]:
    """The probes that make ``revbench doctor`` exit non-zero."""
    return [p for p in probes if p.status == "fail"]


def _run_all(jobs: dict[str, Service], settings: Settings, prefect_api_url: str | None, prefect_auth: str | None,
             timeout: float) -> dict[str, Probe]:
    """Each job in a daemon thread (one that never returns does not hold the process), waited for
    until its deadline; a job still running then is a failure naming its timeout."""
    # Every probe is imported before any clock starts: a probe's timeout is for its service, not for
    # loading Python modules (two threads importing at once also wait on each other).
    import httpx  # noqa: F401

    probes = {name: s.load() for name, s in jobs.items()}
    results: dict[str, Probe] = {}
    lock = threading.Lock()
    threads: dict[str, tuple[threading.Thread, float]] = {}

    def work(s: Service, probe: Callable[[ProbeContext], Probe], ctx: ProbeContext) -> None:
        try:
            answer = probe(ctx)
        except Exception as exc:  # a probe's own bug must not hide the other probes' answers
            answer = _crashed(s, s.address(settings, prefect_api_url), exc)
        with lock:
            results[s.name] = answer

    for name, s in jobs.items():
        seconds = max(timeout, LOCAL_SECONDS) if s.local else timeout
        clock = Clock(seconds)
        ctx = ProbeContext(settings, clock, prefect_api_url, prefect_auth)
        thread = threading.Thread(target=work, args=(s, probes[name], ctx), name=f"doctor-{name}", daemon=True)
        thread.start()
        # A little past the probe's own deadline, so that its own report of the timeout wins.
        threads[name] = (thread, clock.deadline + min(1.0, 0.25 * seconds))
    for name, (thread, until) in threads.items():
        thread.join(max(until - time.monotonic(), 0.0))
    with lock:
        out = dict(results)
    for name, s in jobs.items():
        if name not in out:
            seconds = max(timeout, LOCAL_SECONDS) if s.local else timeout
            out[name] = Probe(name, s.address(settings, prefect_api_url), "fail", f"no answer within {seconds:g} s",
                              fix=f"start {s.label} or correct its address; a service that accepts and never "
                                  "answers stalls every run")
    return out


def _crashed(s: Service, url: str, exc: Exception) -> Probe:
    """A probe that raised: an address or a key no request can carry is the configuration's fault,
    anything else the probe's own."""
    import httpx

    from revbench.health import AnswerTooLarge

    name, setting = s.name, s.setting or "its address"
    if isinstance(exc, AnswerTooLarge):
        return Probe(name, url, "fail", str(exc), fix=f"check that {setting} is {s.label}'s address: what the probe "
                     "asks is answered in a few bytes")
    if isinstance(exc, httpx.InvalidURL):
        return Probe(name, url, "fail", f"not a valid URL ({exc})", fix=f"correct {setting}")
    if isinstance(exc, UnicodeEncodeError):
        return Probe(name, url, "fail", "a key or the address holds a character HTTP cannot carry (not ASCII)",
                     fix=f"check {setting} and this service's API key")
    return Probe(name, url, "fail", f"the probe failed: {type(exc).__name__}: {exc}",
                 fix="report this as a bug of revbench doctor")


def _secrets(settings: Settings, prefect_api_url: str | None) -> list[str]:
    """Every secret value a probe could echo: the keys and passwords, and passwords in URLs (as
    written and percent-decoded)."""
    from urllib.parse import unquote

    from pydantic import SecretStr

    values: list[str] = []
    for section in settings.model_dump().values():
        items = section.values() if isinstance(section, dict) else [section]
        for v in items:
            for one in v if isinstance(v, list) else [v]:
                if isinstance(one, SecretStr) and one.get_secret_value():
                    values.append(one.get_secret_value())
    # Any setting may hold a URL with a password (a proxy, a Dask scheduler), not only the services'.
    for text in [prefect_api_url or "", *(text for _var, text in plain_values(settings))]:
        for url in URL.findall(text):
            password = userinfo(url)[1]
            if password:
                values += [password, unquote(password)]
    return sorted({v for v in values if len(v) >= 3}, key=len, reverse=True)


URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.I)
"""A URL in a text (what the scrubbing redacts)."""


def _scrub(probe: Probe, secrets: list[str]) -> Probe:
    def clean(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "***")
        return URL.sub(lambda m: redact(m.group(0)), text)

    return replace(probe, url=clean(probe.url), detail=clean(probe.detail), fix=clean(probe.fix),
                   version=clean(probe.version) if probe.version else probe.version)


def as_json(probes: list[Probe]) -> dict[str, Any]:
    """The machine-readable answer of ``--json``."""
    return {"ok": not failed(probes), "probes": [
        {"service": p.service, "label": p.label, "url": p.url, "status": p.status, "detail": p.detail,
         "latency_ms": None if p.latency_ms is None else round(p.latency_ms, 1), "version": p.version, "fix": p.fix}
        for p in probes]}


def failure_line(p: Probe) -> str:
    """The one line a failure gets after the table: the service, its URL, what is wrong and what to do."""
    where = f" at {p.url}" if p.url else ""
    return f"{p.label}{where}: {p.detail}" + (f"; {p.fix}" if p.fix else "")
