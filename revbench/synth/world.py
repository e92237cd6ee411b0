"""A seeded SYNTHETIC world: papers, people and the services' answers about them, plus the truth.

The world stands in for arXiv, Semantic Scholar and GROBID in the demo, tests and benchmarks.
Its people have homonyms, several emails, institution aliases and missing fields; a few of its
records are deliberately bad. The hidden truth (who wrote what, who knows what) is written
beside it so later stages can measure themselves. Every artefact says it is synthetic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.synth import render
from revbench.synth.vocab import (
    ABSTRACT_TEMPLATES,
    FIRST_NAMES,
    INSTITUTIONS,
    LAST_NAMES,
    METHOD_WORDS,
    NOUNS,
    TOPICS,
)

WORLD_FORMAT = 4
"""Bumped when what a world holds changes (4: second affiliations, orphan affiliations, ORCIDs,
the planted second-affiliation conflict), so cached worlds are regenerated."""
SECOND_AFFILIATION_SHARE = 0.2
"""People with a second institution (7 of 16 real GROBID TEI samples have such authors)."""
ORPHAN_AFFILIATION_SHARE = 0.05
"""Papers whose TEI carries an affiliation as an ``<author>`` without a ``<persName>``."""
ORCID_SHARE = 0.3
"""People with an ORCID; it shows on most, not all, of their papers."""
ORCID_SHOWN = 0.85
PLANTED_QUERY_SEED = 0
"""The pools seed (the default) under which the planted conflict's paper is drawn as a query."""
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

    def key(self) -> str:
        """A short hash of the spec; the spec of an ungrown world hashes as it did before
        ``extra_days`` existed, so existing world folders keep their key."""
        d = dict(self.__dict__)
        if not d["extra_days"]:
            del d["extra_days"]
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
        return people

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

    def title(self, topic: str) -> str:
        cat, sub = topic.split("/")
        kws = TOPICS[cat][sub]
        k = self.rng.choice(len(kws), 2, replace=False)
        adj, noun = self.choice(METHOD_WORDS), self.choice(NOUNS)
        pattern = int(self.rng.integers(4))
        a, b = kws[k[0]], kws[k[1]]
        if pattern == 0:
            return f"{adj} {a.title()} for {b.title()}"
        if pattern == 1:
            return f"Towards {adj} {a.title()}: A {noun} Based on {b.title()}"
        if pattern == 2:
            return f"On the Role of {a.title()} in {b.title()}"
        return f"{a.title()} Meets {b.title()}: An {adj} {noun}"

    def abstract(self, topic: str, title: str) -> str:
        cat, sub = topic.split("/")
        kws = list(TOPICS[cat][sub])
        self.rng.shuffle(kws)
        name = "".join(w[0] for w in title.split() if w[0].isupper())[:6] or "ours"
        fills = {f"k{i}": kws[i % len(kws)] for i in range(5)}
        idx = sorted(self.rng.choice(len(ABSTRACT_TEMPLATES), 5, replace=False))
        return " ".join(
            ABSTRACT_TEMPLATES[i].format(name=name, adj=self.choice(METHOD_WORDS).lower(), **fills) for i in idx
        )


def _render_affiliation(g: Generator, inst: int, rng: np.random.Generator | None = None) -> tuple[str | None, str | None]:
    canonical, aliases, dept, _domain = INSTITUTIONS[inst]
    r = (rng or g.rng).random()
    if r < 0.08:
        return None, None
    if r < 0.55:
        return dept, canonical
    if r < 0.85:
        return None, aliases[int((rng or g.rng).integers(len(aliases)))]
    return dept, aliases[int((rng or g.rng).integers(len(aliases)))]


def _affiliations_shown(g: Generator, person: _Person, forced: bool) -> list[dict[str, str | None]]:
    """The affiliations a PDF header shows for a person, in order (the first drawn as before;
    ``forced``: every institution, canonically named, for the planted conflict)."""
    if forced:
        return [dict(department=None, institution=INSTITUTIONS[i][0]) for i in person.insts]
    shown = []
    dept, inst = _render_affiliation(g, person.inst)
    if inst or dept:
        shown.append(dict(department=dept, institution=inst))
    for extra in person.more_insts:
        dept, inst = _render_affiliation(g, extra, g.quirks)
        if inst or dept:
            shown.append(dict(department=dept, institution=inst))
    return shown


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


@dataclass
class _Rendered:
    """What the services show of the world, as rows of the files the replay server reads."""

    arxiv: list[dict[str, Any]] = field(default_factory=list)
    s2_papers: list[dict[str, Any]] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    mentions: list[dict[str, Any]] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)
    histories: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


def generate_world(
    out_dir: Path, spec: WorldSpec, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """Write the world to ``out_dir`` and return its manifest; same spec, same bytes.

    The steps draw from one seeded generator in a fixed order: people and their groups, papers,
    the planted bad records, what the services show of each paper, then publication histories.
    Growth days (``spec.extra_days``) come after, each from its own generator, so the base world
    is the same whatever the number of growth days and day d is the same in every longer run."""
    g = Generator(spec)
    people = g.people(max(20, int(spec.n_papers * 1.2)))
    groups = g.groups(people)
    papers = draw_papers(g, people, groups, progress)
    bad = plant_bad_records(g, spec, len(papers))
    planted = plant_affiliation_conflict(people, papers, set(bad))
    shown = _Rendered()
    for i, paper in enumerate(papers):
        render_paper(g, spec, paper, people, papers[(i + 1) % len(papers)].title, bad.get(i), shown)
    histories = s2_histories(g, spec, people, shown.histories)
    if spec.extra_days:
        papers, histories = grow_papers(spec, people, groups, papers, shown, histories, progress)
    return write_world(out_dir, spec, people, papers, shown, histories, planted)


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
    yymm = query.arxiv_id.split(".")[0]
    seq = max(int(p.arxiv_id.split(".")[1]) for p in papers if p.arxiv_id.startswith(yymm + "."))
    query.planted = True
    papers.append(_Paper(f"{yymm}.{seq + 1:05d}", query.topic, f"Revisiting {query.title}", query.abstract, [n - 1],
                         [(1, query.published)], query.published, query.primary_category, list(query.categories), True))
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
        topic, team = _draw_team(g, people, groups, group_p)
        updated = start_dt + timedelta(seconds=int(g.rng.random() * span))
        n_versions = 1 + int(g.rng.random() < 0.22) + int(g.rng.random() < 0.08)
        published = updated - timedelta(days=int(g.rng.integers(0, 90)) if n_versions > 1 else 0, hours=0)
        versions = [(v, published + (updated - published) * ((v - 1) / max(n_versions - 1, 1)))
                    for v in range(1, n_versions + 1)]
        yymm = published.strftime("%y%m")
        month_seq[yymm] = month_seq.get(yymm, 0) + 1
        papers.append(_draw_text(g, f"{yymm}.{month_seq[yymm]:05d}", topic, team, versions, published))
        if progress and i % 1000 == 0:
            progress("papers", i, spec.n_papers)
    return papers


def _draw_team(g: Generator, people: list[_Person], groups: list[list[int]],
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


def _draw_text(g: Generator, arxiv_id: str, topic: str, team: list[int], versions: list[tuple[int, datetime]],
               published: datetime) -> _Paper:
    """The rest of a paper: its categories, title and abstract."""
    cat = topic.split("/")[0]
    cats = [cat]
    if g.rng.random() < 0.3:
        cats.append(g.choice([c for c in TOPICS if c != cat]))
    title = g.title(topic)
    return _Paper(arxiv_id, topic, title, g.abstract(topic, title), team, versions, published, cat, cats)


def grow_papers(spec: WorldSpec, people: list[_Person], groups: list[list[int]], papers: list[_Paper],
                shown: _Rendered, histories: list[dict[str, str]],
                progress: Callable[[str, int, int], None] | None = None) -> tuple[list[_Paper], list[dict[str, str]]]:
    """The base papers plus the growth days' papers (rendered into ``shown``), and the S2
    histories with the new papers appended to their authors' lists.

    Each day draws from a generator seeded by (seed, day) alone, so the base world and earlier
    days never shift; new ids continue each month's sequence past the base world's."""
    group_sizes = np.array([len(gr) for gr in groups], dtype=float)
    group_p = group_sizes / group_sizes.sum()
    month_seq: dict[str, int] = {}
    for p in papers:
        yymm, seq = p.arxiv_id.split(".")
        month_seq[yymm] = max(month_seq.get(yymm, 0), int(seq))
    k = spec.papers_per_day()
    grown = list(papers)
    added: dict[str, list[dict[str, Any]]] = {}
    for d in range(1, spec.extra_days + 1):
        g = Generator(spec, np.random.default_rng([spec.seed, d]), stream=d)
        day = spec.end + timedelta(days=d)
        day_dt = datetime(day.year, day.month, day.day, tzinfo=UTC)
        new: list[_Paper] = []
        for _ in range(k):
            topic, team = _draw_team(g, people, groups, group_p)
            published = day_dt + timedelta(seconds=int(g.rng.integers(0, 86_400)))
            yymm = published.strftime("%y%m")
            month_seq[yymm] = month_seq.get(yymm, 0) + 1
            new.append(_draw_text(g, f"{yymm}.{month_seq[yymm]:05d}", topic, team, [(1, published)], published))
        # Rendered apart so that the base authors' history lists (already drawn) stay untouched.
        day_shown = _Rendered()
        for i, paper in enumerate(new):
            render_paper(g, spec, paper, people, new[(i + 1) % len(new)].title, None, day_shown)
        for m, hist in day_shown.histories.items():
            added.setdefault(people[m].s2_ids[0], []).extend(hist)
        shown.arxiv.extend(day_shown.arxiv)
        shown.s2_papers.extend(day_shown.s2_papers)
        shown.documents.extend(day_shown.documents)
        shown.mentions.extend(day_shown.mentions)
        grown.extend(new)
        if progress:
            progress("growth days", d, spec.extra_days)
    merged = []
    for row in histories:
        extra = added.pop(row["author_id"], None)
        merged.append(row if extra is None else
                      dict(author_id=row["author_id"], json=json.dumps(json.loads(row["json"]) + extra, ensure_ascii=False)))
    merged.extend(dict(author_id=a, json=json.dumps(h, ensure_ascii=False)) for a, h in added.items())
    return grown, merged


def plant_bad_records(g: Generator, spec: WorldSpec, n_papers: int) -> dict[int, str]:
    """Paper index -> kind of deliberately bad record (the same number of each kind)."""
    n_bad = max(1, round(n_papers * spec.bad_share)) if n_papers >= 30 else 0
    order = g.rng.permutation(n_papers).tolist()
    return {order[k * n_bad + j]: kind for k, kind in enumerate(BAD_KINDS) for j in range(n_bad)}


def render_paper(g: Generator, spec: WorldSpec, p: _Paper, people: list[_Person], other_title: str,
                 kind: str | None, out: _Rendered) -> None:
    """What arXiv, Semantic Scholar and the PDF (through GROBID) show of one paper, damaged as
    ``kind`` says for a planted bad record; ``other_title`` is what a mismatched PDF carries."""
    names = [f"{people[m].first} {people[m].last}" for m in p.team]
    out.arxiv.append(dict(arxiv_id=p.arxiv_id, primary_category=p.primary_category, categories=p.categories, versions=[
        dict(version=v, date=d, entry=render.atom_entry(p.arxiv_id, v, d, p.published, p.title, p.abstract, names,
                                                        p.primary_category, p.categories))
        for v, d in p.versions
    ]))
    s2_authors = []
    for m in p.team:
        aid = None if g.rng.random() < 0.03 else g.choice(people[m].s2_ids)
        s2_authors.append({"authorId": aid, "name": f"{people[m].first} {people[m].last}"})
    paper_id = hashlib.sha1(p.arxiv_id.encode()).hexdigest()
    year = p.versions[-1][1].year
    if g.rng.random() >= 0.05:
        out.s2_papers.append(dict(arxiv_id=p.arxiv_id, json=render.s2_paper(p.arxiv_id, paper_id, p.title, year, s2_authors)))
    for m in p.team:
        out.histories.setdefault(m, []).append(
            {"paperId": paper_id, "externalIds": {"ArXiv": p.arxiv_id}, "title": p.title,
             "abstract": p.abstract, "year": year, "publicationDate": p.published.date().isoformat()})
    if kind:
        out.bad.append(dict(arxiv_id=p.arxiv_id, kind=kind, expected_reason=BAD_KINDS[kind]))
    tei_authors = []
    # GROBID sometimes fails to attach an author's affiliation and emits it as an <author> of
    # its own, without a name: that author then shows none.
    orphan_at = int(g.quirks.integers(len(p.team))) if g.quirks.random() < ORPHAN_AFFILIATION_SHARE and not p.planted else None
    orphans: list[dict[str, str | None]] = []
    for pos, m in enumerate(p.team):
        person = people[m]
        forename = person.first if g.rng.random() > 0.15 else f"{person.first[0]}."
        affs = _affiliations_shown(g, person, p.planted)
        er = g.rng.random()
        email = None if er < 0.3 else (person.emails[-1] if er > 0.9 else person.emails[0])
        orcid = person.orcid if person.orcid and g.quirks.random() < ORCID_SHOWN else None
        if pos == orphan_at:
            orphans, affs = affs, []
        first = affs[0] if affs else {"department": None, "institution": None}
        tei_authors.append(dict(forename=forename, surname=person.last, email=email, affiliations=affs, orcid=orcid))
        out.mentions.append(dict(arxiv_id=p.arxiv_id, position=pos, name=names[pos], forename=forename,
                                 surname=person.last, email=email, department=first["department"],
                                 institution=first["institution"], affiliations=affs, orcid=orcid,
                                 s2_author_id=s2_authors[pos]["authorId"], year=year))
    if spec.documents and kind != "no_pdf":
        for v, _d in p.versions:
            out.documents.append(_document(p, v, names, tei_authors, other_title, kind, orphans))


def _document(p: _Paper, version: int, names: list[str], authors: list[dict[str, Any]], other_title: str,
              kind: str | None, orphans: list[dict[str, str | None]] | None = None) -> dict[str, Any]:
    """One version's PDF and the TEI header GROBID answers for it."""
    title, abstract = p.title, p.abstract
    if kind == "tei_no_abstract":
        abstract = None
    elif kind == "title_mismatch":
        title = other_title
    elif kind == "no_authors":
        authors = []
    tei = render.tei_header(p.arxiv_id, title, abstract, authors, orphans).encode("utf-8")
    if kind == "non_utf8":
        # latin-1 bytes inside a document that declares UTF-8
        tei = tei.replace(b"</p></div></abstract>", " r\xe9sum\xe9 na\xefve</p></div></abstract>".encode("latin-1"))
    pdf = render.minimal_pdf([p.title, ", ".join(names), render.SYNTHETIC_NOTE, *p.abstract.split(". ")])
    if kind == "truncated_pdf":
        pdf = pdf[: len(pdf) // 2]
    return dict(arxiv_id=p.arxiv_id, version=version, pdf=pdf, tei=tei, pdf_sha256=hashlib.sha256(pdf).hexdigest())


def s2_histories(g: Generator, spec: WorldSpec, people: list[_Person],
                 corpus_papers: dict[int, list[dict[str, Any]]]) -> list[dict[str, str]]:
    """Each person's Semantic Scholar publication list under their first S2 id: their corpus
    papers plus older papers on their topics."""
    merged: dict[str, list[dict[str, Any]]] = {}
    for m, hist in corpus_papers.items():
        person = people[m]
        for _ in range(int(g.rng.poisson(4))):
            topic = g.choice(person.topics)
            t = g.title(topic)
            yr = int(g.rng.integers(2016, spec.start.year + 1))
            hist.append({"paperId": hashlib.sha1(f"{person.pid}/{t}/{yr}".encode()).hexdigest(),
                         "externalIds": {}, "title": t, "abstract": g.abstract(topic, t), "year": yr,
                         "publicationDate": f"{yr}-06-01"})
        merged.setdefault(person.s2_ids[0], []).extend(hist)
    return [dict(author_id=a, json=json.dumps(h, ensure_ascii=False)) for a, h in merged.items()]


def write_world(out_dir: Path, spec: WorldSpec, people: list[_Person], papers: list[_Paper], shown: _Rendered,
                histories: list[dict[str, str]], planted: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The services' files, the truth folder and the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "truth").mkdir(exist_ok=True)
    pl.DataFrame(shown.arxiv).write_parquet(out_dir / "arxiv.parquet")
    pl.DataFrame(shown.s2_papers, schema={"arxiv_id": pl.Utf8, "json": pl.Utf8}).write_parquet(out_dir / "s2_papers.parquet")
    pl.DataFrame(histories).write_parquet(out_dir / "s2_authors.parquet")
    if spec.documents:
        pl.DataFrame(shown.documents).write_parquet(out_dir / "documents.parquet")
    pl.DataFrame(
        [dict(person_id=p.pid, name=f"{p.first} {p.last}", institution=INSTITUTIONS[p.inst][0],
              institutions=[INSTITUTIONS[i][0] for i in p.insts], orcid=p.orcid,
              emails=p.emails, s2_author_ids=p.s2_ids, expertise=p.topics) for p in people],
        schema_overrides={"orcid": pl.Utf8},
    ).write_parquet(out_dir / "truth" / "persons.parquet")
    pl.DataFrame(planted or [], schema={"query_id": pl.Utf8, "person_id": pl.Utf8, "kind": pl.Utf8, "detail": pl.Utf8}).write_parquet(
        out_dir / "truth" / "planted_conflicts.parquet")
    truth_mentions = [dict(arxiv_id=p.arxiv_id, position=pos, person_id=people[m].pid)
                      for p in papers for pos, m in enumerate(p.team)]
    pl.DataFrame(truth_mentions).write_parquet(out_dir / "truth" / "mentions.parquet")
    # What the services show of each mention (the PDF's name form, email, affiliation; S2's id).
    pl.DataFrame(shown.mentions, infer_schema_length=None, schema_overrides={
        "orcid": pl.Utf8, "affiliations": pl.List(pl.Struct({"department": pl.Utf8, "institution": pl.Utf8}))},
    ).write_parquet(out_dir / "mentions.parquet")
    pl.DataFrame([dict(arxiv_id=p.arxiv_id, topic=p.topic) for p in papers]).write_parquet(out_dir / "truth" / "paper_topics.parquet")
    pl.DataFrame(shown.bad, schema={"arxiv_id": pl.Utf8, "kind": pl.Utf8, "expected_reason": pl.Utf8}).write_parquet(
        out_dir / "truth" / "bad_records.parquet"
    )
    manifest = {
        "synthetic": True,
        "notice": "SYNTHETIC world generated by revbench: no paper, person or address in it is real.",
        "format": WORLD_FORMAT,
        "spec": {k: (v.isoformat() if isinstance(v, date) else v) for k, v in spec.__dict__.items()},
        "spec_key": spec.key(),
        "base_key": spec.base_key(),
        "counts": {
            "papers": len(papers), "mentions": len(truth_mentions), "persons": len(people),
            "documents": len(shown.documents), "s2_papers": len(shown.s2_papers), "bad_records": len(shown.bad),
        },
        "days": {
            "base_end": spec.end.isoformat(), "extra_days": spec.extra_days,
            "last_day": (spec.end + timedelta(days=spec.extra_days)).isoformat(), "papers_per_day": spec.papers_per_day(),
        },
    }
    (out_dir / "world.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def ensure_world(out_dir: Path, spec: WorldSpec) -> dict[str, Any]:
    """Generate the world unless ``out_dir`` already holds the same spec."""
    manifest_path = out_dir / "world.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("spec_key") == spec.key() and manifest.get("format") == WORLD_FORMAT:
            return manifest
    return generate_world(out_dir, spec)


def spec_of(manifest: dict[str, Any]) -> WorldSpec:
    """The spec a world's manifest was generated from (worlds older than growth have no ``extra_days``)."""
    names = {f.name for f in dataclasses.fields(WorldSpec)}
    kw = {k: v for k, v in manifest["spec"].items() if k in names}
    for k in ("start", "end"):
        if k in kw:
            kw[k] = date.fromisoformat(kw[k])
    return WorldSpec(**kw)


def grow_world(out_dir: Path, days: int) -> dict[str, Any]:
    """Regenerate the world in ``out_dir`` with ``days`` more growth days and return its manifest.

    The new world is written beside the old one and swapped in, so a reader never sees a
    half-written world (only, for an instant, none at all)."""
    if days < 0:
        raise ValueError(f"days must be >= 0, not {days}")
    manifest = json.loads((out_dir / "world.json").read_text())
    spec = spec_of(manifest)
    if days == 0 and manifest.get("format") == WORLD_FORMAT:
        return manifest
    spec = dataclasses.replace(spec, extra_days=spec.extra_days + days)
    tmp = out_dir.with_name(f".{out_dir.name}.growing")
    old = out_dir.with_name(f".{out_dir.name}.old")
    for leftover in (tmp, old):
        if leftover.exists():
            shutil.rmtree(leftover)
    manifest = generate_world(tmp, spec)
    out_dir.rename(old)
    tmp.rename(out_dir)
    shutil.rmtree(old)
    return manifest
