"""Every service and local resource a run depends on, in one table: what ``revbench doctor`` walks.

An entry names the service as ``--only`` takes it, the label of its row, the setting that holds
its address, which configured stages need it, the URL a stage's reachability check asks before it
starts (``reach``, read by ``revbench.clients.probe``), and its probe, a ``module:function`` reference
imported only when the service is probed: this module imports nothing heavy, so the doctor and
the structure tests read the table without loading a client. A probe lives beside the code that talks
to its service (``revbench/clients/grobid.py`` probes GROBID), takes a ``revbench.health.ProbeContext``
and answers one ``revbench.health.Probe``. Adding a service is one entry here plus its probe
(docs/extending/adding-a-service.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from revbench.health import Probe

if TYPE_CHECKING:
    from revbench.health import ProbeContext
    from revbench.settings import Settings

Needs = Callable[["Settings", "str | None"], list[str]]
"""(settings, PREFECT_API_URL or None) -> the configured stages that need a service; empty: none."""


def _every_stage(settings: Settings, prefect_api_url: str | None) -> list[str]:
    return ["every stage"]


def _none(settings: Settings, prefect_api_url: str | None) -> list[str]:
    return []


def _stage(*names: str) -> Needs:
    """Needed by each of ``names`` that is among the configured stages (REVBENCH_REFRESH__STAGES)."""
    def needs(settings: Settings, prefect_api_url: str | None) -> list[str]:
        return [name for name in names if name in settings.refresh.stages]
    return needs


def _s2_needs(settings: Settings, prefect_api_url: str | None) -> list[str]:
    stages = settings.refresh.stages
    return ["ingest"] * ("ingest" in stages) + ["pools"] * ("pools" in stages and settings.pools.fetch_s2_histories)


def _llm_needs(settings: Settings, prefect_api_url: str | None) -> list[str]:
    stages = settings.refresh.stages
    need = []
    if settings.llm.base_url and "disambiguate" in stages and settings.disambiguate.use_llm:
        need.append("disambiguate")  # without an LLM it decides offline
    # The evaluate stage runs REVBENCH_RATINGS__EVALUATE_SCORERS; a published release too, when
    # REVBENCH_RELEASE__EVALUATE_AFTER (a refresh's ratings stage leaves it to the evaluate stage).
    evaluating = [s for s in ("release", "evaluate") if s in stages
                  and (s == "evaluate" or settings.release.evaluate_after)]
    if evaluating and llm_scorers(settings.ratings.evaluate_scorers, bool(settings.llm.base_url)):
        need += evaluating
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


def _llm_unset(settings: Settings, prefect_api_url: str | None, need: list[str]) -> Probe | None:
    if settings.llm.base_url:
        return None
    if need:
        return Probe("llm", "", "fail", f"REVBENCH_LLM__BASE_URL is not set, and {' and '.join(need)} "
                     f"run the scorers {', '.join(llm_scorers(settings.ratings.evaluate_scorers, False))}",
                     fix="set REVBENCH_LLM__BASE_URL (and its key), or take those scorers out of "
                         "REVBENCH_RATINGS__EVALUATE_SCORERS")
    return Probe("llm", "", "skipped", "not configured (REVBENCH_LLM__BASE_URL): the offline fallbacks decide")


def _openalex_unset(settings: Settings, prefect_api_url: str | None, need: list[str]) -> Probe | None:
    if settings.openalex.enabled:
        return None
    return Probe("openalex", "", "skipped", "not enabled (REVBENCH_OPENALEX__ENABLED): the graph is read without OpenAlex")


def _llm_reach(settings: Settings) -> str | None:
    return settings.llm.base_url.rstrip("/") + "/models" if settings.llm.base_url else None


def _prefect_unset(settings: Settings, prefect_api_url: str | None, need: list[str]) -> Probe | None:
    if prefect_api_url:
        return None
    return Probe("prefect", "", "skipped", "not configured (PREFECT_API_URL): each tracked run starts a temporary "
                                           "local server")


@dataclass(frozen=True)
class Service:
    """One row of the doctor's table."""

    name: str
    """As ``--only`` takes it."""
    label: str
    """As the table shows it."""
    probe: str
    """``module:function``: a ``(ProbeContext) -> Probe``, imported only when the service is probed."""
    address: Callable[[Settings, str | None], str]
    """(settings, PREFECT_API_URL) -> where it is probed, as the table shows it."""
    needs: Needs = _none
    """Which configured stages need it (a service none needs is not probed unless named)."""
    setting: str = ""
    """The setting that holds its address, named when the probe cannot use it."""
    local: bool = False
    """A resource of this machine: no network timeout applies (a slow disk is not a dead service)."""
    unset: Callable[[Settings, str | None, list[str]], Probe | None] | None = None
    """The answer without probing when it is not configured (given what needs it), else None."""
    asked_by: str = ""
    """Set: probed only when ``--only`` names it, on behalf of this side."""
    reach: Callable[[Settings], str | None] | None = field(kw_only=True)
    """settings -> the URL a stage's reachability check (``revbench.clients.probe``) GETs before
    work that needs the service (any HTTP answer is reachable), or None while the service is not
    configured. None itself for a service no stage checks so (a local resource, or one the doctor
    alone probes). Every entry states it."""

    def load(self) -> Callable[[ProbeContext], Probe]:
        """The probe function (importing its module)."""
        module, _, function = self.probe.partition(":")
        return getattr(importlib.import_module(module), function)


SERVICES: tuple[Service, ...] = (
    Service("settings", "Settings", "revbench.app.settings_probe:probe_settings",
            lambda s, p: "environment and .env", _every_stage, local=True, reach=None),
    Service("data", "Data directory", "revbench.app.data_probe:probe_data",
            lambda s, p: str(s.data_dir.absolute()), _every_stage, local=True, reach=None),
    Service("warehouse", "Warehouse", "revbench.warehouse.probe:probe_warehouse",
            lambda s, p: str(s.warehouse_path.absolute()), _every_stage, local=True, reach=None),
    Service("store", "Survey store", "revbench.warehouse.probe:probe_store",
            lambda s, p: str(s.survey_store_path.absolute()), _stage("survey", "ratings"), local=True, reach=None),
    Service("grobid", "GROBID", "revbench.clients.grobid:probe_grobid",
            lambda s, p: s.grobid.base_url.rstrip("/"), _stage("ingest"), "REVBENCH_GROBID__BASE_URL",
            reach=lambda s: s.grobid.base_url.rstrip("/") + "/api/isalive"),
    Service("arxiv", "arXiv API", "revbench.clients.arxiv_api:probe_arxiv",
            lambda s, p: s.arxiv.base_url, _stage("ingest"), "REVBENCH_ARXIV__BASE_URL", reach=lambda s: s.arxiv.base_url),
    Service("pdf", "arXiv PDFs", "revbench.clients.pdf:probe_pdf",
            lambda s, p: s.pdf.base_url.rstrip("/"), _stage("ingest"), "REVBENCH_PDF__BASE_URL", reach=lambda s: s.pdf.base_url),
    Service("s2", "Semantic Scholar", "revbench.clients.semantic_scholar:probe_s2",
            lambda s, p: s.s2.base_url.rstrip("/"), _s2_needs, "REVBENCH_S2__BASE_URL", reach=lambda s: s.s2.base_url),
    # Optional, off by default; no stage reads it until the graph stage does.
    Service("openalex", "OpenAlex", "revbench.clients.openalex:probe_openalex",
            lambda s, p: s.openalex.base_url.rstrip("/"), _none, "REVBENCH_OPENALEX__BASE_URL", unset=_openalex_unset,
            reach=lambda s: s.openalex.base_url),
    Service("llm", "LLM", "revbench.clients.llm:probe_llm",
            lambda s, p: (s.llm.base_url or "").rstrip("/"), _llm_needs, "REVBENCH_LLM__BASE_URL", unset=_llm_unset,
            reach=_llm_reach),
    Service("smtp", "SMTP", "revbench.clients.smtp:probe_smtp",
            lambda s, p: f"smtp://{s.smtp.host}:{s.smtp.port}" if s.smtp.host else "", _stage("survey"), reach=None),
    Service("survey", "Survey server", "revbench.survey.probe:probe_survey",
            lambda s, p: s.survey.base_url.rstrip("/"), _stage("survey"), "REVBENCH_SURVEY__BASE_URL", reach=None),
    Service("prefect", "Prefect API", "revbench.app.prefect_probe:probe_prefect",
            lambda s, p: (p or "").rstrip("/"), lambda s, p: ["tracked runs"] if p else [], "PREFECT_API_URL",
            unset=_prefect_unset, reach=None),
    # From the flows' side the curator's plane is reachable by design: asked for by name only.
    Service("isolation", "Curator plane from here", "revbench.app.isolation_probe:probe_isolation",
            lambda s, p: "", asked_by="the survey server's side", reach=None),
)
"""Every service, in table order."""
LABELS: dict[str, str] = {s.name: s.label for s in SERVICES}
"""Every service's label by the name ``--only`` takes."""
BY_NAME: dict[str, Service] = {s.name: s for s in SERVICES}
"""Every service by the name ``--only`` takes."""
REACHABLE: tuple[str, ...] = tuple(s.name for s in SERVICES if s.reach is not None)
"""The services a stage's reachability check can probe (those with a ``reach`` URL), in table order."""
