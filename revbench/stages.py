"""The stages of a refresh, in the order it runs them: one entry each, and everything that names
the stages reads it (the refresh plans and runs them from it, ``REVBENCH_REFRESH__STAGES`` and
``refresh_stages`` accept its names, a release's manifest names the runs of the stages before it,
the command line and the docs show it). Adding a stage is one entry here plus its flow.

Flows and planners are named as ``module:attribute`` and imported only when the refresh runs
them: the settings read this table for every command, and must not load Prefect or a flow.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StageSpec:
    """One stage of the refresh.

    ``flow`` is run as ``flow.run(settings, **flow_args, **plan.args, track=...)`` (a plain
    function, without ``track``); ``planner(settings, wh)`` returns the ``Plan`` that says whether
    it runs and why; ``inputs`` are what that plan watches (warehouse tables, the survey store);
    ``command`` is what a person runs for the stage alone. A ``window`` stage reads the outside
    world: its planner also gets the refresh's window (``since``, ``until``) and its flow whether
    that world is SYNTHETIC."""

    name: str
    flow: str
    planner: str
    inputs: tuple[str, ...]
    command: str
    flow_args: Mapping[str, Any] = field(default_factory=dict)
    window: bool = False


STAGES: tuple[StageSpec, ...] = (
    StageSpec("ingest", "revbench.flows.ingest:ingest_flow", "revbench.flows.refresh:plan_ingest",
              ("crawl_slices", "arxiv_records", "documents"), "revbench ingest", window=True),
    # The graph (references, topics, affiliations) before disambiguation and pools, which read it.
    StageSpec("graph", "revbench.flows.graph:graph_flow", "revbench.flows.refresh:plan_graph",
              ("papers", "graph_fetches"), "revbench graph"),
    StageSpec("disambiguate", "revbench.flows.disambiguate:disambiguate_flow", "revbench.flows.refresh:plan_disambiguate",
              ("mentions", "papers"), "revbench disambiguate"),
    StageSpec("pools", "revbench.flows.pools:pools_flow", "revbench.flows.refresh:plan_pools",
              ("papers", "authors", "pool_rounds"), "revbench pools"),
    StageSpec("survey", "revbench.flows.survey:survey_flow", "revbench.flows.refresh:plan_survey",
              ("pool_rounds", "survey_messages"), "revbench survey send"),
    # The refresh evaluates once, in its own stage.
    StageSpec("ratings", "revbench.flows.ratings:ratings_flow", "revbench.flows.refresh:plan_ratings",
              ("survey store", "survey_epochs", "survey_invitations", "survey_opt_outs"), "revbench ratings",
              flow_args={"evaluate": False}),
    StageSpec("release", "revbench.flows.release:release_flow", "revbench.flows.refresh:plan_release",
              ("ratings", "releases"), "revbench release", flow_args={"only_if_changed": True}),
    StageSpec("evaluate", "revbench.flows.evaluate:evaluate_configured", "revbench.flows.refresh:plan_evaluate",
              ("rating_tuples", "releases"), "revbench evaluate -b warehouse"),
)

STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
"""The stages' names, in order."""


def stage_spec(name: str) -> StageSpec:
    """The entry of stage ``name`` (KeyError for another name)."""
    for spec in STAGES:
        if spec.name == name:
            return spec
    raise KeyError(name)


def stages_before(name: str) -> tuple[str, ...]:
    """The names of the stages a refresh runs before ``name``: those its inputs come from."""
    return STAGE_NAMES[:STAGE_NAMES.index(name)]


def resolve(ref: str) -> Any:
    """The object a ``module:attribute`` reference names, importing its module now."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
