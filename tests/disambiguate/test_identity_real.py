"""Identity and conflicts on what real sources give: every affiliation of an author and ORCIDs.

ORCID is the strongest evidence (the same one merges, two different ones never do, whatever
else agrees); affiliation evidence and the COI institution check look at every affiliation of
both sides; and on the SYNTHETIC world with the real quirks both deciders keep precision."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.replay.llm import stub_llm_answer
from revbench.settings import Settings
from revbench.synth.truth import disambiguation_quality, load_truth
from revbench.synth.draw import WorldSpec
from revbench.synth.world import generate_world
from revbench.tasks.disambiguate import Decision, Instance, decide_block, disambiguate, fallback_decider, mentions_frame_to_blocks
from revbench.tasks.llm_clusters import TEMPLATE, parse_clusters
from revbench.tasks.pools import author_affiliations, conflicts
from revbench.templates import render

NOW = datetime(2026, 11, 1)


def aff(institution: str | None, department: str | None = None) -> dict[str, str | None]:
    return {"department": department, "institution": institution, "country": None, "text": institution}


def frame(rows: list[dict]) -> pl.DataFrame:
    """Mentions as the warehouse gives them to disambiguation, with every affiliation and the ORCID."""
    base = {"email": None, "institution": None, "affiliation": None, "affiliations": [], "orcid": None,
            "s2_author_id": None, "year": 2026, "title": None}
    full = [{**base, **r} for r in rows]
    return pl.DataFrame(full, schema={
        "arxiv_id": pl.Utf8, "position": pl.Int64, "name": pl.Utf8, "email": pl.Utf8, "institution": pl.Utf8,
        "affiliation": pl.Utf8,
        "affiliations": pl.List(pl.Struct({"department": pl.Utf8, "institution": pl.Utf8, "country": pl.Utf8, "text": pl.Utf8})),
        "orcid": pl.Utf8, "s2_author_id": pl.Utf8, "year": pl.Int64, "title": pl.Utf8})


def clusters(out_links: pl.DataFrame) -> list[set[str]]:
    groups: dict[str, set[str]] = {}
    for a, p, c in out_links.select("arxiv_id", "position", "author_id").iter_rows():
        groups.setdefault(c, set()).add(f"{a}:{p}")
    return sorted(groups.values(), key=min)


def merge_all(key: str, instances: list[Instance]) -> Decision:
    """A decider that believes everything is one person (what a careless LLM might answer)."""
    return Decision([list(range(1, len(instances) + 1))], "llm", "all")


def test_the_same_orcid_merges_across_name_variants() -> None:
    m = frame([
        {"arxiv_id": "2610.00001", "position": 0, "name": "J. Smith", "orcid": "0009-0000-0000-1562"},
        {"arxiv_id": "2610.00002", "position": 0, "name": "John Smith", "orcid": "https://orcid.org/0009-0000-0000-1562"},
        {"arxiv_id": "2610.00003", "position": 0, "name": "John Smith"},
    ])
    out = disambiguate(m, {}, None, "none", 500, 0.5, NOW)
    assert clusters(out.links) == [{"2610.00001:0", "2610.00002:0"}, {"2610.00003:0"}]
    assert set(out.links.filter(pl.col("position") == 0).sort("arxiv_id")["method"].to_list()[:2]) == {"orcid"}
    assert out.merges["orcid"] == 1


def test_two_orcids_never_merge_even_with_the_same_email() -> None:
    m = frame([
        {"arxiv_id": "2610.00001", "position": 0, "name": "Wei Chen", "email": "wchen@lab.example",
         "orcid": "0009-0000-0000-1562", "institution": "MIT", "affiliations": [aff("MIT")]},
        {"arxiv_id": "2610.00002", "position": 0, "name": "Wei Chen", "email": "wchen@lab.example",
         "orcid": "0009-0000-0000-7809", "institution": "MIT", "affiliations": [aff("MIT")]},
        {"arxiv_id": "2610.00003", "position": 0, "name": "Wei Chen", "institution": "MIT", "affiliations": [aff("MIT")]},
    ])
    out = disambiguate(m, {}, merge_all, "all", 500, 0.5, NOW)
    found = clusters(out.links)
    assert {"2610.00001:0", "2610.00002:0"} not in found and not any({"2610.00001:0", "2610.00002:0"} <= c for c in found)
    assert out.conflicts["email_vs_orcid"] == 1
    # The ORCID-less mention may join one of them, never both.
    assert len(found) == 2


@pytest.mark.parametrize("decider", [fallback_decider(0.5), merge_all])
def test_no_decider_joins_two_orcids(decider) -> None:
    m = frame([
        {"arxiv_id": "2610.00001", "position": 0, "name": "Ana Silva", "institution": "MIT", "affiliations": [aff("MIT")],
         "orcid": "0009-0000-0000-1562", "email": "ana@mit.example"},
        {"arxiv_id": "2610.00002", "position": 0, "name": "Ana Silva", "institution": "MIT CSAIL",
         "affiliations": [aff("MIT CSAIL")], "orcid": "0009-0000-0000-7809"},
    ])
    out = disambiguate(m, {}, decider, "d", 500, 0.0, NOW)
    assert len(clusters(out.links)) == 2


def test_a_shared_second_affiliation_is_affiliation_evidence() -> None:
    m = frame([
        {"arxiv_id": "2610.00001", "position": 0, "name": "Lena Novak", "email": "lena@tum.example",
         "institution": "TU Munich", "affiliations": [aff("TU Munich")]},
        # no email; first affiliation elsewhere, second the same institution
        {"arxiv_id": "2610.00002", "position": 0, "name": "Lena Novak", "institution": "ETH Zurich",
         "affiliations": [aff("ETH Zurich"), aff("TU Munich")]},
    ])
    out = disambiguate(m, {}, None, "none", 500, 0.5, NOW)
    assert clusters(out.links) == [{"2610.00001:0", "2610.00002:0"}]
    assert "affiliation" in out.links["method"].to_list()


def test_a_mention_between_two_emailed_namesakes_joins_neither() -> None:
    """Its first institution holds one Lena Novak with an address, its second another: ambiguous."""
    m = frame([
        {"arxiv_id": "2610.00001", "position": 0, "name": "Lena Novak", "email": "lena@tum.example",
         "institution": "TU Munich", "affiliations": [aff("TU Munich")]},
        {"arxiv_id": "2610.00002", "position": 0, "name": "Lena Novak", "email": "lena@eth.example",
         "institution": "ETH Zurich", "affiliations": [aff("ETH Zurich")]},
        {"arxiv_id": "2610.00003", "position": 0, "name": "Lena Novak", "institution": "ETH Zurich",
         "affiliations": [aff("ETH Zurich"), aff("TU Munich")]},
    ])
    out = disambiguate(m, {}, None, "none", 500, 0.5, NOW)
    assert len(clusters(out.links)) == 3


def test_blocks_and_the_prompt_carry_every_affiliation_and_the_orcid() -> None:
    m = frame([
        {"arxiv_id": "2610.00001", "position": 0, "name": "Lena Novak", "institution": "ETH Zurich",
         "affiliations": [aff("ETH Zurich"), aff("TU Munich")], "orcid": "0009-0000-0000-1562"},
        {"arxiv_id": "2610.00002", "position": 0, "name": "Lena Novak", "institution": "Google Research",
         "affiliations": [aff("Google Research")]},
    ])
    blocks, _ = mentions_frame_to_blocks(m, 500)
    (members,) = blocks.values()
    assert members[0].raw_affs == ("ETH Zurich", "TU Munich") and members[0].orcid == "0009-0000-0000-1562"
    seen: list[list[Instance]] = []

    def spy(key: str, instances: list[Instance]) -> Decision:
        seen.append(instances)
        return Decision([[i] for i in range(1, len(instances) + 1)], "llm")

    decide_block("novak|l", members, spy, 0.0)
    prompt, version = render(TEMPLATE, instances=seen[0])
    assert "affiliations: ETH Zurich; TU Munich" in prompt and "ORCIDs: 0009-0000-0000-1562" in prompt
    assert version.startswith("3-")


def test_the_replay_verifier_keeps_two_orcids_apart_and_meets_on_a_second_institution() -> None:
    def inst(aff_: list[str], orcids: list[str]) -> Instance:
        return Instance([0], ["Lena Novak"], aff_, [], [], ["Ada Lovelace"], ["Neural Ranking"], orcids)

    same_place = [inst(["ETH Zurich", "Technical University of Munich"], []), inst(["TU Munich"], [])]
    prompt, _ = render(TEMPLATE, instances=same_place)
    assert parse_clusters(stub_llm_answer(prompt), 2) == [[1, 2]]
    two_ids = [inst(["TU Munich"], ["0009-0000-0000-1562"]), inst(["TU Munich"], ["0009-0000-0000-7809"])]
    prompt, _ = render(TEMPLATE, instances=two_ids)
    assert parse_clusters(stub_llm_answer(prompt), 2) == [[1], [2]]


def test_coi_sees_a_conflict_only_a_second_affiliation_reveals() -> None:
    authors = pl.DataFrame({"author_id": ["q", "c", "x"], "name": ["Ana Silva", "Bo Li", "Cy Dee"],
                            "affiliations": [["Microsoft Research"], ["MIT", "Microsoft Research"], ["MIT"]]})
    affs = author_affiliations(authors)
    evidence = pl.DataFrame({"query_id": ["2610.00001"] * 2, "author_id": ["c", "x"], "neighbor_id": ["n1", "n2"],
                             "similarity": [0.9, 0.9]})
    qa = pl.DataFrame({"arxiv_id": ["2610.00001"], "author_id": ["q"]})
    edges = pl.DataFrame(schema={"author_a": pl.Utf8, "author_b": pl.Utf8})
    coi = conflicts(evidence, qa, edges, affs)
    assert coi.select("author_id", "reason").rows() == [("c", "same_affiliation")]
    # Without the second affiliation there is no conflict: the check is what catches it.
    first_only = author_affiliations(authors.with_columns(pl.col("affiliations").list.head(1)))
    assert conflicts(evidence, qa, edges, first_only).height == 0


def test_coi_meets_an_institution_under_its_alias() -> None:
    authors = pl.DataFrame({"author_id": ["q", "c"], "affiliations": [["Massachusetts Institute of Technology"], ["MIT"]]})
    affs = author_affiliations(authors)
    assert affs.group_by("affiliation").len()["len"].to_list() == [2]


def _world_mentions(world: Path) -> pl.DataFrame:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from disambiguate_bench import world_mentions

    return world_mentions(world)


def test_both_deciders_keep_precision_on_the_quirky_world(tmp_path: Path) -> None:
    """Second affiliations, ORCIDs and orphan affiliations at real rates: pairwise precision
    stays at 0.99 or above for the fallback and for the replay server's verifier."""
    world = tmp_path / "world"
    generate_world(world, WorldSpec(n_papers=300, seed=7, documents=False))
    truth, mentions = load_truth(world), _world_mentions(world)
    assert mentions["orcid"].is_not_null().any() and (mentions["affiliations"].list.len() > 1).any()
    d = Settings().disambiguate

    def replay_verifier(key: str, instances: list[Instance]) -> Decision:
        prompt, _ = render(TEMPLATE, instances=instances)
        return Decision(parse_clusters(stub_llm_answer(prompt), len(instances)), "llm")

    for decider in (fallback_decider(d.fallback_threshold), replay_verifier):
        out = disambiguate(mentions, {}, decider, "d", d.max_block_size, d.candidate_similarity, NOW)
        q = disambiguation_quality(truth, out.links)
        assert q["pairwise_precision"] >= 0.99, q
        assert q["pairwise_recall"] >= 0.85, q
        assert out.merges["orcid"] > 0
