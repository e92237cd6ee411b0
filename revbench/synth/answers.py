"""What arXiv, Semantic Scholar and GROBID answer about a drawn SYNTHETIC world
(:mod:`revbench.synth.draw`): each paper's Atom entry, Semantic Scholar record and TEI header with
its PDF, the mentions they show, and each person's Semantic Scholar publication list, as rows of
the files the replay server reads. A planted bad record is damaged here as its kind says.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from revbench.synth import render
from revbench.synth.draw import BAD_KINDS, Generator, WorldSpec, _Paper, _Person, distinct_title
from revbench.synth.vocab import INSTITUTIONS

ORPHAN_AFFILIATION_SHARE = 0.05
"""Papers whose TEI carries an affiliation as an ``<author>`` without a ``<persName>``."""
ORCID_SHOWN = 0.85
"""The share of an ORCID holder's papers whose header shows the iD."""


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
class _Rendered:
    """What the services show of the world, as rows of the files the replay server reads."""

    arxiv: list[dict[str, Any]] = field(default_factory=list)
    s2_papers: list[dict[str, Any]] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    mentions: list[dict[str, Any]] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)
    histories: dict[int, list[dict[str, Any]]] = field(default_factory=dict)



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


def s2_histories(g: Generator, spec: WorldSpec, people: list[_Person], corpus_papers: dict[int, list[dict[str, Any]]],
                 older: dict[str, dict[str, Any]] | None = None) -> list[dict[str, str]]:
    """Each person's Semantic Scholar publication list under their first S2 id: their corpus
    papers plus older papers on their topics (each older paper's S2 id -> its ``topic``, ``focus``
    and ``person`` go to ``older``: who knows what rests on every work, not only the corpus)."""
    merged: dict[str, list[dict[str, Any]]] = {}
    for m, hist in corpus_papers.items():
        person = people[m]
        for _ in range(int(g.rng.poisson(4))):
            topic = g.choice(person.topics)
            focus = g.focus(topic, person.niches.get(topic))
            t = g.title(topic, focus)
            yr = int(g.rng.integers(2016, spec.start.year + 1))
            key = hashlib.sha1(f"{person.pid}/{t}/{yr}".encode()).hexdigest()
            hist.append({"paperId": key, "externalIds": {}, "title": distinct_title(t, key),
                         "abstract": g.abstract(topic, t, focus), "year": yr,
                         "publicationDate": f"{yr}-06-01"})
            if older is not None:
                older[key] = {"topic": topic, "focus": focus, "person": m, "year": yr}
        merged.setdefault(person.s2_ids[0], []).extend(hist)
    return [dict(author_id=a, json=json.dumps(h, ensure_ascii=False)) for a, h in merged.items()]

