"""The SYNTHETIC world's graph: drawn apart from everything the world drew before it, with real
structure (people cite their own and their co-authors' work more; a fifth to a third of references
outside the world), and one conflict of interest that only the graph reveals."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from revbench.synth.draw import PLANTED_QUERY_SEED, WorldSpec, query_rank
from revbench.synth.graph import CONFLICT_WINDOW, REFERENCES
from revbench.synth.graph_files import GRAPH_DIR, SCHEMAS, read_graph
from revbench.synth.truth import load_truth
from revbench.synth.world import generate_world
from tests.support.common import run_cli

SPEC = WorldSpec(n_papers=60, seed=5, start=date(2026, 9, 1), end=date(2026, 9, 20), bad_share=0.02, extra_days=1)
BEFORE_THE_GRAPH = {
    "arxiv.parquet": "1760f366db372d59", "documents.parquet": "a9a956dfdae2dfbe", "mentions.parquet": "0bfb1a55bcbc74e7",
    "s2_authors.parquet": "cce0204ac806a876", "s2_papers.parquet": "de85a6e43555a359",
    "truth/bad_records.parquet": "edd2a8533d5acb4a", "truth/mentions.parquet": "6b897b13ae488dcd",
    "truth/paper_topics.parquet": "8d2458fb4051f1a7", "truth/persons.parquet": "8e17ecc5397ffa83",
    "truth/planted_conflicts.parquet": "2cc6dd6492a74e30", "truth/works.parquet": "577783efab252fc4",
}
"""Content digests of ``SPEC``'s world without its graph, as the generator writes it since the world
was calibrated on real data (format 8: people per paper, works' focus and older works' topics; the
digests of format 7 were those before the graph existed) and titled as real works are (format 9: the
files showing titles changed, the truth did not)."""


def _content(path: Path) -> str:
    """A digest of a parquet file's rows (bytes as hex), steady across parquet writers."""
    rows = pl.read_parquet(path).to_dicts()
    text = json.dumps(rows, default=lambda v: v.hex() if isinstance(v, bytes) else str(v), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _graph(world: Path) -> dict[str, Any]:
    return read_graph(world)


def test_the_graph_moves_none_of_the_worlds_draws(tmp_path: Path) -> None:
    generate_world(tmp_path / "with", SPEC)
    generate_world(tmp_path / "without", dataclasses.replace(SPEC, graph=False))
    digests = {str(p.relative_to(tmp_path / "with")): _content(p) for p in sorted((tmp_path / "with").rglob("*.parquet"))
               if p.parent.name != GRAPH_DIR}
    assert digests.pop("truth/graph_conflicts.parquet")
    assert digests == BEFORE_THE_GRAPH
    graph_files = {GRAPH_DIR, *(f"{t}.parquet" for t in SCHEMAS)}
    assert {p.name for p in (tmp_path / "without").rglob("*")} == {p.name for p in (tmp_path / "with").rglob("*")} - {
        *graph_files, "graph_conflicts.parquet"}
    assert SPEC.key() == dataclasses.replace(SPEC, graph=True).key()  # existing world folders keep their key
    counts = json.loads((tmp_path / "with" / "world.json").read_text())["counts"]
    graph = _graph(tmp_path / "with")
    assert counts["references"] == sum(len(r) for r in graph["references"].values()) > 0
    assert counts["institutions"] == len(graph["institutions"]) and counts["affiliations"] > 0


def _works(world: Path) -> tuple[dict[str, tuple[str, set[str]]], dict[str, set[str]], dict[str, str]]:
    """(S2 id -> (date, true person ids) of every citable work, arXiv id -> its true authors, arXiv id
    -> published date), read from the world's files and truth, not from the graph."""
    truth = load_truth(world)
    team: dict[str, set[str]] = {}
    for aid, person in truth.mentions.select("arxiv_id", "person_id").iter_rows():
        team.setdefault(aid, set()).add(person)
    published = {r["arxiv_id"]: r["versions"][0]["date"].isoformat()
                 for r in pl.read_parquet(world / "arxiv.parquet").iter_rows(named=True)}
    works = {hashlib.sha1(a.encode()).hexdigest(): (published[a], team.get(a, set())) for a in published}
    people_of_s2: dict[str, set[str]] = {}
    for pid, ids in truth.persons.select("person_id", "s2_author_ids").iter_rows():
        for s2 in ids:
            people_of_s2.setdefault(s2, set()).add(pid)
    for s2, raw in pl.read_parquet(world / "s2_authors.parquet").iter_rows():
        for h in json.loads(raw):
            if not h["externalIds"].get("ArXiv"):
                when, authors = works.get(h["paperId"], (f"{h['publicationDate']}T00:00:00+00:00", set()))
                works[h["paperId"]] = (when, authors | people_of_s2.get(s2, set()))
    return works, team, published


def test_people_cite_their_own_and_their_coauthors_work_more(small_world: Path) -> None:
    works, team, published = _works(small_world)
    coauthors: dict[str, set[str]] = {}
    for members in team.values():
        for m in members:
            coauthors.setdefault(m, set()).update(members)
    observed, expected, n = 0.0, 0.0, 0
    for citing, refs in _graph(small_world)["references"].items():
        close = set().union(*(coauthors.get(m, set()) for m in team.get(citing, set())))
        earlier = [authors for when, authors in works.values() if when < published[citing]]
        share_close = sum(bool(a & close) for a in earlier) / len(earlier)
        for ref in refs:
            if ref["in_world"]:
                observed += bool(works[ref["s2_id"]][1] & close)
                expected += share_close
                n += 1
    assert n > 500, n
    # A uniform draw over the earlier works would give `expected`. Self- and co-author citation come at
    # the literature's rate, a share of the references whatever the world's size (citations.OWN_SHARE,
    # COAUTHOR_SHARE): several times a uniform draw in a world of realistic size, and still half again
    # as much in this small one, where the authors and their co-authors wrote a tenth of the earlier works.
    assert observed / n > 1.5 * expected / n


def test_a_fifth_to_a_third_of_references_lie_outside_the_world(small_world: Path) -> None:
    graph = _graph(small_world)
    _works_, _team, published = _works(small_world)
    refs = [r for rs in graph["references"].values() for r in rs]
    outside = [r for r in refs if not r["in_world"]]
    assert 0.2 <= len(outside) / len(refs) <= 0.3
    assert all(REFERENCES[0] <= len(rs) <= REFERENCES[1] for rs in graph["references"].values())
    assert all(r["arxiv_id"] is None and r["title"] and r["year"] for r in outside)  # title/year (and maybe a DOI) only
    assert any(r["s2_id"] is None for r in outside) and any(r["s2_id"] for r in outside)  # S2 matched some, not all
    for citing, rs in graph["references"].items():  # in-world references are to earlier works
        assert all(published[r["arxiv_id"]] < published[citing] for r in rs if r["arxiv_id"])


def _current_strings(world: Path, person: str) -> set[str]:
    """Every institution string the PDFs show for a person's mentions."""
    mentions = pl.read_parquet(world / "mentions.parquet").join(
        pl.read_parquet(world / "truth" / "mentions.parquet"), on=["arxiv_id", "position"])
    rows = mentions.filter(pl.col("person_id") == person)["affiliations"].to_list()
    return {a["institution"].strip().lower() for affs in rows for a in affs or [] if a["institution"]}


def test_one_conflict_only_the_graph_reveals(small_world: Path) -> None:
    truth = load_truth(small_world)
    [conflict] = truth.graph_conflicts.to_dicts()
    graph = _graph(small_world)
    end = json.loads((small_world / "world.json").read_text())["spec"]["end"][:4]
    ror = {i["index"]: i["ror"] for i in graph["institutions"]}

    def rors(pid: str, since: int) -> dict[str, str]:
        return {ror[a["inst"]]: a["name"] for a in graph["affiliations"][pid] if a["last_year"] >= since}

    window = int(end) - CONFLICT_WINDOW
    person, author = conflict["person_id"], conflict["author_id"]
    shared = set(rors(person, window)) & set(rors(author, window))
    assert shared == {conflict["ror"]}
    writers = truth.mentions.filter(pl.col("arxiv_id") == conflict["query_id"])["person_id"].to_list()
    assert author in writers and person not in writers
    # String matching of current affiliations misses it: the PDFs spell no institution alike, and
    # the graph's spelling of the former affiliation is none of the author's either.
    theirs, mine = _current_strings(small_world, author), _current_strings(small_world, person)
    assert theirs and mine and not theirs & mine
    assert rors(person, window)[conflict["ror"]].lower() not in theirs
    # The only former affiliation within the window is the planted one.
    recent_past = [(pid, a) for pid, rows in graph["affiliations"].items() for a in rows
                   if window <= a["last_year"] < int(end)]
    assert [pid for pid, _ in recent_past] == [person]
    # The query cites the person's earlier paper on its topic (citation recall finds them), and the
    # pools draw it first in its category, so a round of a few queries per category meets it.
    paper, query = conflict["detail"].rsplit(" ", 1)[-1], conflict["query_id"]
    assert paper in {r["arxiv_id"] for r in graph["references"][query]}
    assert person in truth.mentions.filter(pl.col("arxiv_id") == paper)["person_id"].to_list()
    assert truth.paper_topics[paper] == truth.paper_topics[query]
    category = dict(pl.read_parquet(small_world / "arxiv.parquet").select("arxiv_id", "primary_category").iter_rows())
    drawn = sorted((a for a, c in category.items() if c == category[query] and a not in set(truth.bad_records["arxiv_id"])),
                   key=lambda a: query_rank(PLANTED_QUERY_SEED, category[query], a))
    assert drawn[0] == query


@pytest.mark.parametrize("seed", [3, 8])
def test_every_world_plants_its_conflict(tmp_path: Path, seed: int) -> None:
    generate_world(tmp_path, dataclasses.replace(SPEC, seed=seed, extra_days=0))
    assert load_truth(tmp_path).graph_conflicts.height == 1


def test_the_world_command_writes_a_world_without_its_graph_on_request(tmp_path: Path) -> None:
    for flag, name in (("--graph", "with"), ("--no-graph", "without")):
        code, _out, err = run_cli("world", "--out", str(tmp_path / name), "--papers", "30", "--no-documents", flag)
        assert code == 0, err
    assert read_graph(tmp_path / "with") is not None and read_graph(tmp_path / "without") is None
    counts = {n: json.loads((tmp_path / n / "world.json").read_text())["counts"] for n in ("with", "without")}
    assert counts["with"]["references"] > 0 and "references" not in counts["without"]
