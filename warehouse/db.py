"""The warehouse: the only place that opens DuckDB and writes SQL.

Stages hand it polars frames; it conforms them to the declared schema, upserts by natural key
and runs each load in one transaction so that a crash leaves nothing partial.

:class:`Warehouse` is put together from one module per stage, each with the SQL of the tables
it owns: the plumbing in :mod:`~revbench.warehouse.core` and
:mod:`~revbench.warehouse.lifecycle`, then runs, ingest, identity, pools, survey, ratings,
release, training, the graph and weak labels.
"""

from __future__ import annotations

from revbench.schemas.tables import SCHEMA_VERSION_TABLE
from revbench.warehouse.core import utcnow
from revbench.warehouse.graph import GraphQueries
from revbench.warehouse.graph_resolve import ResolveQueries
from revbench.warehouse.identity import IdentityQueries
from revbench.warehouse.ingest import IngestQueries
from revbench.warehouse.labels import LabelQueries
from revbench.warehouse.lifecycle import Lifecycle
from revbench.warehouse.pools import PoolQueries
from revbench.warehouse.ratings import RatingQueries
from revbench.warehouse.release import ReleaseQueries
from revbench.warehouse.runs import RunQueries
from revbench.warehouse.survey import SurveyQueries
from revbench.warehouse.training import TrainingQueries

__all__ = ["SCHEMA_VERSION_TABLE", "Warehouse", "utcnow"]


class Warehouse(Lifecycle, RunQueries, IngestQueries, IdentityQueries, SurveyQueries, PoolQueries, ReleaseQueries,
                TrainingQueries, RatingQueries, GraphQueries, ResolveQueries, LabelQueries):
    """A DuckDB file with the revbench schema, migrated on open."""
