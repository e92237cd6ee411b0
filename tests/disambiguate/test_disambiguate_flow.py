"""The disambiguate flow after a real ingest of the small SYNTHETIC world."""

from __future__ import annotations

import polars as pl
import pytest

from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.ingest import ingest_flow
from revbench.schemas.tables import AUTHOR_LINKS, AUTHORS, COAUTHOR_EDGES, LLM_DECISIONS, MENTIONS
from revbench.settings import Settings
from revbench.synth.truth import disambiguation_quality, load_truth
from revbench.warehouse import Warehouse
from tests.support.common import WORLD_SINCE, WORLD_UNTIL, on_replay

pytestmark = pytest.mark.slow


def _quality(s: Settings, world) -> dict[str, float]:
    with Warehouse.open(s.warehouse_path) as wh:
        links = wh.read(AUTHOR_LINKS)
    return disambiguation_quality(load_truth(world), links)


def test_fallback_then_llm(prefect_server, small_world, replay, settings) -> None:
    s = on_replay(settings, replay(world=small_world))
    ingest_flow(s, WORLD_SINCE, WORLD_UNTIL)
    fallback = s.with_overrides(disambiguate={"use_llm": False})
    first = disambiguate_flow(fallback)
    assert first.decider.startswith("fallback") and first.llm_calls == 0
    q = _quality(s, small_world)
    assert q["pairwise_precision"] >= 0.99 and q["pairwise_recall"] > 0.8
    with Warehouse.open(s.warehouse_path) as wh:
        n_mentions = wh.count(MENTIONS)
        links = wh.read(AUTHOR_LINKS)
        authors = wh.read(AUTHORS)
        edges = wh.read(COAUTHOR_EDGES)
    assert links.height == n_mentions and links.select("arxiv_id", "position").is_duplicated().sum() == 0
    assert authors["n_mentions"].sum() == n_mentions and authors.height == links["author_id"].n_unique()
    assert (edges["author_a"] < edges["author_b"]).all() and edges["n_papers"].min() >= 1
    assert {"email", "affiliation", "singleton"} <= set(links["method"])

    again = disambiguate_flow(fallback)
    assert again.blocks_decided == 0 and again.merges == {}
    with Warehouse.open(s.warehouse_path) as wh:
        assert wh.read(AUTHOR_LINKS).equals(links)

    with_llm = disambiguate_flow(s)  # a new decider re-decides every block
    assert with_llm.decider.startswith("llm") and with_llm.blocks_decided == with_llm.blocks
    assert with_llm.llm_calls > 0
    with Warehouse.open(s.warehouse_path) as wh:
        decisions = wh.read(LLM_DECISIONS)
        llm_links = wh.read(AUTHOR_LINKS).filter(pl.col("method") == "llm")
    assert decisions.height == with_llm.llm_calls and decisions["valid"].all()
    assert decisions["template_version"].str.starts_with("3-").all()
    assert llm_links.height > 0 and llm_links["evidence"].str.len_chars().min() > 0
    assert _quality(s, small_world)["pairwise_recall"] >= q["pairwise_recall"]
