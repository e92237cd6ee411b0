from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from revbench.evaluation.metrics.clustering import pairwise_scores
from revbench.tasks.disambiguate import Decision, Instance, decide_block, disambiguate, fallback_decider, mentions_frame_to_blocks

NOW = datetime(2026, 11, 1, tzinfo=UTC)
FB = fallback_decider(0.92)


def frame(rows: list[tuple]) -> pl.DataFrame:
    cols = ["arxiv_id", "position", "name", "email", "institution", "affiliation", "s2_author_id"]
    return pl.DataFrame([dict(zip(cols, r, strict=True)) for r in rows], schema={c: (pl.Int64 if c == "position" else pl.Utf8) for c in cols})


def clusters(df: pl.DataFrame, decider=FB) -> dict[str, str]:
    out = disambiguate(df, {}, decider, "test", 500, 0.5, NOW)
    return {f"{a}:{p}": c for a, p, c in out.links.select("arxiv_id", "position", "author_id").iter_rows()}


def same(c: dict[str, str], *keys: str) -> bool:
    return len({c[k] for k in keys}) == 1


def test_email_then_affiliation_then_apart() -> None:
    df = frame([
        ("2601.00001", 0, "Ana Lima", "ana@uni.example", "Uni A", None, None),
        ("2601.00002", 0, "A. Lima", "ana@uni.example", None, None, None),          # same email
        ("2601.00003", 0, "Ana Lima", None, "Uni A", None, None),                   # same affiliation, no email
        ("2601.00004", 0, "Ana Lima", "other@uni.example", "Uni B", None, None),    # a namesake elsewhere
        ("2601.00005", 0, "Ana Lima", None, None, None, None),                      # nothing to go on
    ])
    c = clusters(df)
    assert same(c, "2601.00001:0", "2601.00002:0", "2601.00003:0")
    assert len({c["2601.00001:0"], c["2601.00004:0"], c["2601.00005:0"]}) == 3


def test_two_emailed_people_at_one_place_stay_apart() -> None:
    df = frame([
        ("2601.00001", 0, "Wei Wang", "wei1@thu.example", "Tsinghua University", None, None),
        ("2601.00002", 0, "Wei Wang", "wei2@thu.example", "Tsinghua University", None, None),
        ("2601.00003", 0, "Wei Wang", None, "Tsinghua University", None, None),
    ])
    c = clusters(df)
    assert not same(c, "2601.00001:0", "2601.00002:0")
    assert not same(c, "2601.00001:0", "2601.00003:0") and not same(c, "2601.00002:0", "2601.00003:0")


def test_fallback_merges_known_aliases_only() -> None:
    df = frame([
        ("2601.00001", 0, "Li Chen", None, "MIT", None, None),
        ("2601.00002", 0, "Li Chen", None, "Massachusetts Institute of Technology", None, None),
        ("2601.00003", 0, "Li Chen", None, "Michigan Tech", None, None),
        ("2601.00004", 1, "Lin Chen", None, "MIT", None, None),  # another given name: never merged
    ])
    c = clusters(df)
    assert same(c, "2601.00001:0", "2601.00002:0") and not same(c, "2601.00001:0", "2601.00003:0")
    assert not same(c, "2601.00001:0", "2601.00004:1")
    rules_only = clusters(df, decider=None)
    assert not same(rules_only, "2601.00001:0", "2601.00002:0")


def test_decider_never_sees_mentions_without_affiliation() -> None:
    seen: list[list[Instance]] = []

    def greedy(key: str, instances: list[Instance]) -> Decision:
        seen.append(instances)
        return Decision([list(range(1, len(instances) + 1))], "llm", "all")

    df = frame([
        ("2601.00001", 0, "Ali Kaya", None, "Uni A", None, "s2-1"),
        ("2601.00002", 0, "Ali Kaya", None, "University A", None, "s2-1"),
        ("2601.00003", 0, "Ali Kaya", None, None, None, "s2-1"),
    ])
    c = clusters(df, decider=greedy)
    assert all(inst.affiliations for batch in seen for inst in batch)
    assert same(c, "2601.00001:0", "2601.00002:0") and not same(c, "2601.00001:0", "2601.00003:0")


def test_ids_are_stable_and_reruns_decide_nothing() -> None:
    df = frame([("2601.00001", 0, "Ana Lima", "ana@x.example", None, None, None),
                ("2601.00002", 0, "Ana Lima", "ana@x.example", None, None, None),
                ("2601.00003", 0, "Bo Sun", None, None, None, None)])
    first = disambiguate(df, {}, FB, "fb", 500, 0.5, NOW)
    known = dict(first.blocks.select("block_key", "input_hash").iter_rows())
    again = disambiguate(df, known, FB, "fb", 500, 0.5, NOW)
    assert again.blocks_decided == 0 and again.links.height == 0
    grown = pl.concat([df, frame([("2601.00004", 0, "Ana Lima", "ana@x.example", None, None, None)])])
    third = disambiguate(grown, known, FB, "fb", 500, 0.5, NOW)
    assert third.blocks_decided == 1 and set(third.links["block_key"]) == {"lima|a"}
    ids = dict(zip(first.links["arxiv_id"], first.links["author_id"], strict=True))
    new = dict(zip(third.links["arxiv_id"], third.links["author_id"], strict=True))
    assert new["2601.00004"] == ids["2601.00001"] == new["2601.00001"]


def test_oversized_blocks_are_split_deterministically() -> None:
    rows = [(f"2601.{i:05d}", 0, f"{g} Wang", None, None, None, None) for i, g in enumerate(["Wei"] * 30 + ["Wen"] * 5)]
    blocks, split = mentions_frame_to_blocks(frame(rows), max_block=20)
    assert split == ["wang|w"]
    assert sorted(len(v) for v in blocks.values()) == sorted(len(v) for v in mentions_frame_to_blocks(frame(rows), 20)[0].values())
    assert all(len(v) <= 20 for v in blocks.values()) and sum(len(v) for v in blocks.values()) == 35
    assert "wang|w|wen" in blocks


def test_method_and_evidence_are_recorded() -> None:
    res = decide_block("lima|a", mentions_frame_to_blocks(frame([
        ("2601.00001", 0, "Ana Lima", "ana@x.example", None, None, None),
        ("2601.00002", 0, "Ana Lima", "ana@x.example", None, None, None),
        ("2601.00003", 0, "Ana Lima", None, None, None, None),
    ]), 500)[0]["lima|a"], FB, 0.5)
    methods = {k: (m, e) for k, _, m, e in res.links}
    assert methods["2601.00001:0"] == ("email", "email ana@x.example") and methods["2601.00003:0"][0] == "singleton"


def test_pairwise_and_bcubed_by_hand() -> None:
    pred = {"a": "1", "b": "1", "c": "1", "d": "2"}
    truth = {"a": "x", "b": "x", "c": "y", "d": "y"}
    q = pairwise_scores(pred, truth)
    # predicted pairs ab ac bc; true pairs ab cd; right: ab.
    assert q["pairwise_precision"] == pytest.approx(1 / 3) and q["pairwise_recall"] == pytest.approx(1 / 2)
    assert q["bcubed_precision"] == pytest.approx((2 / 3 + 2 / 3 + 1 / 3 + 1) / 4)
    assert q["bcubed_recall"] == pytest.approx((1 + 1 + 1 / 2 + 1 / 2) / 4)


def test_incremental_save_keeps_links_of_unchanged_blocks(tmp_path) -> None:
    from revbench.schemas.tables import AUTHOR_LINKS
    from revbench.warehouse import Warehouse

    paper = frame([("2601.00001", 0, "Ana Lima", "ana@x.example", None, None, None),
                   ("2601.00001", 1, "Bo Sun", "bo@y.example", None, None, None)])
    first = disambiguate(paper, {}, FB, "fb", 500, 0.5, NOW)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.disambiguate.save_blocks(first.links, first.blocks, pl.DataFrame(), first.drop_blocks)
        known = wh.disambiguate.block_hashes()
        # Another paper by Ana changes her block only; Bo's block is not decided again.
        grown = pl.concat([paper, frame([("2601.00002", 0, "Ana Lima", "ana@x.example", None, None, None)])])
        again = disambiguate(grown, known, FB, "fb", 500, 0.5, NOW)
        assert set(again.blocks["block_key"]) == {"lima|a"}
        wh.disambiguate.save_blocks(again.links, again.blocks, pl.DataFrame(), again.drop_blocks)
        links = wh.read(AUTHOR_LINKS)
    assert sorted(links.select("arxiv_id", "position").rows()) == [("2601.00001", 0), ("2601.00001", 1), ("2601.00002", 0)]


def test_any_shared_address_is_an_exact_email_match() -> None:
    """GROBID gives an author several addresses; a mention showing any one of them is the same
    person (``emails`` null: a mention loaded before every address was kept, its ``email`` stands in)."""
    df = frame([
        ("2601.00001", 0, "Ana Lima", "ana@uni.example", "Uni A", None, None),
        ("2601.00002", 0, "Ana Lima", "Ana.Lima@gmail.com", "Uni B", None, None),     # her second address only
        ("2601.00003", 0, "Ana Lima", "other@uni.example", "Uni A", None, None),      # a namesake
    ]).with_columns(pl.Series("emails", [["ana@uni.example", "analima@gmail.com"], None, ["other@uni.example"]]))
    out = disambiguate(df, {}, FB, "test", 500, 0.5, NOW)
    links = {f"{a}:{p}": (c, m) for a, p, c, m in out.links.select("arxiv_id", "position", "author_id", "method").iter_rows()}
    assert links["2601.00001:0"][0] == links["2601.00002:0"][0] != links["2601.00003:0"][0]
    assert links["2601.00002:0"][1] == "email"


def test_one_address_hashes_as_before_every_address_was_kept() -> None:
    """A block whose mentions have one address each is not decided again after the upgrade."""
    df = frame([("2601.00001", 0, "Ana Lima", "ana@uni.example", "Uni A", None, None),
                ("2601.00002", 0, "Ana Lima", None, "Uni A", None, None)])
    before = disambiguate(df, {}, FB, "test", 500, 0.5, NOW).blocks
    after = disambiguate(df.with_columns(pl.Series("emails", [["ana@uni.example"], []])), {}, FB, "test", 500, 0.5, NOW).blocks
    assert before["input_hash"].to_list() == after["input_hash"].to_list()
    grown = df.with_columns(pl.Series("emails", [["ana@uni.example", "ana@gmail.com"], []]))
    assert disambiguate(grown, {}, FB, "test", 500, 0.5, NOW).blocks["input_hash"].to_list() != before["input_hash"].to_list()
