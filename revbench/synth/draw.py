"""The seeded draws of a SYNTHETIC world: the spec they follow, its people and research groups,
their papers, and the records planted among them (bad records, a conflict only a second
affiliation reveals). This is what the world is, before any service shows it
(:mod:`revbench.synth.answers`) and before it is written (:mod:`revbench.synth.world`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from revbench.synth.vocab import (
    ABSTRACT_TEMPLATES,
    FIRST_NAMES,
    INSTITUTIONS,
    LAST_NAMES,
    METHOD_WORDS,
    NOUNS,
    TITLE_FORMS,
    TITLE_QUALITIES,
    TITLE_THINGS,
    TOPICS,
)

SECOND_AFFILIATION_SHARE = 0.2
"""People with a second institution (7 of 16 real GROBID TEI samples have such authors)."""
ORCID_SHARE = 0.3
"""People with an ORCID; it shows on most, not all, of their papers."""
PLANTED_QUERY_SEED = 0
"""The pools seed (the default) under which the planted conflict's paper is drawn as a query."""
FOCUS_STREAM = 22
"""The stream of each person's niches and each work's focus: apart from the main stream, so focus
moves none of the people, teams, dates and texts' other words the main stream draws."""
FOCUS_SIZE = 3
"""Keywords a work is about (its focus), of its subtopic's eight."""
NICHE_SIZE = 4
"""Keywords of each of their subtopics a person works on most."""
NICHE_SHARE = 0.8
"""A focus keyword's chance of coming from the lead author's niche rather than the whole subtopic."""
BAD_KINDS: dict[str, str] = {
    "tei_no_abstract": "missing_abstract",
    "title_mismatch": "title_mismatch",
    "non_utf8": "corrupted_text",
    "truncated_pdf": "pdf_truncated",
    "no_authors": "missing_authors",
    "no_pdf": "pdf_unavailable",
}
"""Kinds of deliberately bad records and the reject reason each must end as."""


@dataclass(frozen=True)
class WorldSpec:
    """What to generate.

    ``extra_days`` grows the world past ``end``: the base world stays exactly as it is, and each
    day ``end + d`` (d = 1..extra_days) adds :meth:`papers_per_day` new single-version papers."""

    n_papers: int = 300
    seed: int = 7
    start: date = date(2026, 9, 1)
    end: date = date(2026, 10, 31)
    documents: bool = True
    bad_share: float = 0.01
    homonym_share: float = 0.06
    extra_days: int = 0
    graph: bool = True
    """Draw the scholarly graph (revbench.synth.graph); off, the world is as it was before it."""
    citation_link: float = 1.0
    """How strongly whom a paper cites follows its subject and the cited people's expertise: each
    in-world work's citation weight is raised to this power (1: calibrated, 0: blind to both;
    revbench.synth.citations). Only the measurement of what the graph is worth varies it."""

    def key(self) -> str:
        """A short hash of the spec; the spec of an ungrown world with a graph hashes as it did
        before ``extra_days``, ``graph`` and ``citation_link`` existed, so existing world folders keep their key."""
        d = dict(self.__dict__)
        if not d["extra_days"]:
            del d["extra_days"]
        if d["graph"]:
            del d["graph"]
        if d["citation_link"] == 1.0:
            del d["citation_link"]
        return hashlib.sha256(json.dumps(d, default=str, sort_keys=True).encode()).hexdigest()[:16]

    def base_key(self) -> str:
        """The key of the base world this spec grows from (``key()`` with ``extra_days=0``)."""
        return dataclasses.replace(self, extra_days=0).key()

    def papers_per_day(self) -> int:
        """How many papers each growth day adds: the base world's daily average, at least one."""
        return max(1, round(self.n_papers / ((self.end - self.start).days + 1)))



def ascii_fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


def _email_local(first: str, last: str) -> str:
    return ascii_fold(f"{first}.{last}").lower().replace(" ", "").replace("'", "")


@dataclass
class _Person:
    pid: str
    first: str
    last: str
    inst: int
    emails: list[str]
    s2_ids: list[str]
    topics: list[str]
    more_insts: list[int] = field(default_factory=list)
    """Institutions past the first (a second affiliation), in order."""
    orcid: str | None = None
    niches: dict[str, list[str]] = field(default_factory=dict)
    """Subtopic -> the keywords of it this person works on most (their works' focus leans on them)."""

    @property
    def insts(self) -> list[int]:
        return [self.inst, *self.more_insts]


def orcid_of(n: int) -> str:
    """A well-formed ORCID (ISO 7064 11,2 check digit) for the n-th person, in the 0009 block."""
    digits = f"0009{n:011d}"
    total = 0
    for d in digits:
        total = (total + int(d)) * 2
    check = (12 - total % 11) % 11
    full = digits + ("X" if check == 10 else str(check))
    return "-".join(full[i:i + 4] for i in range(0, 16, 4))


class Generator:
    """Seeded draws of people, groups and topic-coherent titles and abstracts."""

    def __init__(self, spec: WorldSpec, rng: np.random.Generator | None = None, stream: int = 0):
        self.spec = spec
        self.rng = np.random.default_rng(spec.seed) if rng is None else rng
        # The real-world quirks draw from their own stream, so adding one never shifts the
        # people, papers and texts the main stream draws.
        self.quirks = np.random.default_rng([spec.seed, stream, 21])
        self.focus_rng = np.random.default_rng([spec.seed, stream, FOCUS_STREAM])
        self.topic_ids = [f"{cat}/{sub}" for cat, subs in TOPICS.items() for sub in subs]

    def choice(self, seq: list[Any]) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def surnames(self, n_people: int) -> list[str]:
        """The listed surnames, extended with syllable-built ones until full names outnumber
        people tenfold, so that large worlds keep homonyms rare (as real corpora do) instead
        of crowding thousands of people into one name."""
        names = list(LAST_NAMES)
        need = -(-10 * n_people // len(FIRST_NAMES))
        onsets = ["B", "D", "F", "G", "H", "K", "L", "M", "N", "P", "R", "S", "T", "V", "W", "Z", "Ch", "Sh", "Br", "Kr"]
        vowels = ["a", "e", "i", "o", "u", "ai", "ei", "ou"]
        codas = ["n", "r", "s", "l", "k", "m", "sen", "berg", "ova", "ini", "ez", "ski", "ton", "ak"]
        seen = set(names)
        i = 0
        while len(names) < need:
            a, b, c, d = onsets[i % 20], vowels[(i // 20) % 8], onsets[(i // 160) % 20].lower(), codas[(i // 3200) % 14]
            extra = vowels[(i // 44800) % 8] if i >= 44800 else ""
            name = f"{a}{b}{c}{extra}{d}"
            if name not in seen:
                seen.add(name)
                names.append(name)
            i += 1
        return names

    def people(self, n: int) -> list[_Person]:
        people: list[_Person] = []
        last_names = self.surnames(n)
        names_used: dict[tuple[str, str], int] = {}
        for i in range(n):
            twin = None
            if people and self.rng.random() < self.spec.homonym_share:
                twin = people[int(self.rng.integers(len(people)))]
                first, last = twin.first, twin.last
            else:
                first, last = self.choice(FIRST_NAMES), self.choice(last_names)
            inst = int(self.rng.integers(len(INSTITUTIONS)))
            names_used[(first, last)] = names_used.get((first, last), 0) + 1
            local = _email_local(first, last)
            dup = names_used[(first, last)]
            local = local if dup == 1 else f"{local}{dup}"
            emails = [f"{local}@{INSTITUTIONS[inst][3]}"]
            if self.rng.random() < 0.15:
                emails.append(f"{local.replace('.', '')}{int(self.rng.integers(10, 99))}@mail.example")
            n_topics = 1 + int(self.rng.random() < 0.5) + int(self.rng.random() < 0.2)
            cat = self.choice(list(TOPICS))
            topics = [f"{cat}/{self.choice(list(TOPICS[cat]))}"]
            while len(topics) < n_topics:
                c2 = cat if self.rng.random() < 0.7 else self.choice(list(TOPICS))
                t = f"{c2}/{self.choice(list(TOPICS[c2]))}"
                if t not in topics:
                    topics.append(t)
            # Semantic Scholar's own disambiguation errs both ways: some homonyms share one
            # profile, some people are split over two.
            s2_ids = [twin.s2_ids[0] if twin is not None and self.rng.random() < 0.3 else str(10_000_000 + i)]
            if self.rng.random() < 0.08:
                s2_ids.append(str(20_000_000 + i))
            people.append(_Person(f"person_{i + 1:06d}", first, last, inst, emails, s2_ids, topics))
        for i, person in enumerate(people):
            if self.quirks.random() < SECOND_AFFILIATION_SHARE:
                person.more_insts = [(person.inst + 1 + int(self.quirks.integers(len(INSTITUTIONS) - 1))) % len(INSTITUTIONS)]
            if self.quirks.random() < ORCID_SHARE:
                person.orcid = orcid_of(i + 1)
        for person in people:
            for topic in person.topics:
                kws = TOPICS[topic.split("/")[0]][topic.split("/")[1]]
                person.niches[topic] = [kws[int(k)] for k in self.focus_rng.choice(len(kws), NICHE_SIZE, replace=False)]
        return people

    def focus(self, topic: str, niche: list[str] | None = None) -> list[str]:
        """The keywords a work on ``topic`` is about: mostly from its lead's ``niche``, so that
        people who share a subtopic still differ in what exactly they know (expertise is finer
        than any taxonomy, and text shows it)."""
        kws = TOPICS[topic.split("/")[0]][topic.split("/")[1]]
        out: list[str] = []
        while len(out) < FOCUS_SIZE:
            source = niche if niche and self.focus_rng.random() < NICHE_SHARE else kws
            k = source[int(self.focus_rng.integers(len(source)))]
            if k not in out:
                out.append(k)
        return out

    def groups(self, people: list[_Person]) -> list[list[int]]:
        by_inst: dict[int, list[int]] = {}
        for i, p in enumerate(people):
            by_inst.setdefault(p.inst, []).append(i)
        groups: list[list[int]] = []
        for members in by_inst.values():
            members = list(members)
            self.rng.shuffle(members)
            while members:
                size = int(self.rng.integers(3, 9))
                groups.append(members[:size])
                members = members[size:]
        return groups

    def title(self, topic: str, focus: list[str] | None = None) -> str:
        """A title on ``topic``; with ``focus``, on its first two keywords (the draws are the same
        either way, so a world's other draws do not depend on it)."""
        cat, sub = topic.split("/")
        kws = TOPICS[cat][sub]
        k = self.rng.choice(len(kws), 2, replace=False)
        adj, noun = self.choice(METHOD_WORDS), self.choice(NOUNS)
        pattern = int(self.rng.integers(4))
        a, b = (focus[0], focus[1]) if focus else (kws[k[0]], kws[k[1]])
        if pattern == 0:
            return f"{adj} {a.title()} for {b.title()}"
        if pattern == 1:
            return f"Towards {adj} {a.title()}: A {noun} Based on {b.title()}"
        if pattern == 2:
            return f"On the Role of {a.title()} in {b.title()}"
        return f"{a.title()} Meets {b.title()}: An {adj} {noun}"

    def abstract(self, topic: str, title: str, focus: list[str] | None = None) -> str:
        """An abstract on ``topic``; with ``focus``, on its keywords alone (same draws either way)."""
        cat, sub = topic.split("/")
        kws = list(TOPICS[cat][sub])
        self.rng.shuffle(kws)
        if focus:
            # Every keyword place speaks of the focus (the later ones again): an abstract says what
            # it is about, and text scorers then read expertise as well as on real abstracts.
            kws = [*focus, focus[0], focus[1]]
        name = "".join(w[0] for w in title.split() if w[0].isupper())[:6] or "ours"
        fills = {f"k{i}": kws[i % len(kws)] for i in range(5)}
        idx = sorted(self.rng.choice(len(ABSTRACT_TEMPLATES), 5, replace=False))
        return " ".join(
            ABSTRACT_TEMPLATES[i].format(name=name, adj=self.choice(METHOD_WORDS).lower(), **fills) for i in idx
        )



@dataclass
class _Paper:
    arxiv_id: str
    topic: str
    title: str
    abstract: str
    team: list[int]
    versions: list[tuple[int, datetime]]
    published: datetime
    primary_category: str
    categories: list[str]
    planted: bool = False
    """The planted second-affiliation conflict's paper: its authors show every institution."""
    focus: list[str] = field(default_factory=list)
    """The keywords of its subtopic the paper is about (``Generator.focus``)."""



def query_rank(seed: int, category: str, arxiv_id: str) -> str:
    """The order in which pools draw a category's queries (``tasks.pools._rank``; a test keeps
    the two equal, since the world may not import the pipeline)."""
    return hashlib.sha1("\x1f".join((str(seed), category, arxiv_id)).encode()).hexdigest()



def plant_affiliation_conflict(people: list[_Person], papers: list[_Paper], bad: set[int]) -> list[dict[str, str]]:
    """A conflict only a second affiliation reveals: a new person whose FIRST institution is
    none of a query paper's authors' but whose SECOND is one author's, writing a near copy of
    that paper (so pools recall them for it) and no paper with anyone.

    The query is the paper the pools draw first in its category (seed ``PLANTED_QUERY_SEED``), so
    the demo meets it. Appends the person and the paper; returns the planted pairs for the truth."""
    good = [(i, p) for i, p in enumerate(papers) if i not in bad]
    if not good:
        return []
    category = min(p.primary_category for _, p in good)
    _, query = min(((i, p) for i, p in good if p.primary_category == category),
                   key=lambda ip: query_rank(PLANTED_QUERY_SEED, category, ip[1].arxiv_id))
    author = people[query.team[0]]
    taken = {i for m in query.team for i in people[m].insts}
    first = next(i for i in range(len(INSTITUTIONS)) if i not in taken)
    surnames = {p.last for p in people}
    last = next(n for n in ("Quillfeather", "Thistlewood", "Marchbanks", "Fennimore-Vale") if n not in surnames)
    n = len(people) + 1
    local = _email_local(FIRST_NAMES[0], last)
    people.append(_Person(f"person_{n:06d}", FIRST_NAMES[0], last, first, [f"{local}@{INSTITUTIONS[first][3]}"],
                          [str(30_000_000 + n)], [query.topic], [author.inst], orcid_of(n)))
    # Dated at the query's latest version: a query first published before the window (revised in it)
    # would otherwise leave its copy out of every crawl of the window, and the conflict unmet.
    when = query.versions[-1][1]
    yymm = when.strftime("%y%m")
    seq = max((int(p.arxiv_id.split(".")[1]) for p in papers if p.arxiv_id.startswith(yymm + ".")), default=0)
    query.planted = True
    papers.append(_Paper(f"{yymm}.{seq + 1:05d}", query.topic, f"Revisiting {query.title}", query.abstract, [n - 1],
                         [(1, when)], when, query.primary_category, list(query.categories), True, list(query.focus)))
    return [dict(query_id=query.arxiv_id, person_id=f"person_{n:06d}", kind="second_affiliation",
                 detail=f"first institution {INSTITUTIONS[first][0]}, second {INSTITUTIONS[author.inst][0]} "
                        f"(that of {author.pid}, an author of the query)")]


def draw_papers(g: Generator, people: list[_Person], groups: list[list[int]],
                progress: Callable[[str, int, int], None] | None = None) -> list[_Paper]:
    """Papers written by research groups (plus an occasional outsider), on one of the lead
    author's topics, with one to three versions inside the window."""
    spec = g.spec
    group_sizes = np.array([len(gr) for gr in groups], dtype=float)
    group_p = group_sizes / group_sizes.sum()
    start_dt = datetime(spec.start.year, spec.start.month, spec.start.day, tzinfo=UTC)
    span = (datetime(spec.end.year, spec.end.month, spec.end.day, 23, 59, tzinfo=UTC) - start_dt).total_seconds()
    month_seq: dict[str, int] = {}
    papers: list[_Paper] = []
    for i in range(spec.n_papers):
        topic, team = draw_team(g, people, groups, group_p)
        updated = start_dt + timedelta(seconds=int(g.rng.random() * span))
        n_versions = 1 + int(g.rng.random() < 0.22) + int(g.rng.random() < 0.08)
        published = updated - timedelta(days=int(g.rng.integers(0, 90)) if n_versions > 1 else 0, hours=0)
        versions = [(v, published + (updated - published) * ((v - 1) / max(n_versions - 1, 1)))
                    for v in range(1, n_versions + 1)]
        yymm = published.strftime("%y%m")
        month_seq[yymm] = month_seq.get(yymm, 0) + 1
        papers.append(draw_text(g, f"{yymm}.{month_seq[yymm]:05d}", topic, team, versions, published, people))
        if progress and i % 1000 == 0:
            progress("papers", i, spec.n_papers)
    return papers


def draw_team(g: Generator, people: list[_Person], groups: list[list[int]],
               group_p: np.ndarray) -> tuple[str, list[int]]:
    """A paper's topic and author list: a group, a lead, some of the lead's group, maybe an outsider."""
    grp = groups[int(g.rng.choice(len(groups), p=group_p))]
    lead = grp[int(g.rng.integers(len(grp)))]
    topic = g.choice(people[lead].topics)
    n_auth = int(min(len(grp), max(1, g.rng.poisson(2.3) + 1)))
    team = [lead] + [m for m in g.rng.permutation(grp).tolist() if m != lead][: n_auth - 1]
    if g.rng.random() < 0.25:
        outsider = int(g.rng.integers(len(people)))
        if outsider not in team:
            team.append(outsider)
    g.rng.shuffle(team)
    return topic, team


def draw_text(g: Generator, arxiv_id: str, topic: str, team: list[int], versions: list[tuple[int, datetime]],
              published: datetime, people: list[_Person] | None = None) -> _Paper:
    """The rest of a paper: its categories, focus, title and abstract (the focus leans on the
    niche of the first author of ``team`` who works on ``topic``)."""
    cat = topic.split("/")[0]
    cats = [cat]
    if g.rng.random() < 0.3:
        cats.append(g.choice([c for c in TOPICS if c != cat]))
    niche = next((people[m].niches[topic] for m in team if topic in people[m].niches), None) if people else None
    focus = g.focus(topic, niche)
    title = g.title(topic, focus)
    return _Paper(arxiv_id, topic, distinct_title(title, arxiv_id), g.abstract(topic, title, focus), team, versions,
                  published, cat, cats, focus=focus)


def distinct_title(base: str, ident: str) -> str:
    """``base`` (a drawn title) with an ending picked by ``ident`` (the work's own id), so that two
    works' titles differ as real ones do: the drawn titles repeat (one in 16 of a 160k world's
    works had a title of its own; 1.75% of the CMU gold standard's papers share one). A hash, not
    the world's draws: every other draw of the world stays as it was."""
    n = int.from_bytes(hashlib.blake2b(ident.encode(), digest_size=8).digest(), "big")
    n, form = divmod(n, len(TITLE_FORMS))
    n, quality = divmod(n, len(TITLE_QUALITIES))
    return TITLE_FORMS[form].format(t=base, a=TITLE_QUALITIES[quality], b=TITLE_THINGS[n % len(TITLE_THINGS)])


def plant_bad_records(g: Generator, spec: WorldSpec, n_papers: int) -> dict[int, str]:
    """Paper index -> kind of deliberately bad record (the same number of each kind)."""
    n_bad = max(1, round(n_papers * spec.bad_share)) if n_papers >= 30 else 0
    order = g.rng.permutation(n_papers).tolist()
    return {order[k * n_bad + j]: kind for k, kind in enumerate(BAD_KINDS) for j in range(n_bad)}
