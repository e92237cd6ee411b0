"""Author disambiguation: precision first, in the LR-bench order of evidence.

Mentions are blocked by ``family|initial``. Inside a block, a union-find merges mentions that
share an ORCID (the strongest evidence: two different ORCIDs never merge, whatever else agrees),
then mentions that share a normalised email (any one of their addresses); then mentions that
share an exact normalised affiliation when one side has no email, then mentions that share an
OpenAlex author id (``tasks.disambiguate_ids``, which also lends the graph's ORCIDs); what is left is decided by a
*decider*: the LLM (``tasks.llm_clusters``) or, offline, the fallback here (alias table, then a
conservative fuzzy match). Anything not merged by one of these stays apart: a wrong split costs
recall, a wrong merge puts a stranger's papers in a profile.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
from rapidfuzz import fuzz

from revbench.clients.tei import normalize_orcid
from revbench.keys import block_key, given_name, normalize_affiliation, normalize_email

if TYPE_CHECKING:
    from revbench.settings import DisambiguateSettings
from revbench.tasks.disambiguate_ids import attach, graph_rows, hash_part, join_graph_orcids, join_openalex
from revbench.tasks.normalize import canonical_institution
from revbench.workers import map_unordered

METHOD_VERSION = "3"
"""Bump when a rule changes so every block is decided again."""


@dataclass
class Mention:
    """One author mention with its normalised evidence."""

    key: str
    name: str
    email: str | None
    aff: str | None
    raw_aff: str | None
    s2: str | None
    given: str
    coauthors: tuple[str, ...] = ()
    title: str | None = None
    affs: tuple[str, ...] = ()
    """Every affiliation's exact-match key, in order (``aff`` is the first)."""
    raw_affs: tuple[str, ...] = ()
    """Every affiliation as shown (``raw_aff`` is the first)."""
    orcid: str | None = None
    emails: tuple[str, ...] = ()
    """Every normalised address (``email`` is the first); any one shared is an exact match."""
    openalex: str | None = None
    graph_orcid: str | None = None  # the graph's ids at the mention's place (tasks.disambiguate_ids.attach)

    def __post_init__(self) -> None:
        if self.email and not self.emails:
            self.emails = (self.email,)


def _disjoint(a: set[str] | tuple[str, ...], b: set[str] | tuple[str, ...]) -> bool:
    """Both sides carry ids (ORCIDs, S2 ids) and share none: evidence of two people."""
    return bool(a and b and not set(a) & set(b))


def _affiliations(inst: str | None, aff: str | None, structured: list[dict[str, Any]] | None) -> list[tuple[str, str]]:
    """(key, as shown) for every affiliation of a mention, first one first, each once."""
    out: list[tuple[str, str]] = []
    candidates = [(inst, aff)] + [(a.get("institution"), a.get("text") or a.get("department")) for a in structured or []]
    for i, a in candidates:
        key = normalize_affiliation(i, a)
        if key and key not in {k for k, _ in out}:
            out.append((key, (i or a) or key))
    return out


@dataclass
class Instance:
    """A cluster after the exact rules, as a decider sees it (numbered from 1 in prompts)."""

    members: list[int]
    names: list[str]
    affiliations: list[str]
    emails: list[str]
    s2_ids: list[str]
    coauthors: list[str] = field(default_factory=list)
    """Names of the people the mentions wrote with (what tells two homonyms apart)."""
    titles: list[str] = field(default_factory=list)
    """Titles of the papers, for topics."""
    orcids: list[str] = field(default_factory=list)


@dataclass
class Decision:
    """A decider's grouping of a block's instances, with what it rests on."""

    groups: list[list[int]]
    method: str
    evidence: str = ""
    record: dict[str, Any] | None = None


Decider = Callable[[str, list[Instance]], Decision]


class UnionFind:
    """Disjoint sets with a flag per set (here: "has an email"), OR-ed on union."""

    def __init__(self, n: int, flags: list[bool] | None = None):
        self.parent = list(range(n))
        self.flag = list(flags) if flags is not None else [False] * n

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        lo, hi = min(ra, rb), max(ra, rb)
        self.parent[hi] = lo
        self.flag[lo] = self.flag[lo] or self.flag[hi]
        return True

    def sets(self) -> list[list[int]]:
        """Each set's members, in order; the sets in order of their first member."""
        groups: dict[int, list[int]] = defaultdict(list)
        for i in range(len(self.parent)):
            groups[self.find(i)].append(i)
        return list(groups.values())


@dataclass
class BlockResult:
    """Links of one block: mention key -> (cluster id, method, evidence)."""

    links: list[tuple[str, str, str, str]]
    merges: Counter[str] = field(default_factory=Counter)
    conflicts: Counter[str] = field(default_factory=Counter)
    """Merges other evidence asked for and ORCIDs refused (e.g. ``email_vs_orcid``)."""
    decisions: list[dict[str, Any]] = field(default_factory=list)


def mentions_frame_to_blocks(mentions: pl.DataFrame, max_block: int) -> tuple[dict[str, list[Mention]], list[str]]:
    """Group mentions by block key; a block over ``max_block`` is split by full given name,
    then deterministically by hash, and reported."""
    blocks: dict[str, list[Mention]] = defaultdict(list)
    cols = ["arxiv_id", "position", "name", "email", "institution", "affiliation", "s2_author_id"]
    titles = mentions["title"].to_list() if "title" in mentions.columns else [None] * mentions.height
    structured = mentions["affiliations"].to_list() if "affiliations" in mentions.columns else [None] * mentions.height
    orcids = mentions["orcid"].to_list() if "orcid" in mentions.columns else [None] * mentions.height
    # Mentions loaded before every address was kept have ``emails`` null: their one ``email`` stands in.
    addresses = mentions["emails"].to_list() if "emails" in mentions.columns else [None] * mentions.height
    names_of: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for aid, pos, name in mentions.select("arxiv_id", "position", "name").iter_rows():
        names_of[aid].append((pos, name))
    rows = zip(mentions.select(cols).iter_rows(), titles, structured, orcids, addresses, graph_rows(mentions), strict=True)
    for (aid, pos, name, email, inst, aff, s2), title, affs, orcid, emails, graph in rows:
        co = tuple(n for p, n in sorted(names_of[aid]) if p != pos)
        every = _affiliations(inst, aff, affs)
        normal = tuple(dict.fromkeys(e for e in map(normalize_email, [email, *(emails or [])]) if e))
        m = Mention(f"{aid}:{pos}", name, normal[0] if normal else None, every[0][0] if every else None,
                    every[0][1] if every else None, s2, given_name(name), co, title,
                    tuple(k for k, _ in every), tuple(r for _, r in every), normalize_orcid(orcid), normal)
        attach(m, *graph)
        blocks[block_key(name)].append(m)
    split: list[str] = []
    for key in [k for k, v in blocks.items() if len(v) > max_block]:
        members = blocks.pop(key)
        split.append(key)
        by_given: dict[str, list[Mention]] = defaultdict(list)
        for m in members:
            by_given[m.given].append(m)
        for given, group in by_given.items():
            if len(group) <= max_block:
                blocks[f"{key}|{given}"] = group
                continue
            for m in group:
                bucket = int(hashlib.sha1(m.key.encode()).hexdigest(), 16) % (len(group) // max_block + 1)
                blocks[f"{key}|{given}|{bucket}"].append(m)
    return dict(blocks), split


def base_key(key: str) -> str:
    """The name block (``family|initial``) a block key belongs to, before any split of an
    oversized block (``family|initial|given[|bucket]``)."""
    return "|".join(key.split("|")[:2])


def block_hash(key: str, members: list[Mention], decider_name: str) -> str:
    """What a block's decision depends on; unchanged hash, nothing to redo."""
    # Every address, joined: a mention with one address hashes as it did before more were kept.
    rows = sorted((m.key, m.name, " ".join(m.emails), list(m.affs), m.s2 or "", list(m.coauthors), m.title or "", m.orcid or "",
                   *hash_part(m)) for m in members)
    return hashlib.sha256(json.dumps([key, rows, decider_name, METHOD_VERSION]).encode()).hexdigest()


def cluster_id(keys: Iterable[str]) -> str:
    """Stable author id: a hash of the cluster's first mention key."""
    return "author_" + hashlib.sha1(min(keys).encode()).hexdigest()[:12]


def instances_of(members: list[Mention], uf: UnionFind) -> list[Instance]:
    out = []
    for idx in uf.sets():
        ms = [members[i] for i in idx]
        out.append(Instance(
            members=idx,
            names=sorted({m.name for m in ms}),
            affiliations=sorted({r for m in ms for r in m.raw_affs}),
            emails=sorted({e for m in ms for e in m.emails}),
            s2_ids=sorted({m.s2 for m in ms if m.s2}),
            coauthors=sorted({c for m in ms for c in m.coauthors}),
            titles=sorted({m.title for m in ms if m.title}),
            orcids=sorted({m.orcid for m in ms if m.orcid}),
        ))
    return out


def _aff_keys(inst: Instance) -> set[str]:
    return {k for a in inst.affiliations if (k := normalize_affiliation(a))}


def orcid_conflict(a: Instance, b: Instance) -> bool:
    """Both sides carry ORCIDs and none is shared: two people, whatever else agrees."""
    return _disjoint(a.orcids, b.orcids)


def compatible_names(a: Instance, b: Instance) -> bool:
    """Full given names, where both sides spell one out, must agree (``J.`` fits any)."""
    ga = {given_name(n) for n in a.names} - {""}
    gb = {given_name(n) for n in b.names} - {""}
    return not ga or not gb or bool(ga & gb)


def affiliation_similarity(a: Instance, b: Instance) -> float:
    """Best similarity in [0, 1] between two instances' affiliations (1 for known aliases)."""
    best = 0.0
    for ka in _aff_keys(a):
        for kb in _aff_keys(b):
            ca, cb = canonical_institution(ka), canonical_institution(kb)
            if ka == kb or (ca is not None and ca == cb):
                return 1.0
            best = max(best, fuzz.token_set_ratio(ka, kb) / 100)
    return best


def needs_decision(instances: list[Instance], min_similarity: float) -> bool:
    """Whether any two instances could plausibly be one person (otherwise no LLM call)."""
    cands = [i for i in instances if i.affiliations]
    for x in range(len(cands)):
        for y in range(x + 1, len(cands)):
            a, b = cands[x], cands[y]
            if orcid_conflict(a, b):
                continue
            if compatible_names(a, b) and (set(a.s2_ids) & set(b.s2_ids) or affiliation_similarity(a, b) >= min_similarity):
                return True
    return False


def fallback_decider(threshold: float) -> Decider:
    """Offline decisions: merge two instances when their institutions are known aliases or
    their affiliations match at ``threshold`` or above, their given names agree, and they do
    not both carry (different) emails."""

    def decide(key: str, instances: list[Instance]) -> Decision:
        uf = UnionFind(len(instances))
        emails = [set(i.emails) for i in instances]  # per set root, kept up to date on union
        orcids = [set(i.orcids) for i in instances]
        n = len(instances)
        sims = {}
        for x in range(n):
            for y in range(x + 1, n):
                a, b = instances[x], instances[y]
                if a.affiliations and b.affiliations and compatible_names(a, b):
                    sims[(x, y)] = affiliation_similarity(a, b)
        # An email-less instance that fits people with different addresses is ambiguous: apart.
        ambiguous = set()
        for x in range(n):
            if not instances[x].emails:
                fits = {tuple(instances[y].emails) for y in range(n) if y != x and instances[y].emails
                        and sims.get((min(x, y), max(x, y)), 0.0) >= threshold}
                if len(fits) > 1:
                    ambiguous.add(x)
        evidence = []
        for x in range(n):
            for y in range(x + 1, n):
                a, b = instances[x], instances[y]
                if (x, y) not in sims or x in ambiguous or y in ambiguous:
                    continue
                if _disjoint(a.s2_ids, b.s2_ids):
                    continue
                ex, ey = emails[uf.find(x)], emails[uf.find(y)]
                if ex and ey and ex != ey:  # two addresses: maybe two people, so never by fallback
                    continue
                ox, oy = orcids[uf.find(x)], orcids[uf.find(y)]
                if _disjoint(ox, oy):
                    continue
                sim = sims[(x, y)]
                if sim >= threshold and uf.union(x, y):
                    emails[uf.find(x)] = ex | ey
                    orcids[uf.find(x)] = ox | oy
                    evidence.append(f"{a.affiliations[0]} ~ {b.affiliations[0]} ({sim:.2f})")
        return Decision(sorted([i + 1 for i in s] for s in uf.sets()), "fallback", "; ".join(evidence))

    return decide


class Block:
    """One block's mentions while they merge: the sets so far (flagged "has an email"), each
    set's ORCIDs and S2 ids (kept up to date on every union), what merged each mention and why."""

    def __init__(self, members: list[Mention]):
        self.members, self.uf = members, UnionFind(len(members), [bool(m.emails) for m in members])
        self.why: dict[int, tuple[str, str]] = {}  # what first merged each mention: (method, evidence)
        self.merges, self.conflicts = Counter[str](), Counter[str]()
        self.orcids: dict[int, set[str]] = {i: ({m.orcid} if m.orcid else set()) for i, m in enumerate(members)}
        self.s2_sets: dict[int, set[str]] = {i: ({m.s2} if m.s2 else set()) for i, m in enumerate(members)}

    def join(self, a: int, b: int, how: str, why: str) -> bool:
        """Merge the sets of ``a`` and ``b``, unless they carry different ORCIDs (a conflict)."""
        uf, ra, rb = self.uf, self.uf.find(a), self.uf.find(b)
        if ra == rb:
            return False
        if _disjoint(self.orcids[ra], self.orcids[rb]):
            self.conflicts[f"{how}_vs_orcid"] += 1
            return False
        o, s2 = self.orcids[ra] | self.orcids[rb], self.s2_sets[ra] | self.s2_sets[rb]
        uf.union(a, b)
        self.orcids[uf.find(a)], self.s2_sets[uf.find(a)] = o, s2
        self.merges[how] += 1
        for i in (a, b):
            self.why.setdefault(i, (how, why))
        return True

    def join_shared_ids(self) -> None:
        """Mentions that share an ORCID, then mentions that share an email address."""
        by_orcid: dict[str, list[int]] = defaultdict(list)
        by_email: dict[str, list[int]] = defaultdict(list)
        for i, m in enumerate(self.members):
            if m.orcid:
                by_orcid[m.orcid].append(i)
            for e in m.emails:
                by_email[e].append(i)
        for how, label, groups in (("orcid", "ORCID", by_orcid), ("email", "email", by_email)):
            for value, idx in groups.items():
                for i in idx[1:]:
                    self.join(idx[0], i, how, f"{label} {value}")

    def join_by_affiliation(self) -> None:
        """Email-less mentions join the one emailed person at their affiliation (several there: only
        each other), and only where all their affiliations point to the same people."""
        uf, by_aff = self.uf, defaultdict[str, list[int]](list)
        for i, m in enumerate(self.members):
            for a in m.affs:
                by_aff[a].append(i)
        # Who has an email is fixed before this step: a mention joined here does not become an
        # anchor for its other affiliations.
        bare_now = [not uf.flag[uf.find(i)] for i in range(len(self.members))]
        emailed_at = {aff: {uf.find(i) for i in idx if not bare_now[i]} for aff, idx in by_aff.items()}
        for aff, idx in by_aff.items():
            emailed, bare = sorted(emailed_at[aff]), [i for i in idx if bare_now[i]]
            anchor = emailed[0] if len(emailed) == 1 else (bare[0] if bare else None)
            if anchor is None:
                continue
            near = {uf.find(anchor)} if len(emailed) == 1 else self.emailed_near(anchor, emailed_at)
            for i in bare:  # a mention's second institution may hold a namesake with an address
                g1, g2 = self.members[i].given, self.members[anchor].given
                if self.emailed_near(i, emailed_at) != near or (g1 and g2 and g1 != g2) or uf.find(i) == uf.find(anchor):
                    continue
                mine, theirs = self.s2_sets[uf.find(i)], self.s2_sets[uf.find(anchor)]
                if not _disjoint(mine, theirs):  # S2 ids are evidence against, never alone for (S2 also errs)
                    shared = mine & theirs
                    why = f"affiliation {aff}" + (f"; S2 author id {min(shared)} agrees" if shared else "")
                    self.join(anchor, i, "affiliation", why)

    def emailed_near(self, i: int, emailed_at: dict[str, set[int]]) -> set[int]:
        """The emailed people at any of a mention's affiliations (roots as they are now)."""
        return {self.uf.find(r) for a in self.members[i].affs for r in emailed_at[a]}

    def ask(self, key: str, decider: Decider | None, min_similarity: float) -> list[dict[str, Any]]:
        """Let the decider group what the exact rules left apart; its recorded decisions."""
        instances = instances_of(self.members, self.uf)
        if decider is None or len(instances) <= 1 or not needs_decision(instances, min_similarity):
            return []
        # Instances without an affiliation are never grouped with others: they are not shown.
        shown = [inst for inst in instances if inst.affiliations]
        decision = decider(key, shown)
        for group in decision.groups:
            for g in group[1:]:
                self.join(shown[group[0] - 1].members[0], shown[g - 1].members[0], decision.method, decision.evidence)
        return [{**decision.record, "block_key": key}] if decision.record else []

    def links(self) -> list[tuple[str, str, str, str]]:
        """Each mention's (key, cluster id, method, evidence), cluster by cluster."""
        out = []
        for idx in self.uf.sets():
            cid = cluster_id(self.members[i].key for i in idx)
            out += [(self.members[i].key, cid, *self.why.get(i, ("singleton", ""))) for i in idx]
        return out


def decide_block(key: str, members: list[Mention], decider: Decider | None, min_similarity: float) -> BlockResult:
    """Run the hierarchy on one block: ORCID, email, affiliation, OpenAlex author id, then the
    decider; no step ever joins two sets that carry different ORCIDs."""
    block = Block(members)
    join_graph_orcids(block)
    block.join_shared_ids()
    block.join_by_affiliation()
    join_openalex(block)
    decisions = block.ask(key, decider, min_similarity)
    return BlockResult(block.links(), block.merges, block.conflicts, decisions)


@dataclass
class Outcome:
    """What one disambiguation pass decided: rows for the warehouse and counts for curators."""

    links: pl.DataFrame
    blocks: pl.DataFrame
    decisions: list[dict[str, Any]]
    drop_blocks: list[str]
    merges: Counter[str]
    blocks_total: int
    blocks_decided: int
    split_blocks: list[str]
    block_sizes: Counter[int]
    conflicts: Counter[str] = field(default_factory=Counter)
    """Merges refused because the two sides carry different ORCIDs, by the evidence that asked."""


def disambiguate(
    mentions: pl.DataFrame,
    known_hashes: dict[str, str],
    decider: Decider | None,
    decider_name: str,
    max_block: int,
    min_similarity: float,
    now: Any,
    concurrency: int = 1,
    progress: Callable[[int, int], None] | None = None,
    only: set[str] | None = None,
) -> Outcome:
    """Decide every block whose inputs changed since ``known_hashes``; the rest is kept.
    ``progress(done, total)`` is called after each block decided. With ``only`` (name blocks
    before splits), ``mentions`` holds every mention of those name blocks and of their papers
    (for the co-authors), and only those name blocks are considered: ``known_hashes`` need hold
    no others."""
    blocks, split = mentions_frame_to_blocks(mentions, max_block)
    if only is not None:
        # The co-authors' own blocks are partial here: theirs are left to their own pass.
        blocks = {k: v for k, v in blocks.items() if base_key(k) in only}
        split = [k for k in split if k in only]
    hashes = {k: block_hash(k, v, decider_name) for k, v in blocks.items()}
    todo = sorted(k for k, h in hashes.items() if known_hashes.get(k) != h)
    drop = sorted(set(known_hashes) - set(blocks))

    def run(k: str) -> tuple[str, BlockResult]:
        return k, decide_block(k, blocks[k], decider, min_similarity)

    # Deciders that call an LLM spend their time waiting; threads overlap those waits.
    decided = map_unordered(run, todo, concurrency) if concurrency > 1 and decider is not None else map(run, todo)
    by_key: dict[str, BlockResult] = {}
    for k, res in decided:
        by_key[k] = res
        if progress:
            progress(len(by_key), len(todo))
    results = [by_key[k] for k in todo]
    merges: Counter[str] = Counter()
    conflicts: Counter[str] = Counter()
    link_rows, block_rows, decisions = [], [], []
    for k, res in zip(todo, results, strict=True):
        merges.update(res.merges)
        conflicts.update(res.conflicts)
        decisions.extend(res.decisions)
        for key, cid, method, evidence in res.links:
            aid, _, pos = key.rpartition(":")
            link_rows.append((aid, int(pos), cid, method, evidence[:500], k))
        block_rows.append((k, hashes[k], len(blocks[k]), len({c for _, c, _, _ in res.links}), decider_name, now))
    links = pl.DataFrame(link_rows, schema=["arxiv_id", "position", "author_id", "method", "evidence", "block_key"], orient="row")
    block_df = pl.DataFrame(block_rows, schema=["block_key", "input_hash", "n_mentions", "n_authors", "decider", "decided_at"], orient="row")
    sizes = Counter(len(v) for v in blocks.values())
    return Outcome(links, block_df, decisions, drop, merges, len(blocks), len(todo), split, sizes, conflicts)


def block_scope(decider_name: str, d: DisambiguateSettings) -> dict[str, Any]:
    """What decides which name blocks exist and what their input hashes are: a pass under
    another scope than the last one's checks every block."""
    return {"decider": decider_name, "method_version": METHOD_VERSION, "max_block_size": d.max_block_size}
