"""The graph's identity evidence in disambiguation (tasks/disambiguate_ids.py): OpenAlex author ids
and ORCIDs tied to mentions by their place in the author list, where they sit among the rules, and
what a warehouse without a graph still decides."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import polars as pl

from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.refresh import plan_disambiguate
from revbench.schemas.tables import AUTHOR_BLOCKS, AUTHOR_LINKS, MENTIONS, PAPERS, REJECTS
from revbench.settings import Settings
from revbench.tasks.disambiguate import (
    METHOD_VERSION,
    Decision,
    Instance,
    disambiguate,
    fallback_decider,
    mentions_frame_to_blocks,
)
from revbench.synth.graph_files import read_graph
from revbench.tasks.disambiguate_ids import GRAPH_COLUMNS
from revbench.warehouse import Warehouse, utcnow
from tests.support.common import record_stage_ran

NOW = datetime(2026, 11, 1, tzinfo=UTC)
COLS = ["arxiv_id", "position", "name", "email", "institution", "affiliation", "s2_author_id", *GRAPH_COLUMNS]
ORCID_A, ORCID_B = "0000-0002-1825-0097", "0000-0001-5109-3700"


def frame(rows: list[tuple]) -> pl.DataFrame:
    """Mentions with the graph's ``graph_person, graph_orcid, graph_name`` at their place."""
    return pl.DataFrame([dict(zip(COLS, r, strict=True)) for r in rows],
                        schema={c: (pl.Int64 if c == "position" else pl.Utf8) for c in COLS})


class Counting:
    """A decider that keeps everything apart and counts the blocks it is asked about (an LLM's calls)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, key: str, instances: list[Instance]) -> Decision:
        self.asked.append(key)
        return Decision([[i + 1] for i in range(len(instances))], "llm")


def links(df: pl.DataFrame, decider=None) -> dict[str, tuple[str, str, str]]:
    out = disambiguate(df, {}, decider, "test", 500, 0.5, NOW)
    return {f"{a}:{p}": (c, m, e) for a, p, c, m, e in
            out.links.select("arxiv_id", "position", "author_id", "method", "evidence").iter_rows()}


def test_a_shared_openalex_id_settles_a_block_the_rules_and_fallback_leave_split_without_an_llm_call() -> None:
    # One person with two addresses at one institution: the exact rules cannot merge them and the
    # fallback refuses two addresses, so names and affiliations alone leave her split in two.
    rows = [("2601.00001", 0, "Li Chen", "li.chen@utoronto.example", "University of Toronto", None, None,
             "openalex:A1", None, "Li Chen"),
            ("2602.00002", 1, "Li Chen", "lichen@gmail.com", "University of Toronto", None, None,
             "openalex:A1", None, "L. Chen")]
    without = frame([r[:7] + (None, None, None) for r in rows])
    asked = Counting()
    before = links(without, asked)
    assert before["2601.00001:0"][0] != before["2602.00002:1"][0] and asked.asked == ["chen|l"]
    assert links(without, fallback_decider(0.92))["2601.00001:0"][0] != links(without, fallback_decider(0.92))["2602.00002:1"][0]

    asked = Counting()
    after = links(frame(rows), asked)
    assert after["2601.00001:0"][0] == after["2602.00002:1"][0]
    assert after["2602.00002:1"][1] == "openalex"
    assert after["2602.00002:1"][2] == "OpenAlex author A1 of 2601.00001:0, 2602.00002:1"
    assert asked.asked == []  # the ids settled the block: nothing left for the LLM


def test_an_orcid_only_the_graph_gives_merges_and_says_where_it_came_from() -> None:
    rows = [("2601.00001", 0, "Li Chen", None, "University of Toronto", None, None, None, ORCID_A, "Li Chen"),
            ("2602.00002", 0, "Li Chen", None, "Google Research", None, None, "openalex:A7", ORCID_A, "Li Chen")]
    got = links(frame(rows))
    assert got["2601.00001:0"][0] == got["2602.00002:0"][0] and got["2602.00002:0"][1] == "orcid"
    assert "OpenAlex" in got["2602.00002:0"][2] and ORCID_A in got["2602.00002:0"][2]


def test_different_orcids_split_namesakes_that_affiliation_and_a_merged_openalex_profile_would_join() -> None:
    # Two Wei Wangs at one institution, one with an address: the affiliation rule joins them today.
    base = [("2601.00001", 0, "Wei Wang", "wei@tsinghua.example", "Tsinghua University", None, None),
            ("2602.00002", 0, "Wei Wang", None, "Tsinghua University", None, None),
            ("2603.00003", 0, "Wei Wang", None, "Peking University", None, None)]
    today = links(frame([r + (None, None, None) for r in base]))
    assert today["2601.00001:0"][0] == today["2602.00002:0"][0]

    # OpenAlex filed all three under one (merged) profile, but two of them carry different ORCIDs.
    graph = [("openalex:A1", ORCID_A, "Wei Wang"), ("openalex:A1", ORCID_B, "Wei Wang"), ("openalex:A1", None, "Wei Wang")]
    df = frame([r + g for r, g in zip(base, graph, strict=True)])
    out = disambiguate(df, {}, fallback_decider(0.92), "test", 500, 0.5, NOW)
    got = {f"{a}:{p}": c for a, p, c in out.links.select("arxiv_id", "position", "author_id").iter_rows()}
    assert len(set(got.values())) == 3  # the profile is no evidence: the third mention joins neither
    assert out.conflicts == {"affiliation_vs_orcid": 1, "openalex_vs_orcid": 1}
    assert "openalex" not in out.merges


def test_two_openalex_ids_are_no_evidence_of_two_people() -> None:
    rows = [("2601.00001", 0, "Ana Lima", "ana@usp.example", "USP", None, None, "openalex:A1", None, "Ana Lima"),
            ("2602.00002", 0, "Ana Lima", "ana@usp.example", "USP", None, None, "openalex:A2", None, "Ana Lima")]
    got = links(frame(rows))
    assert got["2601.00001:0"][0] == got["2602.00002:0"][0] and got["2602.00002:0"][1] == "email"


def test_an_authorship_whose_name_does_not_fit_the_mention_is_not_trusted() -> None:
    # OpenAlex's list is shifted against the PDF's: the ids at place 0 are Jane's, not John's.
    rows = [("2601.00001", 0, "John Smith", None, "University of Oxford", None, None, "openalex:A5", ORCID_A, "Jane Smith"),
            ("2602.00002", 0, "Jane Smith", None, "MIT", None, None, "openalex:A5", ORCID_A, "Jane Smith")]
    got = links(frame(rows))
    assert got["2601.00001:0"][0] != got["2602.00002:0"][0]
    rows[0] = ("2601.00001", 0, "J. Smith") + rows[0][3:]  # an initial fits any given name
    got = links(frame(rows))
    assert got["2601.00001:0"][0] == got["2602.00002:0"][0]


# The warehouse: a graph-less one decides as before; ids the graph stage adds later re-decide their blocks.

def _paper(i: int, people: list[tuple[str, str | None, str]]) -> tuple[dict, list[dict]]:
    aid = f"2610.{i:05d}"
    row = {"arxiv_id": aid, "version": 1, "title": f"Paper {i}", "abstract": "An abstract.", "primary_category": "cs.CL",
           "categories": ["cs.CL"], "published": datetime(2026, 10, 1, tzinfo=UTC),
           "updated": datetime(2026, 10, 1, tzinfo=UTC), "year": 2026, "pdf_sha256": f"{i:064x}", "title_similarity": 1.0,
           "n_authors": len(people), "input_hash": f"h{i}", "loaded_at": utcnow()}
    return row, [{"arxiv_id": aid, "position": pos, "name": n, "email": e, "institution": inst, "affiliation": inst}
                 for pos, (n, e, inst) in enumerate(people)]


CORPUS = [_paper(1, [("Li Chen", "li@utoronto.example", "University of Toronto"), ("Omar Haddad", None, "KAUST")]),
          _paper(2, [("Li Chen", "lichen@gmail.com", "University of Toronto")]),
          _paper(3, [("Wei Wang", "wei@tsinghua.example", "Tsinghua University"), ("Kenji Sato", None, "Tokyo")]),
          _paper(4, [("Wei Wang", None, "Tsinghua University"), ("W. Wang", None, "Tsinghua University")])]


def _load(s: Settings) -> None:
    with Warehouse.open(s.warehouse_path) as wh:
        wh.ingest.load_corpus(PAPERS.conform(pl.DataFrame([p for p, _ in CORPUS])),
                       MENTIONS.conform(pl.DataFrame([m for _, ms in CORPUS for m in ms])), REJECTS.empty())


def test_a_graph_less_warehouse_decides_exactly_as_before(settings: Settings) -> None:
    s = settings.with_overrides(disambiguate={"use_llm": False})
    _load(s)
    res = disambiguate_flow.fn(s)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        stored, blocks = wh.read(AUTHOR_LINKS), wh.read(AUTHOR_BLOCKS)
        mentions = wh.disambiguate.mentions_with_years()
    assert mentions.select(GRAPH_COLUMNS).null_count().row(0) == (mentions.height,) * 3
    # The mentions as the warehouse gave them before the graph (no graph columns at all).
    before = disambiguate(mentions.drop(GRAPH_COLUMNS), {}, fallback_decider(s.disambiguate.fallback_threshold),
                          res.decider, s.disambiguate.max_block_size, s.disambiguate.candidate_similarity, NOW)
    assert stored.sort("arxiv_id", "position").equals(before.links.select(stored.columns).sort("arxiv_id", "position"))
    # Today's decisions: Li Chen's two addresses stay apart, the three Wangs at Tsinghua are one.
    assert dict(blocks.select("block_key", "n_authors").iter_rows()) == {"chen|l": 2, "wang|w": 1, "haddad|o": 1, "sato|k": 1}
    # ... and today's block hashes (the formula before the graph), so an upgrade re-decides no block.
    blocks_of, _ = mentions_frame_to_blocks(mentions.drop(GRAPH_COLUMNS), s.disambiguate.max_block_size)
    today = {k: hashlib.sha256(json.dumps([k, sorted(
        (m.key, m.name, " ".join(m.emails), list(m.affs), m.s2 or "", list(m.coauthors), m.title or "", m.orcid or "")
        for m in ms), res.decider, METHOD_VERSION]).encode()).hexdigest() for k, ms in blocks_of.items()}
    assert dict(blocks.select("block_key", "input_hash").iter_rows()) == today
    assert "openalex" not in res.links_by_method


def test_ids_the_graph_stage_adds_later_re_decide_only_their_blocks(settings: Settings) -> None:
    s = settings.with_overrides(disambiguate={"use_llm": False})
    _load(s)
    first = disambiguate_flow.fn(s)
    assert first.links_by_method.get("openalex", 0) == 0
    with Warehouse.open(s.warehouse_path) as wh:  # what a refresh records when it runs the stage
        record_stage_ran(wh, "disambiguate", plan_disambiguate(s, wh))
        assert not plan_disambiguate(s, wh).run
        wh.graph.save_graph(
            authorships=pl.DataFrame([
                {"arxiv_id": "2610.00001", "source": "openalex", "position": 0, "person_key": "openalex:A1", "name": "Li Chen"},
                {"arxiv_id": "2610.00002", "source": "openalex", "position": 0, "person_key": "openalex:A1", "name": "Li Chen"}]),
            fetches=pl.DataFrame([{"arxiv_id": a, "source": "openalex", "kind": "affiliations", "found": True, "n_rows": 1,
                                   "fetched_at": utcnow()} for a in ("2610.00001", "2610.00002")]))
        plan = plan_disambiguate(s, wh)
    assert plan.run and plan.reason.startswith("3 of 7 mentions new or changed")  # papers 1 and 2 gained ids
    day = disambiguate_flow.fn(s)
    # Only the Chen block changed (Haddad's mention was read with its paper, its hash unchanged).
    assert day.blocks_decided == 1 and day.merges == {"openalex": 1}
    assert day.links_by_method["openalex"] == 2
    assert disambiguate_flow.fn(s).blocks_decided == 0


def test_the_world_s_openalex_splits_profiles_and_hides_orcids_and_disambiguation_reads_its_ids(
        settings: Settings, replay, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from datetime import date

    from revbench.flows.graph import graph_flow
    from revbench.flows.ingest import ingest_flow
    from revbench.replay.openalex import author_id
    from revbench.schemas.graph import PAPER_AUTHORSHIPS
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import generate_world
    from tests.support.common import on_replay

    world = tmp_path / "world"
    generate_world(world, WorldSpec(n_papers=60, seed=5, start=date(2026, 9, 1), end=date(2026, 9, 8)))
    s = on_replay(settings, replay(world=world)).with_overrides(openalex={"enabled": True},
                                                                disambiguate={"use_llm": False})
    ingest_flow.fn(s, date(2026, 9, 1), date(2026, 9, 8), synthetic=True)
    graph_flow.fn(s)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        stored = wh.read(PAPER_AUTHORSHIPS)
        mentions = wh.disambiguate.mentions_with_years()
    graph = read_graph(world)
    quirks, ours = graph["openalex_profiles"], set(stored["arxiv_id"])
    at = {f"{a}:{p}": (k, o) for a, p, k, o in stored.select("arxiv_id", "position", "person_key", "orcid").iter_rows()}
    hidden = [k for k in quirks["no_orcid"] if k in at]
    assert hidden and all(at[k][1] is None for k in hidden)
    second = {(a, pid) for pid, papers in quirks["second_profile"].items() for a in papers if a in ours}
    assert second
    for aid, pid in second:
        pos = graph["authors"][aid].index(pid)
        assert at[f"{aid}:{pos}"][0] == f"openalex:{author_id(pid + '#2')}"
    # Most mentions get their authorship's ids; a mention whose name does not fit its place gets none.
    assert mentions["graph_person"].is_not_null().sum() > 0.8 * mentions.height
    res = disambiguate_flow.fn(s)
    assert res.links_by_method.get("openalex", 0) > 0


def test_authorships_without_ids_tie_nothing_and_null_keys_do_not_crash() -> None:
    from revbench.clients.openalex_graph import person_rows

    work = {"authorships": [None, {"author": None}, {"author": {"id": None, "orcid": None}},
                            {"author": {"id": "https://openalex.org/A5", "display_name": "Li Chen",
                                        "orcid": "https://orcid.org/0000-0002-1825-0097"}, "raw_author_name": "L. Chen"}]}
    assert person_rows("2601.00001", work) == [{"arxiv_id": "2601.00001", "source": "openalex", "position": 3,
                                                "person_key": "openalex:A5", "orcid": ORCID_A, "name": "L. Chen"}]
    assert person_rows("2601.00001", {"authorships": None}) == []
