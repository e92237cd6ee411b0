"""The scholarly graph's identity evidence for disambiguation: the OpenAlex author id and ORCID of
each mention's authorship (``paper_authorships``, by the mention's place in the author list).

Precedence inside a name block (``tasks.disambiguate.decide_block``):

1. ORCIDs, the PDF's or the graph's: a shared one merges first; two different ones keep two sets
   apart whatever any later rule, id or decider asks (``Block.join``).
2. email, 3. affiliation: the exact rules, unchanged.
4. A shared OpenAlex author id merges what is left, before the decider, so blocks the ids settle
   cost no LLM call. It is weaker than an ORCID: OpenAlex profiles are sometimes merged namesakes,
   so a profile whose mentions carry two different ORCIDs or two different full given names is
   not used at all; and one person is often split over several profiles, so two different
   OpenAlex ids are never evidence of two people.

A position is trusted only when the authorship's name fits the mention's (same ``family|initial``
and, where both spell it out, the same given name) and its ORCID does not contradict the PDF's:
the graph's list and the PDF's can differ. Without a graph every mention has no ids here, and the
decisions and block hashes are exactly those of a warehouse before the graph.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Protocol

import polars as pl

from revbench.clients.tei import normalize_orcid
from revbench.keys import block_key, given_name

GRAPH_COLUMNS: tuple[str, ...] = ("graph_person", "graph_orcid", "graph_name")
"""What the warehouse gives of each mention's OpenAlex authorship (null without one)."""


class _HasIds(Protocol):
    key: str
    name: str
    given: str
    orcid: str | None
    openalex: str | None
    graph_orcid: str | None


class _Joins(Protocol):
    members: Any
    conflicts: Any
    orcids: dict[int, set[str]]
    uf: Any

    def join(self, a: int, b: int, how: str, why: str) -> bool: ...


def graph_rows(mentions: pl.DataFrame) -> list[tuple[str | None, str | None, str | None]]:
    """Each mention's ``(person_key, orcid, name)`` from the graph, all None where it has none."""
    if not set(GRAPH_COLUMNS) <= set(mentions.columns):
        return [(None, None, None)] * mentions.height
    return list(mentions.select(GRAPH_COLUMNS).iter_rows())


def names_fit(mention: str, authorship: str | None) -> bool:
    """Whether the authorship at a mention's place can be that mention: one ``family|initial`` and,
    where both spell it out, one given name (``J. Smith`` fits ``John Smith``, not ``Jane Smith``)."""
    if not authorship or block_key(mention) != block_key(authorship):
        return False
    a, b = given_name(mention), given_name(authorship)
    return not a or not b or a == b


def attach(m: _HasIds, person: str | None, orcid: str | None, name: str | None) -> None:
    """Give a mention its authorship's ids when the names fit and the ORCIDs agree; the graph's
    ORCID stands in for a PDF that shows none (so every rule's ORCID guard sees it)."""
    orcid = normalize_orcid(orcid)
    if not (person or orcid) or not names_fit(m.name, name) or (m.orcid and orcid and m.orcid != orcid):
        return  # another person's authorship at this place, or none: the mention keeps its own evidence
    m.openalex = person.removeprefix("openalex:") if person and person.startswith("openalex:") else None
    m.graph_orcid = orcid
    m.orcid = m.orcid or orcid


def hash_part(m: _HasIds) -> tuple[str, ...]:
    """What the graph adds to a mention's share of its block's hash: nothing without ids, so a
    graph-less block hashes as before; a block whose mentions gained ids is decided again."""
    return (m.openalex or "", m.graph_orcid or "") if m.openalex or m.graph_orcid else ()


def _keys(block: _Joins, idx: list[int]) -> str:
    return ", ".join(block.members[i].key for i in idx)


def join_graph_orcids(block: _Joins) -> None:
    """Mentions that share an ORCID the graph gave at least one of (the PDF's alone are
    ``Block.join_shared_ids``'s): merged as ``orcid``, the evidence naming the graph and the mentions."""
    by_orcid: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(block.members):
        if m.orcid:
            by_orcid[m.orcid].append(i)
    for orcid, idx in by_orcid.items():
        if len(idx) > 1 and any(block.members[i].graph_orcid for i in idx):
            for i in idx[1:]:
                block.join(idx[0], i, "orcid", f"ORCID {orcid} (OpenAlex authorships) of {_keys(block, idx)}")


def join_openalex(block: _Joins) -> None:
    """Mentions that share an OpenAlex author id, unless the profile shows two people: two
    different ORCIDs among its mentions' sets (counted as ``openalex_vs_orcid``) or two full given
    names."""
    by_id: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(block.members):
        if m.openalex:
            by_id[m.openalex].append(i)
    for author, idx in sorted(by_id.items()):
        if len(idx) < 2:
            continue
        orcids = set().union(*(block.orcids[block.uf.find(i)] for i in idx))
        if len(orcids) > 1:
            block.conflicts["openalex_vs_orcid"] += 1
            continue
        if len({block.members[i].given for i in idx} - {""}) > 1:
            continue
        for i in idx[1:]:
            block.join(idx[0], i, "openalex", f"OpenAlex author {author} of {_keys(block, idx)}")
