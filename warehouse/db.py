"""The warehouse: the only place that opens DuckDB and writes SQL.

Stages hand it polars frames; it conforms them to the declared schema, upserts by natural key
and runs each load in one transaction so that a crash leaves nothing partial.

:class:`Warehouse` is the session (the plumbing in :mod:`~revbench.warehouse.core` and
:mod:`~revbench.warehouse.lifecycle`: open, migrate, lock, transactions, generic reads) and holds
one slice per stage over that one connection, each with the SQL of the tables it owns
(:mod:`~revbench.warehouse.owners`): ``wh.runs``, ``wh.ingest``, ``wh.graph``,
``wh.disambiguate``, ``wh.pools``, ``wh.survey``, ``wh.ratings``, ``wh.release``,
``wh.evaluate``, ``wh.training`` and ``wh.labels``. A slice writes only its own tables.
"""

from __future__ import annotations

from pathlib import Path

from revbench.schemas.tables import SCHEMA_VERSION_TABLE
from revbench.warehouse.core import utcnow
from revbench.warehouse.evaluate import EvaluateSlice
from revbench.warehouse.graph import GraphSlice
from revbench.warehouse.identity import DisambiguateSlice
from revbench.warehouse.ingest import IngestSlice
from revbench.warehouse.labels import LabelsSlice
from revbench.warehouse.lifecycle import Lifecycle
from revbench.warehouse.pools import PoolsSlice
from revbench.warehouse.ratings import RatingsSlice
from revbench.warehouse.release import ReleaseSlice
from revbench.warehouse.runs import RunsSlice
from revbench.warehouse.slice import Slice
from revbench.warehouse.survey import SurveySlice
from revbench.warehouse.training import TrainingSlice

__all__ = ["SCHEMA_VERSION_TABLE", "SLICES", "Warehouse", "utcnow"]

SLICES: dict[str, type[Slice]] = {cls.stage: cls for cls in (
    RunsSlice, IngestSlice, GraphSlice, DisambiguateSlice, PoolsSlice, SurveySlice, RatingsSlice, ReleaseSlice,
    EvaluateSlice, TrainingSlice, LabelsSlice)}
"""Each stage's slice class, by the attribute a warehouse holds it under."""


class Warehouse(Lifecycle):
    """A DuckDB file with the revbench schema, migrated on open; one slice per stage over it."""

    runs: RunsSlice
    ingest: IngestSlice
    graph: GraphSlice
    disambiguate: DisambiguateSlice
    pools: PoolsSlice
    survey: SurveySlice
    ratings: RatingsSlice
    release: ReleaseSlice
    evaluate: EvaluateSlice
    training: TrainingSlice
    labels: LabelsSlice

    def __init__(self, path: Path | str, read_only: bool = False, lock_wait: float = 0.0, memory_limit: str = "",
                 threads: int = 0):
        for stage, cls in SLICES.items():
            setattr(self, stage, cls(self))
        super().__init__(path, read_only=read_only, lock_wait=lock_wait, memory_limit=memory_limit, threads=threads)
