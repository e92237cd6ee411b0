"""Two worlds kept apart: the demo's SYNTHETIC world and the real one never share a data folder.

A data folder the demo (or a rebuild of a published benchmark) made carries ``.demo-world``, and
its warehouse holds generated papers and people. A command that would fetch from real services
into it (ingest, graph, pools, the refresh and what ``revbench serve`` schedules) refuses before
any work unless ``REVBENCH_MIX_WORLDS`` (``--mix-worlds``) says to mix; the demo refuses a data
folder whose warehouse holds a real crawl. A service is real when its base URL is not on this
machine: the replay server that serves the demo's and the tests' worlds listens on loopback, at
a port drawn each time, so the loopback address is what a SYNTHETIC world's services share.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from revbench.errors import UsageError
from revbench.health import is_loopback
from revbench.settings import Settings

DEMO_WORLD = ".demo-world"
"""The marker of a data folder holding the demo's SYNTHETIC world (it names the world)."""

STAGE_SOURCES: dict[str, tuple[str, ...]] = {"ingest": ("arxiv", "pdf", "s2"), "graph": ("s2", "openalex"),
                                             "pools": ("s2",)}
"""The services whose answers become records of the warehouse, by stage. GROBID and the LLM
only read or decide on what is already there, so they bring no other world's papers in."""

FLAG = "--mix-worlds"


def synthetic_folder(data_dir: Path) -> bool:
    """Whether ``data_dir`` holds the demo's SYNTHETIC world (the demo marked it)."""
    return (data_dir / DEMO_WORLD).is_file()


def real_sources(settings: Settings, stages: Iterable[str]) -> list[tuple[str, str]]:
    """``(setting, url)`` of each service ``stages`` would fetch records from whose base URL is
    off this machine, in the stages' order, each once."""
    out: dict[str, str] = {}
    for stage in stages:
        for service in STAGE_SOURCES.get(stage, ()):
            if service == "openalex" and not settings.openalex.enabled:
                continue
            if stage == "pools" and not settings.pools.fetch_s2_histories:
                continue
            url = str(getattr(settings, service).base_url)
            try:
                host = urlsplit(url).hostname
            except ValueError:
                host = None
            if not is_loopback(host):
                out.setdefault(f"REVBENCH_{service.upper()}__BASE_URL", url)
    return list(out.items())


def check_worlds(settings: Settings, stages: Iterable[str], flag: str | None = FLAG, synthetic: bool = False) -> None:
    """Refuse, in one line and before any work, to fetch from real services into a SYNTHETIC
    world (``settings.data_dir`` marked by the demo, or ``synthetic`` declared by the caller),
    unless ``settings.mix_worlds``. ``flag`` is the command's own flag for mixing, if it has one."""
    if settings.mix_worlds or not (synthetic or synthetic_folder(settings.data_dir)):
        return
    real = real_sources(settings, stages)
    if not real:
        return
    name, url = real[0]
    how = f"{flag} or REVBENCH_MIX_WORLDS=true" if flag else "REVBENCH_MIX_WORLDS=true"
    raise UsageError(f"the data folder {settings.data_dir} holds the demo's SYNTHETIC world and {name}={url} is a real "
                     "service: a real crawl would mix real papers into it; start a real data folder with "
                     f"REVBENCH_DATA_DIR=/path/to/new (or {how} to mix on purpose)")


def real_warehouse(settings: Settings) -> bool:
    """Whether the data folder's warehouse holds papers and no ingest run of a SYNTHETIC world
    recorded them (a folder the demo marked never does, whatever its runs say)."""
    if synthetic_folder(settings.data_dir) or not settings.warehouse_path.exists():
        return False
    from revbench.schemas.tables import PAPERS
    from revbench.warehouse import Warehouse

    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        if not wh.has_table(PAPERS.name) or not wh.count(PAPERS):
            return False
        return not wh.release.synthetic_corpus()


def check_demo_folder(settings: Settings) -> None:
    """The demo's SYNTHETIC world never goes into a data folder whose warehouse holds a real
    crawl (it would set that warehouse aside as if it were an old demo's): one line, exit 2."""
    if real_warehouse(settings):
        raise UsageError(f"the data folder {settings.data_dir} holds a real warehouse (ingested from real services): the demo's "
                         "SYNTHETIC world never shares its data folder; run the demo in a folder of its own with "
                         "REVBENCH_DATA_DIR=/path/to/demo-data")
