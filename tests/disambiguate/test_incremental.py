"""A disambiguation after a day's load reads only the name blocks of what changed, and ends
with exactly the links, blocks, authors and edges a pass over every mention would build.

In-process (no Prefect), on a hand-made corpus: a few people who share name blocks, one block
big enough to be split, papers added, a paper replaced with another author list and a paper
rejected by a later version."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from revbench.flows.disambiguate import DisambiguationResult, disambiguate_flow
from revbench.flows.refresh import plan_disambiguate
from revbench.schemas.tables import (
    AUTHOR_BLOCKS,
    AUTHOR_LINKS,
    AUTHORS,
    COAUTHOR_EDGES,
    MENTIONS,
    PAPERS,
    REJECTS,
)
from revbench.settings import Settings
from revbench.warehouse import Warehouse, utcnow
from tests.support.common import record_stage_ran

PEOPLE = [  # name, email, institution
    ("Wei Wang", "wei.wang@tsinghua.example", "Tsinghua University"),
    ("W. Wang", None, "Tsinghua University"),
    ("Wen Wang", "wen@cmu.example", "Carnegie Mellon University"),
    ("Wei Wang", "wwang@mit.example", "MIT"),
    ("Ana Lima", "ana@usp.example", "Universidade de Sao Paulo"),
    ("A. Lima", None, "Universidade de Sao Paulo"),
    ("Jon Smith", "jon@ox.example", "University of Oxford"),
    ("Jane Smith", None, "Massachusetts Institute of Technology"),
    ("Jane Smith", None, "MIT"),
    ("Omar Haddad", "omar@kaust.example", "KAUST"),
    ("Kenji Sato", "sato@tokyo.example", "University of Tokyo"),
    ("Maria Rossi", None, "Politecnico di Milano"),
]


def paper(i: int, authors: list[int], year: int = 2026) -> tuple[dict, list[dict]]:
    """A paper row and its mention rows (``authors``: indexes into PEOPLE)."""
    aid = f"2610.{i:05d}"
    row = {"arxiv_id": aid, "version": 1, "title": f"Paper number {i} on topic {i % 4}", "abstract": "An abstract.",
           "primary_category": "cs.CL", "categories": ["cs.CL"], "published": datetime(year, 10, 1, tzinfo=UTC),
           "updated": datetime(year, 10, 1, tzinfo=UTC), "year": year, "pdf_sha256": f"{i:064x}", "title_similarity": 1.0,
           "n_authors": len(authors), "input_hash": f"h{i}", "loaded_at": utcnow()}
    mentions = [{"arxiv_id": aid, "position": pos, "name": PEOPLE[p][0], "email": PEOPLE[p][1],
                 "institution": PEOPLE[p][2], "affiliation": PEOPLE[p][2]} for pos, p in enumerate(authors)]
    return row, mentions


def load(s: Settings, papers: list[tuple[dict, list[dict]]], rejected: list[str] = ()) -> None:
    rejects = [{"arxiv_id": a, "version": 2, "stage": "reconcile", "reason": "title_mismatch", "detail": "",
                "input_hash": f"r{a}", "recorded_at": utcnow()} for a in rejected]
    with Warehouse.open(s.warehouse_path) as wh:
        wh.ingest.load_corpus(PAPERS.conform(pl.DataFrame([p for p, _ in papers])),
                       MENTIONS.conform(pl.DataFrame([m for _, ms in papers for m in ms])),
                       REJECTS.conform(pl.DataFrame(rejects)) if rejects else REJECTS.empty())


def identity(s: Settings) -> dict[str, pl.DataFrame]:
    """The identity tables, without timestamps, in a fixed order."""
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return {"links": wh.read(AUTHOR_LINKS), "blocks": wh.read(AUTHOR_BLOCKS).drop("decided_at"),
                "authors": wh.read(AUTHORS), "edges": wh.read(COAUTHOR_EDGES)}


def counts(r: DisambiguationResult) -> dict:
    return {k: getattr(r, k) for k in ("mentions", "blocks", "blocks_decided", "blocks_dropped", "split_blocks", "merges",
                                       "histogram", "authors", "edges", "links_by_method")}


def first_day() -> list[tuple[dict, list[dict]]]:
    # 14 mentions in the Wang|W block (over max_block_size 10): it is split by given name.
    # Sato and Rossi are on none of the papers that change a day later.
    return [paper(i, [i % 4] + ([6 + i % 3] if i < 8 else [10 + i % 2]) + ([4 + i % 2] if i < 6 else []))
            for i in range(14)] + [paper(14, [9, 5])]


def test_a_day_later_reads_only_changed_blocks_and_builds_what_a_full_pass_builds(settings: Settings,
                                                                                   tmp_path: Path) -> None:
    s = settings.with_overrides(disambiguate={"use_llm": False, "max_block_size": 10})
    load(s, first_day())
    first = disambiguate_flow.fn(s)
    assert first.mentions_checked == first.mentions == 36 and first.blocks_decided == first.blocks
    assert first.split_blocks == ["wang|w"]
    with Warehouse.open(s.warehouse_path) as wh:  # what a refresh records when it runs the stage
        record_stage_ran(wh, "disambiguate", plan_disambiguate(s, wh))
        assert not plan_disambiguate(s, wh).run

    # A day later: a new paper joins the Lima and Haddad blocks, paper 3 comes back with another
    # author list (a Smith leaves it, a Wang joins the big block) and paper 7 is rejected.
    load(s, [paper(20, [5, 9]), paper(3, [3, 0, 4])], rejected=["2610.00007"])
    with Warehouse.open(s.warehouse_path) as wh:
        plan = plan_disambiguate(s, wh)
    # 2 + 3 mentions new or changed; paper 7's 2 mentions are gone (paper 3's are replaced, not gone).
    assert plan.run and plan.reason.startswith("5 of 36 mentions new or changed and 2 removed since the last disambiguation")

    full = s.with_overrides(data_dir=tmp_path / "full")
    full.warehouse_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(s.warehouse_path, full.warehouse_path)
    with Warehouse.open(full.warehouse_path) as wh:  # no earlier pass on record: every mention is read
        wh._exec("DELETE FROM runs WHERE flow = 'disambiguate'")

    day = disambiguate_flow.fn(s)
    reference = disambiguate_flow.fn(full)
    assert reference.mentions_checked == reference.mentions == 36
    # Read: the Wang, Lima, Haddad and Smith blocks (Smith through the mentions papers 3 and 7
    # lost), not the 6 mentions of Sato and Rossi.
    assert day.mentions_checked == 30 and day.blocks_decided == reference.blocks_decided > 0
    assert counts(day) == counts(reference)
    mine, theirs = identity(s), identity(full)
    for name in mine:
        assert mine[name].equals(theirs[name]), name
    assert "2610.00007" not in set(mine["links"]["arxiv_id"])

    again = disambiguate_flow.fn(s)
    assert again.mentions_checked == 0 and again.blocks_decided == 0 and again.merges == {}
    assert counts(again) == {**counts(day), "blocks_decided": 0, "merges": {}}
    assert identity(s)["authors"].equals(mine["authors"])


def test_a_pass_after_one_that_did_not_complete_reads_everything(settings: Settings) -> None:
    s = settings.with_overrides(disambiguate={"use_llm": False, "max_block_size": 10})
    load(s, first_day())
    disambiguate_flow.fn(s)
    load(s, [paper(20, [5, 9])])
    with Warehouse.open(s.warehouse_path) as wh:
        wh._exec("UPDATE runs SET status = 'crashed' WHERE flow = 'disambiguate'")
    after_crash = disambiguate_flow.fn(s)
    assert after_crash.mentions_checked == after_crash.mentions == 38
    assert after_crash.blocks_decided == 2  # still only the blocks whose inputs changed are decided
