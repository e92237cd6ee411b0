"""Which stage owns each warehouse table: the one map the warehouse's slices check their writes
against (``wh.pools.upsert(SURVEY_MESSAGES, ...)`` is refused) and the structure tests read.

A stage here is a slice of :class:`~revbench.warehouse.db.Warehouse` (``wh.runs``, ``wh.ingest``,
...), named as :mod:`revbench.stages` names the refresh's stages where one is (``disambiguate``,
``evaluate``); ``runs`` (every run's and the refresh's bookkeeping), ``training`` and ``labels``
are slices without a refresh stage of their own, and ``schema_version`` is the lifecycle's. Any
slice reads any table; only the owner writes it.
"""

from __future__ import annotations

from revbench.schemas import graph as g
from revbench.schemas import tables as t
from revbench.schemas.model import Table

LIFECYCLE = "lifecycle"
"""The owner of ``schema_version``: opening and migrating, no slice."""

OWNED: dict[str, tuple[Table, ...]] = {
    LIFECYCLE: (t.SCHEMA_VERSION_TABLE,),
    "runs": (t.RUNS, t.RUN_STAGES, t.REFRESH_STAGES),
    "ingest": (t.CRAWL_SLICES, t.ARXIV_RECORDS, t.S2_PAPERS, t.DOCUMENTS, t.PAPERS, t.MENTIONS, t.REJECTS),
    "graph": (g.CITATIONS, g.PAPER_TOPICS, g.INSTITUTIONS, g.AUTHOR_AFFILIATIONS, g.PAPER_AUTHORSHIPS, g.GRAPH_FETCHES),
    "disambiguate": (t.AUTHOR_LINKS, t.AUTHOR_BLOCKS, t.AUTHORS, t.COAUTHOR_EDGES, t.LLM_DECISIONS),
    "pools": (t.QUERY_SAMPLES, t.POOL_EVIDENCE, t.POOL_EXCLUSIONS, t.ASSIGNMENTS, t.INVITATIONS, t.S2_AUTHOR_PAPERS,
              t.POOL_ROUNDS),
    "survey": (t.SURVEY_INVITATIONS, t.SURVEY_MESSAGES, t.SURVEY_APPROVALS, t.SURVEY_OPT_OUTS),
    "ratings": (t.SURVEY_EVENTS, t.SURVEY_EPOCHS, t.RATINGS, t.RATING_FLAGS, t.FLAG_DECISIONS, t.RATING_TUPLES),
    "release": (t.RELEASES,),
    "evaluate": (t.EVAL_RESULTS,),
    "training": (t.PAPER_KEYWORDS, t.KEYWORD_PROFILES),
    "labels": (),
}
"""Each owner's tables; every declared table appears exactly once (checked on import)."""

OWNER: dict[str, str] = {table.name: stage for stage, owned in OWNED.items() for table in owned}
"""The owning stage of each table, by table name."""

_named = [table.name for owned in OWNED.values() for table in owned]
if sorted(_named) != sorted(t.TABLES):
    raise RuntimeError(f"warehouse/owners.py: tables owned twice or by no stage: "
                       f"{sorted(set(_named) ^ set(t.TABLES)) or sorted(n for n in _named if _named.count(n) > 1)}")


class ForeignTableWrite(RuntimeError):
    """A slice asked to write a table another stage owns: a programming error, never a user's."""


def check_owner(table: Table, stage: str) -> None:
    """Refuse a write of ``table`` by the slice of ``stage`` unless ``stage`` owns it."""
    owner = OWNER.get(table.name)
    if owner != stage:
        raise ForeignTableWrite(f"the {stage} slice (wh.{stage}) may not write {table.name}: "
                                f"{owner or 'no stage'} owns it; write it through wh.{owner}")
