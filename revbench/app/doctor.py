"""``revbench doctor``: every service the configured stages need, probed with its own protocol.

Each probe asks what a run would ask first (GROBID's isalive and version, a one-result arXiv query
through our Atom parser, a one-paper Semantic Scholar batch with the key, the LLM's model list,
SMTP up to AUTH and no further, the survey server's health, a signed probe link over verified
TLS and a link it must refuse, the Prefect API's health and version and, where the deployment has
credentials, a request without them refused; the data folder, the settings) and answers one
``Probe``. Probes run at once, each in its own thread, so a dead service costs one timeout; a
probe that outlives its deadline is reported as such and left behind. Nothing is sent, recorded or
locked for writing, and no secret is printed: every text a probe returns is scrubbed of the
configured secrets and of passwords in URLs. No answer is read past a small prefix (doctor_http.py).

Imports of the clients, the warehouse and the network libraries happen inside the probes: the
command line loads this module for every command's ``--help``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from revbench.app.doctor_http import MODELS_CAP, read
from revbench.errors import UsageError

if TYPE_CHECKING:
    import httpx

    from revbench.settings import Settings

Status = Literal["ok", "warn", "fail", "skipped"]

SERVICES: dict[str, str] = {
    "settings": "Settings",
    "data": "Data directory",
    "warehouse": "Warehouse",
    "store": "Survey store",
    "grobid": "GROBID",
    "arxiv": "arXiv API",
    "pdf": "arXiv PDFs",
    "s2": "Semantic Scholar",
    "llm": "LLM",
    "smtp": "SMTP",
    "survey": "Survey server",
    "prefect": "Prefect API",
    "isolation": "Curator plane from here",
}
"""Every probe by the name ``--only`` takes, with the label the table shows, in table order."""
LOCAL = ("settings", "data", "warehouse", "store")
"""Probes of this machine: no network timeout applies (a slow disk is not a dead service)."""
LOCAL_SECONDS = 30.0
MAX_TIMEOUT_SECONDS = 60.0
"""The longest a service is waited for (``--timeout``'s bound, and REVBENCH_HTTP__PROBE_TIMEOUT_SECONDS
is cut to it): a service that takes longer to say it is there is as good as down, and a person
waits for the answer."""

GROBID_FLOOR = (0, 6, 1)
"""The oldest GROBID whose TEI our parser is tested on: the conformance suite
(tests/conformance/test_grobid.py) parses every sample of ../shared/external/real-responses/grobid,
written by GROBID 0.6.1 (the oldest, resources__test_pdf__0046d83a-...tei.xml) up to 0.8.3-SNAPSHOT."""
PDF_PROBE = "1706.03762v1"
"""The PDF whose headers the PDF probe asks for (the S2 probe's paper; the body is not fetched)."""
S2_PROBE_ID = "ARXIV:1706.03762"
"""The paper the Semantic Scholar probe looks up ("Attention Is All You Need"; an unknown id
answers null, which is as good an answer)."""
LOW_SPACE_BYTES = 5 * 2**30
"""Free space under which the data folder is a warning: a full-size refresh writes gigabytes
(PDF-free, but the warehouse, the embedding cache and DuckDB's spill files)."""
PLACEHOLDER = re.compile(r"change[-_ ]?me|replace[-_ ]?me|^your[-_ ]|^x{3,}$|^<[^>]*>$", re.I)
"""What the templates write where a user must put their own value (`change-me`, `xxx`, `<key>`)."""
PLACEHOLDER_SECRET = re.compile(r"^(todo|secret|password|changeit|key|token)$", re.I)
"""Words a secret is set to while nobody has chosen one."""
PLACEHOLDER_HOST = re.compile(r"(^|\.)(example\.(com|org|net)|example|invalid)$", re.I)
"""Hosts reserved for examples (RFC 2606): nothing real answers there."""


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

    @property
    def label(self) -> str:
        return SERVICES.get(self.service, self.service)


def parse_only(value: str | None) -> set[str] | None:
    """``--only grobid,s2`` as a set of service names; a name not in :data:`SERVICES` is a ``UsageError``."""
    if value is None:
        return None
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    wrong = [n for n in names if n not in SERVICES]
    if wrong or not names:
        import difflib

        close = difflib.get_close_matches(wrong[0], SERVICES, n=1) if wrong else []
        hint = f" (did you mean {close[0]}?)" if close else ""
        what = f"unknown service {wrong[0]!r}{hint}" if wrong else "no service named"
        raise UsageError(f"--only {value!r}: {what}; services: {', '.join(SERVICES)}")
    return set(names)


def needs(settings: Settings, prefect_api_url: str | None) -> dict[str, list[str]]:
    """For each service, the configured stages (REVBENCH_REFRESH__STAGES) that need it; empty: none."""
    stages = settings.refresh.stages
    need: dict[str, list[str]] = {name: [] for name in SERVICES}
    for name in ("settings", "data", "warehouse"):
        need[name].append("every stage")
    if "ingest" in stages:
        for name in ("arxiv", "pdf", "s2", "grobid"):
            need[name].append("ingest")
    if "pools" in stages and settings.pools.fetch_s2_histories:
        need["s2"].append("pools")
    if settings.llm.base_url and "disambiguate" in stages and settings.disambiguate.use_llm:
        need["llm"].append("disambiguate")  # without an LLM it decides offline
    # The evaluate stage runs REVBENCH_RATINGS__EVALUATE_SCORERS; a published release too, when
    # REVBENCH_RELEASE__EVALUATE_AFTER (a refresh's ratings stage leaves it to the evaluate stage).
    evaluating = [s for s in ("release", "evaluate") if s in stages
                  and (s == "evaluate" or settings.release.evaluate_after)]
    if evaluating and llm_scorers(settings.ratings.evaluate_scorers, bool(settings.llm.base_url)):
        need["llm"] += evaluating
    if "survey" in stages:
        for name in ("smtp", "survey", "store"):
            need[name].append("survey")
    if "ratings" in stages:
        need["store"].append("ratings")
    if prefect_api_url:
        need["prefect"].append("tracked runs")
    # isolation is asked for by name, from the survey server's side (from the flows' side the
    # curator's plane is reachable by design): it never runs otherwise.
    return need


def llm_scorers(specs: list[str], llm_configured: bool) -> list[str]:
    """The scorer specs that call the LLM, by their own ``services()`` (scorers/llm.py and rate.py):
    ``llm``, and ``rate`` asking for keywords by LLM (``keywords=llm``, or ``auto`` with an LLM
    configured). Read from the spec text: the scorers' modules load the ML stack."""
    out = []
    for spec in specs:
        name, _, rest = spec.partition(":")
        params = dict(p.partition("=")[::2] for p in rest.split(","))
        keywords = params.get("keywords", "auto").strip()
        name = name.strip()
        if name == "llm" or (name == "rate" and (keywords == "llm" or (keywords == "auto" and llm_configured))):
            out.append(spec)
    return out


def run_probes(settings: Settings, prefect_api_url: str | None, only: set[str] | None, timeout: float,
               prefect_auth: str | None = None) -> list[Probe]:
    """Probe every service (or those in ``only``) at once; one ``Probe`` per service, in table order.
    A service no configured stage needs is skipped unless ``only`` names it, and then its failure is
    a warning. ``prefect_api_url`` and ``prefect_auth`` are the entry point's readings of
    PREFECT_API_URL and PREFECT_API_AUTH_STRING (None: not set). ``timeout`` is capped at
    :data:`MAX_TIMEOUT_SECONDS` (the setting it defaults to has no cap)."""
    timeout = min(timeout, MAX_TIMEOUT_SECONDS)
    need = needs(settings, prefect_api_url)
    if only and "isolation" in only:
        need["isolation"].append("the survey server's side (--only isolation)")
    chosen = [name for name in SERVICES if (only is None and name != "isolation") or (only and name in only)]
    done: dict[str, Probe] = {}
    jobs: dict[str, Callable[[_Clock], Probe]] = {}
    for name in chosen:
        if name == "llm" and not settings.llm.base_url and need["llm"]:
            done[name] = Probe(name, "", "fail", f"REVBENCH_LLM__BASE_URL is not set, and {' and '.join(need['llm'])} "
                               f"run the scorers {', '.join(llm_scorers(settings.ratings.evaluate_scorers, False))}",
                               fix="set REVBENCH_LLM__BASE_URL (and its key), or take those scorers out of "
                                   "REVBENCH_RATINGS__EVALUATE_SCORERS")
        elif name == "llm" and not settings.llm.base_url:
            done[name] = Probe(name, "", "skipped", "not configured (REVBENCH_LLM__BASE_URL): the offline fallbacks decide")
        elif name == "prefect" and not prefect_api_url:
            done[name] = Probe(name, "", "skipped", "not configured (PREFECT_API_URL): each tracked run starts a temporary "
                                                    "local server")
        elif not need[name] and (only is None or name not in only):
            done[name] = Probe(name, _url_of(settings, name, prefect_api_url), "skipped",
                               f"not needed: no stage in REVBENCH_REFRESH__STAGES ({', '.join(settings.refresh.stages)}) uses it")
        else:
            jobs[name] = _job(settings, name, prefect_api_url, prefect_auth)
    _preload(jobs)
    done.update(_run_all(jobs, settings, prefect_api_url, timeout))
    secrets = _secrets(settings, prefect_api_url) + ([prefect_auth] if prefect_auth else [])
    out = []
    for name in chosen:
        p = done[name]
        if p.status == "fail" and not need[name]:
            p = replace(p, status="warn", detail=f"{p.detail} (not needed by the configured stages)")
        out.append(_scrub(p, secrets))
    return out


def failed(probes: list[Probe]) -> list[Probe]:
    """The probes that make ``revbench doctor`` exit non-zero."""
    return [p for p in probes if p.status == "fail"]


class _Clock:
    """One probe's deadline: every request gets the time left, never more."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)


def _job(settings: Settings, name: str, prefect_api_url: str | None, prefect_auth: str | None) -> Callable[[_Clock], Probe]:
    from revbench.app.doctor_isolation import probe_isolation
    from revbench.app.doctor_prefect import probe_prefect

    table: dict[str, Callable[[_Clock], Probe]] = {
        "settings": lambda c: probe_settings(settings),
        "data": lambda c: probe_data(settings),
        "warehouse": lambda c: probe_warehouse(settings),
        "store": lambda c: probe_store(settings),
        "grobid": lambda c: probe_grobid(settings, c),
        "arxiv": lambda c: probe_arxiv(settings, c),
        "pdf": lambda c: probe_pdf(settings, c),
        "s2": lambda c: probe_s2(settings, c),
        "llm": lambda c: probe_llm(settings, c),
        "smtp": lambda c: probe_smtp(settings, c),
        "survey": lambda c: probe_survey(settings, c),
        "prefect": lambda c: probe_prefect(settings, prefect_api_url or "", prefect_auth, c),
        "isolation": lambda c: probe_isolation(settings, prefect_api_url, c),
    }
    return table[name]


def _preload(jobs: dict[str, Any]) -> None:
    """Import what the probes use before any clock starts: a probe's timeout is for its service,
    not for loading Python modules (two threads importing at once also wait on each other)."""
    import httpx  # noqa: F401

    if "arxiv" in jobs:
        import revbench.clients.arxiv_api  # noqa: F401
    if "warehouse" in jobs:
        import revbench.warehouse.status  # noqa: F401
    if "store" in jobs:
        import revbench.warehouse.survey_store  # noqa: F401
    if "survey" in jobs:
        import revbench.survey.tokens  # noqa: F401


def _run_all(jobs: dict[str, Callable[[_Clock], Probe]], settings: Settings, prefect_api_url: str | None,
             timeout: float) -> dict[str, Probe]:
    """Each job in a daemon thread (one that never returns does not hold the process), waited for
    until its deadline; a job still running then is a failure naming its timeout."""
    results: dict[str, Probe] = {}
    lock = threading.Lock()
    threads: dict[str, tuple[threading.Thread, float]] = {}

    def work(name: str, job: Callable[[_Clock], Probe], clock: _Clock) -> None:
        try:
            probe = job(clock)
        except Exception as exc:  # a probe's own bug must not hide the other probes' answers
            probe = _crashed(name, _url_of(settings, name, prefect_api_url), exc)
        with lock:
            results[name] = probe

    for name, job in jobs.items():
        seconds = max(timeout, LOCAL_SECONDS) if name in LOCAL else timeout
        clock = _Clock(seconds)
        thread = threading.Thread(target=work, args=(name, job, clock), name=f"doctor-{name}", daemon=True)
        thread.start()
        # A little past the probe's own deadline, so that its own report of the timeout wins.
        threads[name] = (thread, clock.deadline + min(1.0, 0.25 * seconds))
    for name, (thread, until) in threads.items():
        thread.join(max(until - time.monotonic(), 0.0))
    with lock:
        out = dict(results)
    for name in jobs:
        if name not in out:
            seconds = max(timeout, LOCAL_SECONDS) if name in LOCAL else timeout
            out[name] = Probe(name, _url_of(settings, name, prefect_api_url), "fail", f"no answer within {seconds:g} s",
                              fix=f"start {SERVICES[name]} or correct its address; a service that accepts and never "
                                  "answers stalls every run")
    return out


URL_SETTINGS = {"grobid": "REVBENCH_GROBID__BASE_URL", "arxiv": "REVBENCH_ARXIV__BASE_URL", "pdf": "REVBENCH_PDF__BASE_URL",
                "s2": "REVBENCH_S2__BASE_URL", "llm": "REVBENCH_LLM__BASE_URL", "survey": "REVBENCH_SURVEY__BASE_URL",
                "prefect": "PREFECT_API_URL"}
"""The setting that holds each network service's address."""


def _crashed(name: str, url: str, exc: Exception) -> Probe:
    """A probe that raised: an address or a key no request can carry is the configuration's fault,
    anything else the probe's own."""
    import httpx

    from revbench.app.doctor_http import AnswerTooLarge

    setting = URL_SETTINGS.get(name, "its address")
    if isinstance(exc, AnswerTooLarge):
        return Probe(name, url, "fail", str(exc), fix=f"check that {setting} is {SERVICES[name]}'s address: what the probe "
                     "asks is answered in a few bytes")
    if isinstance(exc, httpx.InvalidURL):
        return Probe(name, url, "fail", f"not a valid URL ({exc})", fix=f"correct {setting}")
    if isinstance(exc, UnicodeEncodeError):
        return Probe(name, url, "fail", "a key or the address holds a character HTTP cannot carry (not ASCII)",
                     fix=f"check {setting} and this service's API key")
    return Probe(name, url, "fail", f"the probe failed: {type(exc).__name__}: {exc}",
                 fix="report this as a bug of revbench doctor")


def _url_of(settings: Settings, name: str, prefect_api_url: str | None) -> str:
    """Where a service is probed, as the table shows it."""
    s = settings
    return {
        "settings": "environment and .env",
        "data": str(s.data_dir.absolute()),
        "warehouse": str(s.warehouse_path.absolute()),
        "store": str(s.survey_store_path.absolute()),
        "grobid": s.grobid.base_url.rstrip("/"),
        "arxiv": s.arxiv.base_url,
        "pdf": s.pdf.base_url.rstrip("/"),
        "s2": s.s2.base_url.rstrip("/"),
        "llm": (s.llm.base_url or "").rstrip("/"),
        "smtp": f"smtp://{s.smtp.host}:{s.smtp.port}" if s.smtp.host else "",
        "survey": s.survey.base_url.rstrip("/"),
        "prefect": (prefect_api_url or "").rstrip("/"),
    }.get(name, "")


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
    for text in [prefect_api_url or "", *(text for _var, text in _plain_values(settings))]:
        for url in URL.findall(text):
            password = _userinfo(url)[1]
            if password:
                values += [password, unquote(password)]
    return sorted({v for v in values if len(v) >= 3}, key=len, reverse=True)


URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.I)
"""A URL in a text (what the scrubbing redacts)."""


def _userinfo(url: str) -> tuple[str, str | None, str]:
    """(``scheme://user``, the password or None, ``@host...``) of a URL, read without parsing the
    host: a URL ``urlsplit`` refuses (``http://u:pw@[::1``) still has its password found."""
    m = re.match(r"([a-z][a-z0-9+.-]*://)([^/?#\s]*)(.*)", url, re.I | re.S)
    if m is None or "@" not in m.group(2):
        return url, None, ""
    userinfo, _, host = m.group(2).rpartition("@")
    user, colon, password = userinfo.partition(":")
    return m.group(1) + user, password if colon else None, f"@{host}{m.group(3)}"


def redact(url: str) -> str:
    """``url`` with the password of its userinfo, and the values of query keys that look secret, as ``***``."""
    head, password, tail = _userinfo(url)
    if password is not None:
        url = f"{head}:***{tail}"
    path, mark, query = url.partition("?")
    return path + mark + re.sub(r"(?i)((?:api[-_]?)?key|token|secret|password|sig)=[^&]*", r"\1=***", query)


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


def http_client(settings: Settings, clock: _Clock, verify: Any = True, **kw: Any) -> httpx.Client:
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


def _cert_problem(exc: BaseException) -> str | None:
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


def _unreachable(name: str, url: str, exc: BaseException, clock: _Clock, setting: str) -> Probe:
    """A request that got no HTTP answer: refused, timed out, or a certificate not trusted."""
    import httpx

    cert = _cert_problem(exc)
    if cert is not None:
        return Probe(name, url, "fail", f"its TLS certificate is not trusted ({cert})",
                     fix="give it a certificate from a public CA, or name its CA's root in REVBENCH_HTTP__CA_BUNDLE")
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return Probe(name, url, "fail", f"no answer within {clock.seconds:g} s",
                     fix=f"check that it runs and that {setting} is its address (a service that accepts and never "
                         "answers stalls every run)")
    return Probe(name, url, "fail", f"cannot connect ({str(exc) or type(exc).__name__})",
                 fix=f"start it, or set {setting} to where it runs")


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a chain of wrapped errors (urllib3 inside requests inside ours)."""
    while (exc.__cause__ or exc.__context__) is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    text = str(exc) or type(exc).__name__
    return _short(text.rpartition("]: ")[2] if "]: " in text else text.split(": ", 1)[-1], 100)


def _short(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _ms(t0: float) -> float:
    return (time.monotonic() - t0) * 1000


def probe_grobid(settings: Settings, clock: _Clock) -> Probe:
    """``GET /api/isalive`` (true), then ``/api/version``, not older than :data:`GROBID_FLOOR`."""
    import httpx

    base = settings.grobid.base_url.rstrip("/")
    setting = "REVBENCH_GROBID__BASE_URL"
    try:
        with http_client(settings, clock) as client:
            t0 = time.monotonic()
            alive = read(client, "GET", f"{base}/api/isalive", "/api/isalive", timeout=clock.left())
            latency = _ms(t0)
            if alive.status_code != 200 or alive.text.strip().lower() != "true":
                return Probe("grobid", base, "fail", f"/api/isalive answered HTTP {alive.status_code} "
                             f"{_short(alive.text, 60)!r}, not true", latency,
                             fix=f"set {setting} to the GROBID server's root (where /api/isalive answers true)")
            answer = read(client, "GET", f"{base}/api/version", "/api/version", timeout=clock.left())
    except httpx.HTTPError as exc:
        return _unreachable("grobid", base, exc, clock, setting)
    version = _grobid_version(answer)
    floor = ".".join(map(str, GROBID_FLOOR))
    if version is None:
        return Probe("grobid", base, "warn", f"alive; /api/version answered HTTP {answer.status_code}, no version",
                     latency, fix=f"run GROBID {floor} or newer (the TEI parser is tested on 0.6.1 to 0.8.3)")
    if version_tuple(version) < GROBID_FLOOR:
        return Probe("grobid", base, "fail", f"GROBID {version} is older than {floor}, the oldest whose TEI our parser is "
                     "tested on", latency, version, fix="run a current GROBID (e.g. the grobid/grobid:0.8.2 image)")
    return Probe("grobid", base, "ok", "alive", latency, version)


def _grobid_version(answer: Any) -> str | None:
    """GROBID's version: JSON ``{"version": ...}`` from recent servers, the bare text from older ones."""
    if answer.status_code != 200:
        return None
    text = answer.text.strip()
    try:
        import json

        body = json.loads(text)
    except ValueError:
        body = text
    version = body.get("version") if isinstance(body, dict) else body if isinstance(body, str) else None
    return str(version) if version and re.match(r"^\d+\.\d+", str(version)) else None


def probe_arxiv(settings: Settings, clock: _Clock) -> Probe:
    """A one-result query (``cat:cs.LG``) through our client and the ``arxiv`` package's Atom parser."""
    from revbench.app.doctor_http import cap_session
    from revbench.clients.arxiv_api import ArxivClient
    from revbench.retry import PermanentError, RateLimited, TransientError

    url = settings.arxiv.base_url
    http = settings.http.model_copy(update={"timeout_seconds": clock.left(), "max_attempts": 1})
    # A probe reports a 429 at once; a run waits it out.
    client = ArxivClient(settings.arxiv.model_copy(update={"throttle_patience_seconds": 0.0}), http)
    cap_session(client._session, "the query endpoint")
    t0 = time.monotonic()
    try:
        page = client.fetch({"search_query": "cat:cs.LG", "max_results": 1})
    except RateLimited:
        return Probe("arxiv", url, "warn", "answers, but rate-limited right now (HTTP 429); runs slow down and wait", _ms(t0))
    except (TransientError, PermanentError) as exc:
        import requests

        cause = exc.__cause__
        if isinstance(cause, requests.Timeout):
            return Probe("arxiv", url, "fail", f"no answer within {clock.seconds:g} s",
                         fix="check that it runs and that REVBENCH_ARXIV__BASE_URL is its query endpoint "
                             "(https://export.arxiv.org/api/query)")
        if isinstance(cause, requests.RequestException):
            cert = _cert_problem(cause)
            what = f"its TLS certificate is not trusted ({cert})" if cert else f"cannot connect ({_root_cause(cause)})"
            return Probe("arxiv", url, "fail", what, fix="check REVBENCH_ARXIV__BASE_URL "
                         "(https://export.arxiv.org/api/query) and that arXiv can be reached from here")
        return Probe("arxiv", url, "fail", _short(str(exc), 160), _ms(t0),
                     fix="check REVBENCH_ARXIV__BASE_URL (https://export.arxiv.org/api/query) and that arXiv answers")
    finally:
        client._session.close()
    latency = _ms(t0)
    if not page.records:
        return Probe("arxiv", url, "warn", f"the Atom feed parsed but held no entry ({page.total} results)", latency,
                     fix="check that REVBENCH_ARXIV__BASE_URL is arXiv's query endpoint")
    return Probe("arxiv", url, "ok", f"Atom feed parsed: {page.records[0].arxiv_id} of {page.total} results", latency)


def probe_pdf(settings: Settings, clock: _Clock) -> Probe:
    """``HEAD /pdf/{PDF_PROBE}`` where the extraction downloads PDFs: any HTTP answer is the host
    answering (as the run's own check before extraction); a PDF there is the full answer."""
    import httpx

    base = settings.pdf.base_url.rstrip("/")
    try:
        with http_client(settings, clock) as client:
            t0 = time.monotonic()
            resp = read(client, "HEAD", f"{base}/pdf/{PDF_PROBE}", f"/pdf/{PDF_PROBE}", timeout=clock.left())
            latency = _ms(t0)
    except httpx.HTTPError as exc:
        return _unreachable("pdf", base, exc, clock, "REVBENCH_PDF__BASE_URL")
    kind = resp.headers.get("content-type", "").split(";")[0].strip()
    if resp.status_code == 200 and kind == "application/pdf":
        return Probe("pdf", base, "ok", f"a PDF answers at /pdf/{PDF_PROBE}", latency)
    if resp.status_code >= 500:
        return Probe("pdf", base, "warn", f"answers, but /pdf/{PDF_PROBE} answered HTTP {resp.status_code}", latency,
                     fix="check REVBENCH_PDF__BASE_URL (https://arxiv.org) and that the host serves PDFs")
    return Probe("pdf", base, "ok", f"answers (HTTP {resp.status_code} {kind or 'without a type'} for "
                 f"/pdf/{PDF_PROBE}, a paper it need not hold)", latency)


def probe_s2(settings: Settings, clock: _Clock) -> Probe:
    """A one-paper ``POST /paper/batch`` with the key when one is set; says the pace it implies."""
    import httpx

    from revbench.clients.semantic_scholar import error_text, request_headers

    s2 = settings.s2
    base = s2.base_url.rstrip("/")
    key = s2.api_key is not None
    try:
        with http_client(settings, clock, headers=request_headers(s2, settings.http)) as client:
            t0 = time.monotonic()
            resp = read(client, "POST", f"{base}/paper/batch", "/paper/batch", params={"fields": "paperId"},
                        json={"ids": [S2_PROBE_ID]}, timeout=clock.left())
            latency = _ms(t0)
    except httpx.HTTPError as exc:
        return _unreachable("s2", base, exc, clock, "REVBENCH_S2__BASE_URL")
    said = error_text(resp.content)
    said = f" ({said})" if said else ""
    if resp.status_code in (401, 403):
        if key:
            return Probe("s2", base, "fail", f"the API key was refused: HTTP {resp.status_code}{said}", latency,
                         fix="check REVBENCH_S2__API_KEY (or leave it empty for the slower keyless pool)")
        return Probe("s2", base, "fail", f"HTTP {resp.status_code}{said} without a key", latency,
                     fix="set REVBENCH_S2__API_KEY, or check REVBENCH_S2__BASE_URL")
    if resp.status_code == 429:
        return Probe("s2", base, "warn", f"answers, but rate-limited right now (HTTP 429){said}; runs slow down and wait",
                     latency, fix="" if key else "an API key (REVBENCH_S2__API_KEY) gets a rate of its own")
    try:
        body = resp.json()
    except ValueError:
        body = None
    if resp.status_code != 200 or not isinstance(body, list) or len(body) != 1:
        return Probe("s2", base, "fail", f"/paper/batch answered HTTP {resp.status_code}{said}, not a one-paper batch",
                     latency, fix="set REVBENCH_S2__BASE_URL to the Graph API root (https://api.semanticscholar.org/graph/v1)")
    if key:
        return Probe("s2", base, "ok", f"key accepted: runs {_pace(s2.delay_seconds)}", latency)
    return Probe("s2", base, "ok", f"no key: the shared keyless pool; runs {_pace(s2.keyless_delay_seconds)}", latency)


def _pace(seconds: float) -> str:
    return f"send one request per {seconds:g} s" if seconds > 0 else "send requests without a pause"


def probe_llm(settings: Settings, clock: _Clock) -> Probe:
    """``GET /models`` with the key; the configured model must be listed. An endpoint without a
    model list gets a one-token completion with the model instead."""
    import httpx

    llm = settings.llm
    base = (llm.base_url or "").rstrip("/")
    key = llm.api_key.get_secret_value() if llm.api_key is not None else ""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        with http_client(settings, clock, headers=headers) as client:
            t0 = time.monotonic()
            resp = read(client, "GET", f"{base}/models", "/models", MODELS_CAP, timeout=clock.left())
            latency = _ms(t0)
            if resp.status_code in (404, 405):
                resp = read(client, "POST", f"{base}/chat/completions", "/chat/completions", timeout=clock.left(), json={
                    "model": llm.model, "max_tokens": 1, "messages": [{"role": "user", "content": "Say OK."}]})
                return _llm_completion(base, llm.model, resp, latency)
    except httpx.HTTPError as exc:
        return _unreachable("llm", base, exc, clock, "REVBENCH_LLM__BASE_URL")
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
    return f" ({_short(str(message), 80)})"


def _llm_completion(base: str, model: str, resp: Any, latency: float) -> Probe:
    if resp.status_code in (401, 403):
        return Probe("llm", base, "fail", f"the API key was refused: HTTP {resp.status_code}{_llm_said(resp)}", latency,
                     fix="check REVBENCH_LLM__API_KEY")
    if resp.status_code != 200:
        return Probe("llm", base, "fail", f"no model list, and a one-token completion with {model!r} answered "
                     f"HTTP {resp.status_code}{_llm_said(resp)}", latency,
                     fix="check REVBENCH_LLM__MODEL and REVBENCH_LLM__BASE_URL (an OpenAI-compatible root ending in /v1)")
    return Probe("llm", base, "ok", f"no model list; a one-token completion with {model} answered", latency)


def probe_smtp(settings: Settings, clock: _Clock) -> Probe:
    """Connect, EHLO, STARTTLS (security=starttls), AUTH (a username set), QUIT: nothing is sent.
    Certificates are verified as the sender verifies them (the system's CAs, or SSL_CERT_FILE)."""
    import smtplib
    import ssl

    sm = settings.smtp
    url = f"smtp://{sm.host}:{sm.port}" if sm.host else ""
    if not sm.host:
        return Probe("smtp", url, "fail", "REVBENCH_SMTP__HOST is not set: nothing can be sent",
                     fix="set REVBENCH_SMTP__HOST (and PORT, SECURITY, USERNAME, PASSWORD) to your mail server")
    if sm.security == "none" and not is_loopback(sm.host):
        return Probe("smtp", url, "fail", "security=none outside this machine: mail and the password would travel in clear",
                     fix="set REVBENCH_SMTP__SECURITY=starttls (port 587) or ssl (port 465)")
    from revbench.clients.smtp import bounded_connection

    smtp: smtplib.SMTP | None = None
    steps: list[str] = []
    step = "connect"
    latency: float | None = None
    banner: str | None = None
    try:
        # The sender's own connection: every read and write within the probe's time left (a server
        # that drips its replies a byte at a time cannot outlast it), the certificate checked alike.
        smtp = bounded_connection(sm, clock.left())
        t0 = time.monotonic()
        _code, greeting = smtp.connect(sm.host, sm.port)
        latency = _ms(t0)
        banner = _short(greeting.decode(errors="replace"), 60) or None
        step = "EHLO"
        code, _ = smtp.ehlo()
        if code != 250:
            return Probe("smtp", url, "fail", f"EHLO answered {code}", latency, banner, fix="check REVBENCH_SMTP__HOST and PORT")
        steps.append("EHLO")
        if sm.security == "starttls":
            if not smtp.has_extn("starttls"):
                return Probe("smtp", url, "fail", "the server does not offer STARTTLS", latency, banner,
                             fix="use the submission port 587, or REVBENCH_SMTP__SECURITY=ssl on port 465")
            step = "STARTTLS"
            smtp.starttls(context=ssl.create_default_context())
            smtp.ehlo()
            steps.append("STARTTLS")
        if sm.username:
            step = "AUTH"
            if not smtp.has_extn("auth"):
                after = " after STARTTLS" if steps[-1] == "STARTTLS" else ""
                return Probe("smtp", url, "fail", f"the server offers no AUTH{after}", latency, banner,
                             fix="check REVBENCH_SMTP__SECURITY and PORT (servers offer AUTH over TLS only)")
            smtp.login(sm.username, sm.password.get_secret_value() if sm.password else "")
            steps.append(f"AUTH as {sm.username}")
        step = "QUIT"
        smtp.quit()
    except smtplib.SMTPAuthenticationError as exc:
        said = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        return Probe("smtp", url, "fail", f"the login of {sm.username!r} was refused: {exc.smtp_code} {_short(said, 80)}",
                     latency, banner, fix="check REVBENCH_SMTP__USERNAME and REVBENCH_SMTP__PASSWORD")
    except (OSError, smtplib.SMTPException) as exc:
        cert = _cert_problem(exc)
        if cert is not None:
            return Probe("smtp", url, "fail", f"its TLS certificate is not trusted ({cert})",
                         fix=f"the server's certificate must be valid for {sm.host} (SSL_CERT_FILE names a private CA)")
        if _timed_out(exc):
            what = "no greeting" if step == "connect" else f"no answer to {step}"
            return Probe("smtp", url, "fail", f"{what} within {clock.seconds:g} s",
                         fix="check that it runs and that REVBENCH_SMTP__HOST and PORT are its address")
        if isinstance(exc, smtplib.SMTPNotSupportedError | smtplib.SMTPException) and step != "connect":
            return Probe("smtp", url, "fail", f"{step} failed: {_short(str(exc), 100)}",
                         fix="check REVBENCH_SMTP__SECURITY and PORT (587 starttls, 465 ssl)")
        return Probe("smtp", url, "fail", f"cannot connect ({_short(str(exc) or type(exc).__name__, 100)})",
                     fix="start it, or set REVBENCH_SMTP__HOST and PORT to where it runs")
    finally:
        _close(smtp)  # after QUIT a no-op; on every early answer above the connection is let go at once
    done = ", ".join(steps)
    if sm.security == "none":
        return Probe("smtp", url, "warn", f"{done}; plain text on this machine (a local server only); nothing sent",
                     latency, banner)
    return Probe("smtp", url, "ok", f"{done}; nothing sent", latency, banner)


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout is behind ``exc`` (smtplib reports one as a closed connection)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TimeoutError) or "timed out" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _close(smtp: Any) -> None:
    try:
        if smtp is not None:
            smtp.close()
    except OSError:
        pass


def _tls_context(settings: Settings) -> Any:
    """What a survey probe trusts: httpx's defaults (certifi, or SSL_CERT_FILE), and the
    authorities in REVBENCH_HTTP__CA_BUNDLE when it is set."""
    import httpx

    ctx = httpx.create_ssl_context()
    if settings.http.ca_bundle is not None:
        ctx.load_verify_locations(cafile=str(settings.http.ca_bundle))
    return ctx


def probe_survey(settings: Settings, clock: _Clock) -> Probe:
    """``GET /healthz`` at the public base URL (certificate verified), then a probe link signed with
    this configuration's key at ``/healthz/link/{token}``: verified there, the survey's links will be;
    then one signed with a key made up here, which must be refused: a server that accepts it would
    take a forged rating or opt-out as well."""
    import secrets
    import ssl
    from urllib.parse import urlsplit

    import httpx
    from pydantic import SecretStr

    from revbench.survey.tokens import LinkSigner

    sv = settings.survey
    base = sv.base_url.rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Probe("survey", base, "fail", "not an http(s) URL", fix="set REVBENCH_SURVEY__BASE_URL to https://your.host")
    plain = parts.scheme == "http"
    if plain and not is_loopback(parts.hostname):
        return Probe("survey", base, "fail", "http:// outside this machine: links would travel in clear",
                     fix="serve the survey behind HTTPS (e.g. Caddy) and set REVBENCH_SURVEY__BASE_URL=https://...")
    try:
        verify = _tls_context(settings)
    except (OSError, ssl.SSLError) as exc:
        return Probe("survey", base, "fail", f"REVBENCH_HTTP__CA_BUNDLE={settings.http.ca_bundle} cannot be read ({exc})",
                     fix="point REVBENCH_HTTP__CA_BUNDLE at a PEM file of CA certificates, or leave it empty")
    try:
        signer = LinkSigner(sv.signing_key, sv.old_signing_keys, sv.link_max_age_days)
    except UsageError as exc:
        return Probe("survey", base, "fail", "no link can be signed", fix=str(exc))
    try:
        with http_client(settings, clock, verify=verify) as client:
            t0 = time.monotonic()
            health = read(client, "GET", f"{base}/healthz", "/healthz", timeout=clock.left())
            latency = _ms(t0)
            bad = _survey_health(base, health, latency)
            if bad is not None:
                return bad
            link = read(client, "GET", f"{base}/healthz/link/{signer.probe_token()}", "/healthz/link", timeout=clock.left())
            bad = _survey_link(base, link, latency)
            if bad is not None:
                return bad
            # A link signed with a key made up here: a server that checks signatures with its keys refuses it.
            forged = LinkSigner(SecretStr(secrets.token_urlsafe(32))).probe_token()
            unsigned = read(client, "GET", f"{base}/healthz/link/{forged}", "/healthz/link", timeout=clock.left())
    except httpx.HTTPError as exc:
        return _unreachable("survey", base, exc, clock, "REVBENCH_SURVEY__BASE_URL")
    bad = _survey_forged(base, unsigned, latency)
    if bad is not None:
        return bad
    if plain:
        return Probe("survey", base, "warn", "a signed link verifies, another refused; plain http on this machine (the "
                     "demo's setup): anywhere else links would travel in clear", latency)
    return Probe("survey", base, "ok", "certificate verified; a signed link verifies, another refused", latency)


def _survey_forged(base: str, answer: Any, latency: float) -> Probe | None:
    """A link this revbench did not sign must be refused (403; the survey server says "bad signature")."""
    if answer.status_code == 403:
        return None
    if answer.status_code == 200:
        return Probe("survey", base, "fail", "accepts a link this revbench did not sign: it runs with another signing "
                     "key, or does not check signatures (anyone could rate or opt out for anyone)", latency,
                     fix="run `revbench survey serve` of this revbench there, with the flows' REVBENCH_SURVEY__SIGNING_KEY")
    return Probe("survey", base, "fail", f"a link this revbench did not sign answered HTTP {answer.status_code}, not a "
                 "refusal (403)", latency, fix="check that REVBENCH_SURVEY__BASE_URL reaches `revbench survey serve`")


def _survey_health(base: str, health: Any, latency: float) -> Probe | None:
    if 300 <= health.status_code < 400:
        return Probe("survey", base, "fail", f"/healthz redirects to {health.headers.get('location', '?')}", latency,
                     fix="set REVBENCH_SURVEY__BASE_URL to the address the links should use (where it redirects)")
    try:
        ok = health.status_code == 200 and health.json().get("ok") is True
    except (ValueError, AttributeError):
        ok = False
    if not ok:
        return Probe("survey", base, "fail", f"/healthz answered HTTP {health.status_code}: not the survey server", latency,
                     fix="point REVBENCH_SURVEY__BASE_URL (or the proxy in front) at `revbench survey serve`")
    return None


def _survey_link(base: str, link: Any, latency: float) -> Probe | None:
    if link.status_code == 200:
        return None
    if link.status_code == 404:
        return Probe("survey", base, "fail", "the server does not know /healthz/link: it runs an older revbench", latency,
                     fix="upgrade revbench where the survey server runs, and restart it")
    try:
        reason = str(link.json().get("reason", ""))
    except (ValueError, AttributeError):
        reason = ""
    if reason == "bad signature":
        return Probe("survey", base, "fail", "a link signed with this REVBENCH_SURVEY__SIGNING_KEY does not verify there: "
                     "the server runs with another signing key", latency,
                     fix="give the survey server and the flows the same REVBENCH_SURVEY__SIGNING_KEY (keep an old key "
                         "in REVBENCH_SURVEY__OLD_SIGNING_KEYS on the server while its links are out)")
    if reason == "expired":
        return Probe("survey", base, "fail", "a link signed just now is out of date there: the two machines' clocks "
                     "differ by more than 10 minutes", latency, fix="synchronise both clocks (NTP)")
    return Probe("survey", base, "fail", f"the probe link was refused: HTTP {link.status_code} {reason}".rstrip(), latency,
                 fix="check that REVBENCH_SURVEY__BASE_URL reaches `revbench survey serve`")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def probe_data(settings: Settings) -> Probe:
    """The data folder: a folder, writable (a file is written and removed), with room to grow."""
    import os
    import shutil
    import tempfile

    d = settings.data_dir
    url = str(d.absolute())
    if d.exists() and not d.is_dir():
        return Probe("data", url, "fail", "a file, not a folder", fix="set REVBENCH_DATA_DIR to a folder")
    if not d.exists():
        parent = next((p for p in d.absolute().parents if p.exists()), None)
        if parent is None or not os.access(parent, os.W_OK | os.X_OK):
            return Probe("data", url, "fail", f"does not exist, and {parent} is not writable",
                         fix="create it for this user, or set REVBENCH_DATA_DIR to a writable folder")
        free = shutil.disk_usage(parent).free
        low = free < LOW_SPACE_BYTES
        return Probe("data", url, "warn" if low else "ok", f"not there yet (the first command creates it); {_gib(free)} free",
                     fix=f"make room: under {_gib(LOW_SPACE_BYTES)} free" if low else "")
    try:
        with tempfile.NamedTemporaryFile(dir=d, prefix=".doctor-") as f:
            f.write(b"revbench doctor")
            f.flush()
    except OSError as exc:
        return Probe("data", url, "fail", f"not writable ({exc.strerror or exc})",
                     fix="make it writable for this user, or set REVBENCH_DATA_DIR to a writable folder")
    free = shutil.disk_usage(d).free
    if free < LOW_SPACE_BYTES:
        return Probe("data", url, "warn", f"writable; only {_gib(free)} free",
                     fix=f"make room (a full-size refresh wants more than {_gib(LOW_SPACE_BYTES)}), or move REVBENCH_DATA_DIR")
    return Probe("data", url, "ok", f"writable; {_gib(free)} free")


def probe_warehouse(settings: Settings) -> Probe:
    """The warehouse read-only, never waiting and never taking the write lock: its schema version
    against this code's; one held by a running flow passes with a note."""
    from revbench.errors import WarehouseDamaged
    from revbench.warehouse.holder import describe
    from revbench.warehouse.migrations import LATEST_VERSION
    from revbench.warehouse.status import read_status

    path = settings.warehouse_path.absolute()
    if not path.exists():
        return Probe("warehouse", str(path), "ok", "none yet (the first ingest creates it)", version=f"code {LATEST_VERSION}")
    try:
        st = read_status(path)
    except WarehouseDamaged as exc:
        newer = re.search(r"schema version (\d+)", str(exc))
        if newer:
            return Probe("warehouse", str(path), "fail", f"schema {newer.group(1)} is newer than this code's {LATEST_VERSION}",
                         version=f"schema {newer.group(1)} (code {LATEST_VERSION})",
                         fix="upgrade revbench to the version that wrote it, or point REVBENCH_DATA_DIR elsewhere")
        return Probe("warehouse", str(path), "fail", "cannot be read", fix=str(exc))
    if st.busy:
        return Probe("warehouse", str(path), "ok", f"in use by {describe(st.holder)}: not read while a run holds it",
                     version=f"code {LATEST_VERSION}")
    version = f"schema {st.version} (code {LATEST_VERSION})"
    papers = st.counts.get("papers")
    what = f"readable; {papers} papers" if papers is not None else "readable"
    if st.version is not None and st.version < LATEST_VERSION:
        return Probe("warehouse", str(path), "ok", f"{what}; the next run that writes it migrates it to {LATEST_VERSION}",
                     version=version)
    return Probe("warehouse", str(path), "ok", what, version=version)


def probe_store(settings: Settings) -> Probe:
    """The survey store (SQLite, safe to read while the server writes): readable, its epoch and events.
    The store has no schema version of its own: its tables are created if missing on every open."""
    from revbench.errors import WarehouseDamaged
    from revbench.warehouse.survey_store import SurveyStore

    path = settings.survey_store_path.absolute()
    if not path.exists():
        return Probe("store", str(path), "ok", "none yet (the survey flow creates it)")
    try:
        store = SurveyStore(path)
        try:
            epoch = store.epoch()
            events = store.max_event_id()
        finally:
            store.close()
    except WarehouseDamaged as exc:
        return Probe("store", str(path), "fail", "cannot be read", fix=str(exc))
    return Probe("store", str(path), "ok", f"readable; {events} events, epoch {epoch[:8]}")


def probe_settings(settings: Settings) -> Probe:
    """Secrets set where a configured stage needs them, none empty or a template's placeholder, and
    no example host (RFC 2606) where mail or links go."""
    problems, notes = _settings_problems(settings)
    if problems:
        return Probe("settings", "environment and .env", "fail", "; ".join(problems + notes),
                     fix="set them in .env or the environment (`revbench env-example` lists every setting)")
    if notes:
        return Probe("settings", "environment and .env", "warn", "; ".join(notes))
    stages = ", ".join(settings.refresh.stages)
    return Probe("settings", "environment and .env", "ok", f"what the stages need is set (stages: {stages})")


def _settings_problems(settings: Settings) -> tuple[list[str], list[str]]:
    """(what would make a configured stage fail, what is worth a warning)."""
    stages = set(settings.refresh.stages)
    problems: list[str] = []
    notes: list[str] = []
    sv, sm = settings.survey, settings.smtp

    def secret(var: str, value: Any, needed_by: str = "", min_len: int = 0) -> None:
        if value is None:
            if needed_by:
                problems.append(f"{var} is not set ({needed_by})")
            return
        text = value.get_secret_value()  # never empty: the settings read `KEY=` as unset
        if PLACEHOLDER.search(text.strip()) or PLACEHOLDER_SECRET.search(text.strip()):
            problems.append(f"{var} holds a template's placeholder, not a real value")
        elif min_len and len(text) < min_len:
            problems.append(f"{var} is shorter than {min_len} characters")

    secret("REVBENCH_SURVEY__SIGNING_KEY", sv.signing_key, "the survey signs its links with it" if "survey" in stages else "", 16)
    for old in sv.old_signing_keys:
        secret("REVBENCH_SURVEY__OLD_SIGNING_KEYS", old)
    secret("REVBENCH_RELEASE__ID_KEY", settings.release.id_key,
           "the release derives its ids with it" if "release" in stages else "", 16)
    secret("REVBENCH_SMTP__PASSWORD", sm.password, "REVBENCH_SMTP__USERNAME is set, so the survey logs in" if sm.username else "")
    secret("REVBENCH_S2__API_KEY", settings.s2.api_key)
    secret("REVBENCH_LLM__API_KEY", settings.llm.api_key)
    if "survey" in stages and not sm.host:
        problems.append("REVBENCH_SMTP__HOST is not set (the survey sends through it)")
    # The demo sends from an example address to its own local sink: a warning there, a failure
    # where real mail goes out.
    local_mail = not sm.host or is_loopback(sm.host)
    mail_fields = {"REVBENCH_SURVEY__SENDER_EMAIL", "REVBENCH_SURVEY__REPLY_TO"}
    for var, text in _plain_values(settings):
        if var in mail_fields and "survey" not in stages:
            continue
        if PLACEHOLDER.search(text):
            problems.append(f"{var} holds a template's placeholder")
            continue
        host = next((h for h in _hosts(text) if PLACEHOLDER_HOST.search(h)), None)
        if host is None:
            continue
        if var in mail_fields and local_mail:
            notes.append(f"{var}={text} is an example address: real mail servers refuse or junk mail from it")
        else:
            problems.append(f"{var} names the example host {host}: nothing real answers there")
    return problems, notes


def _plain_values(settings: Settings) -> list[tuple[str, str]]:
    """Every text setting (secrets aside) by its variable name: lists item by item."""
    out: list[tuple[str, str]] = []
    for section, fields in settings.model_dump().items():
        if section == "replay" or not isinstance(fields, dict):
            continue
        for name, value in fields.items():
            for one in value if isinstance(value, list) else [value]:
                if isinstance(one, str) and one.strip():
                    out.append((f"REVBENCH_{section.upper()}__{name.upper()}", one.strip()))
    return out


def _hosts(text: str) -> list[str]:
    """The hosts a setting's text names: of URLs (``scheme://host``), of addresses (``x@host``), or itself."""
    found = re.findall(r"://(?:[^/@\s]*@)?([A-Za-z0-9.-]+)", text) + re.findall(r"@([A-Za-z0-9.-]+\.[A-Za-z]+)", text)
    if not found and re.fullmatch(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+", text):
        found = [text]
    return found
