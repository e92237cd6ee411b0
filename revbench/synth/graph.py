"""The SYNTHETIC world's scholarly graph: who cites what, each paper's topics, institutions with ROR
ids and their name variants, each person's affiliations with years, OpenAlex's split profiles and
missing ORCIDs, and one conflict of interest only the graph reveals.

Everything here draws from its own seeded streams (``GRAPH_STREAM``, one per citing paper), never
from the world's main generator, so adding the graph moved none of the world's other draws; a
paper's references depend only on the seed, the paper and the works published before it, so growth
days leave the base world's references as they were.
"""

from __future__ import annotations

import hashlib
from typing import Any

from revbench.synth.citations import GRAPH_STREAM, REFERENCES, _edge, _rng, draw_references
from revbench.synth.draw import PLANTED_QUERY_SEED, WorldSpec, _Paper, _Person, query_rank
from revbench.synth.vocab import INSTITUTIONS, TOPICS

__all__ = ["GRAPH_STREAM", "REFERENCES", "draw_graph", "graph_counts"]

PAST_AFFILIATION_SHARE = 0.3
"""People with a former institution; it ended more than ``CONFLICT_WINDOW`` years before the world's
end, so that the one planted conflict is the only former-colleague conflict the graph holds."""
CONFLICT_WINDOW = 3
"""A shared institution counts as a conflict when it ended at most this many years ago."""
SPLIT_PROFILE_SHARE = 0.12
"""People OpenAlex splits over two author ids (as it often does); about half their papers are on the second."""
HIDDEN_ORCID_SHARE = 0.25
"""Authorships of a person with an ORCID on which OpenAlex shows none."""

# Country and ROR type of each vocabulary institution (by canonical name).
_FACTS = {"Massachusetts Institute of Technology": "US", "Carnegie Mellon University": "US", "Stanford University": "US",
          "University of California, Berkeley": "US", "Tsinghua University": "CN", "Peking University": "CN",
          "ETH Zurich": "CH", "University of Oxford": "GB", "University of Toronto": "CA",
          "Max Planck Institute for Informatics": "DE", "Korea Advanced Institute of Science and Technology": "KR",
          "National University of Singapore": "SG", "University of Washington": "US", "University College London": "GB",
          "École Polytechnique Fédérale de Lausanne": "CH", "University of Edinburgh": "GB",
          "Indian Institute of Science": "IN", "University of Tokyo": "JP", "Technical University of Munich": "DE",
          "Google Research": "US", "Microsoft Research": "US", "Allen Institute for AI": "US",
          "University of Amsterdam": "NL", "McGill University": "CA"}
_COMPANIES = {"Google Research", "Microsoft Research"}
_FACILITIES = {"Max Planck Institute for Informatics", "Allen Institute for AI"}
_SUBFIELD = {"cs.AI": ("1702", "Artificial Intelligence"), "cs.CL": ("1702", "Artificial Intelligence"),
             "cs.CV": ("1707", "Computer Vision and Pattern Recognition"), "cs.IR": ("1710", "Information Systems"),
             "cs.LG": ("1702", "Artificial Intelligence")}
_EXTRA_FOS = {"theory": "Mathematics", "optimization": "Mathematics", "medical": "Medicine", "rl": "Engineering"}
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def ror_id(index: int) -> str:
    """A well-formed bare ROR id (``0`` + six Crockford base-32 digits + ISO 7064 mod 97-10 check)
    for the index-th vocabulary institution: made up, as everything in the world is."""
    n = int(hashlib.sha1(f"ror/{INSTITUTIONS[index][0]}".encode()).hexdigest(), 16) % (32**6)
    digits = "".join(_CROCKFORD[(n >> (5 * k)) & 31] for k in range(5, -1, -1))
    return f"0{digits}{98 - (n * 100) % 97:02d}"


def name_variants(index: int) -> list[str]:
    """The ways papers and databases spell one institution: canonical, its aliases, with a
    department before it, and abbreviated ("Univ. of X")."""
    canonical, aliases, dept, _domain = INSTITUTIONS[index]
    short = canonical.replace("University of", "Univ. of").replace("University", "Univ.")
    out = [canonical, *aliases, f"{canonical}, {dept}", f"{dept}, {short}"]
    return list(dict.fromkeys(out))


def institutions() -> list[dict[str, Any]]:
    """Every vocabulary institution with its ROR id, country, type, OpenAlex id and name variants."""
    return [{"index": i, "ror": ror_id(i), "name": inst[0], "country": _FACTS.get(inst[0]),
             "type": "company" if inst[0] in _COMPANIES else "facility" if inst[0] in _FACILITIES else "education",
             "openalex_id": f"I9{int(hashlib.sha1(inst[0].encode()).hexdigest()[:10], 16) % 10**8:08d}",
             "variants": name_variants(i)} for i, inst in enumerate(INSTITUTIONS)]


def topic_id(topic: str) -> str:
    """The world's OpenAlex-style topic id of a ``category/subtopic``."""
    return "T9" + str(int(hashlib.sha1(topic.encode()).hexdigest()[:8], 16) % 10**5).zfill(5)


def openalex_topic(topic: str, score: float) -> dict[str, Any]:
    """A topic as OpenAlex writes it, its subfield, field and domain from the world's categories."""
    cat, sub = topic.split("/")
    sf_id, sf_name = _SUBFIELD[cat]
    kws = TOPICS[cat][sub]
    return {"id": f"https://openalex.org/{topic_id(topic)}", "display_name": f"{kws[0].title()} and {kws[1].title()}",
            "score": round(score, 4),
            "subfield": {"id": f"https://openalex.org/subfields/{sf_id}", "display_name": sf_name},
            "field": {"id": "https://openalex.org/fields/17", "display_name": "Computer Science"},
            "domain": {"id": "https://openalex.org/domains/3", "display_name": "Physical Sciences"}}


def draw_topics(spec: WorldSpec, papers: list[_Paper]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each paper's S2 fields of study (from external sources and from S2's model) and OpenAlex topics."""
    out = {}
    for p in papers:
        rng = _rng(spec, 2, int(hashlib.sha1(p.arxiv_id.encode()).hexdigest()[:12], 16))
        cat, sub = p.topic.split("/")
        fos = [{"category": "Computer Science", "source": "external"}, {"category": "Computer Science", "source": "s2-fos-model"}]
        if sub in _EXTRA_FOS and rng.random() < 0.6:
            fos.append({"category": _EXTRA_FOS[sub], "source": "s2-fos-model"})
        others = [f"{cat}/{s}" for s in TOPICS[cat] if s != sub]
        extra = [others[int(i)] for i in rng.choice(len(others), int(rng.integers(0, 3)), replace=False)]
        topics = [openalex_topic(p.topic, float(rng.uniform(0.9, 1.0)))]
        topics += [openalex_topic(t, float(rng.uniform(0.4, 0.85))) for t in extra]
        out[p.arxiv_id] = {"s2": fos, "openalex": topics}
    return out


def draw_affiliations(spec: WorldSpec, people: list[_Person]) -> dict[str, list[dict[str, Any]]]:
    """Each person's institutions with first and last year, as the databases spell them: the current
    ones up to the world's end, and for some a former one that ended before the conflict window."""
    end = spec.end.year
    out = {}
    for i, person in enumerate(people):
        rng = _rng(spec, 3, i)
        first = end - int(rng.integers(0, 9))
        rows = [{"inst": inst, "first_year": first if k == 0 else end - int(rng.integers(0, 4)), "last_year": end,
                 "name": INSTITUTIONS[inst][0]} for k, inst in enumerate(person.insts)]
        if rng.random() < PAST_AFFILIATION_SHARE:
            past = int((person.inst + 1 + rng.integers(len(INSTITUTIONS) - 1)) % len(INSTITUTIONS))
            if past not in person.insts:
                last = min(first, end - CONFLICT_WINDOW - 1)
                variants = name_variants(past)
                rows.append({"inst": past, "first_year": last - int(rng.integers(1, 7)), "last_year": last,
                             "name": variants[int(rng.integers(len(variants)))]})
        out[person.pid] = rows
    return out


def _in_draw_order(papers: list[_Paper], bad: set[int]) -> list[int]:
    """Indices of the papers a planted conflict may sit on, in the order the pools draw queries
    (each paper by its place in its category's draw under ``PLANTED_QUERY_SEED``), so a round that
    draws only a few papers per category, as the demo's does, meets the conflict."""
    good = [i for i, p in enumerate(papers) if i not in bad]
    place: dict[int, int] = {}
    for cat in sorted({papers[i].primary_category for i in good}):
        ranked = sorted((i for i in good if papers[i].primary_category == cat),
                        key=lambda i: query_rank(PLANTED_QUERY_SEED, cat, papers[i].arxiv_id))
        place.update((i, k) for k, i in enumerate(ranked))
    return sorted((i for i in good if not papers[i].planted and papers[i].team),
                  key=lambda i: (place[i], query_rank(PLANTED_QUERY_SEED, papers[i].primary_category, papers[i].arxiv_id)))


def plant_graph_conflict(spec: WorldSpec, people: list[_Person], papers: list[_Paper], bad: set[int],
                         affiliations: dict[str, list[dict[str, Any]]],
                         shown: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A conflict only the graph reveals: a person who writes on a query paper's topic, never wrote
    with its authors and shows none of their institutions in any PDF, but who was at one author's
    institution until last year, under another spelling of it (same ROR id). The query cites one of
    the person's earlier papers on its topic: no embedding needs to bring them close, citation recall
    finds them. Sets that former affiliation in ``affiliations`` and returns (the planted pair for
    the truth, ``{query: the world paper it must cite}``)."""
    rng = _rng(spec, 4)
    strings: dict[int, set[str]] = {}
    for row in shown:
        for aff in row["affiliations"] or []:
            if aff["institution"]:
                strings.setdefault(row["person"], set()).add(aff["institution"].strip().lower())
    writers: dict[str, set[int]] = {}
    coauthors: dict[int, set[int]] = {}
    for p in papers:
        for m in p.team:
            writers.setdefault(p.topic, set()).add(m)
            coauthors.setdefault(m, set()).update(p.team)
    end = spec.end.year
    planted_people = {m for p in papers if p.planted for m in p.team}
    works_of: dict[tuple[int, str], list[_Paper]] = {}
    for i, p in enumerate(papers):
        if i not in bad and not p.planted:
            for m in p.team:
                works_of.setdefault((m, p.topic), []).append(p)
    for qi in _in_draw_order(papers, bad):
        q = papers[qi]
        author = people[q.team[0]]
        taken = {i for m in q.team for i in people[m].insts}
        near = set().union(*(coauthors.get(m, set()) for m in q.team))
        theirs = set().union(*(strings.get(m, set()) for m in q.team))
        variant = name_variants(author.inst)[-1]
        earlier = {m: sorted(c.arxiv_id for c in works_of.get((m, q.topic), []) if c.published < q.published)
                   for m in writers.get(q.topic, set()) - near}
        fits = [m for m in sorted(earlier)
                if not set(people[m].insts) & taken and not strings.get(m, set()) & theirs
                and variant.lower() not in theirs and m not in planted_people and earlier[m]]
        if not fits:
            continue
        m = fits[int(rng.integers(len(fits)))]
        cited = earlier[m][int(rng.integers(len(earlier[m])))]
        person = people[m]
        rows = [r for r in affiliations[person.pid] if r["last_year"] == end]
        rows[0]["first_year"] = end
        rows.append({"inst": author.inst, "first_year": end - 4, "last_year": end - 1, "name": variant})
        affiliations[person.pid] = rows
        return [{"query_id": q.arxiv_id, "person_id": person.pid, "kind": "graph_institution",
                 "author_id": author.pid, "ror": ror_id(author.inst), "last_year": end - 1,
                 "detail": f"{person.pid} was at {variant!r} until {end - 1}; {author.pid}, an author of the query, "
                           f"is at {INSTITUTIONS[author.inst][0]!r} (both ror:{ror_id(author.inst)}); the query "
                           f"cites their {cited}"}], {q.arxiv_id: cited}
    return [], {}


def cite_planted(spec: WorldSpec, people: list[_Person], papers: list[_Paper], references: dict[str, list[dict[str, Any]]],
                 cites: dict[str, str]) -> None:
    """Make each planted query cite its paper (``cites``), in place of one of its outside references
    (its last when it has none), so its number of references stays as drawn; a query that already
    cites the paper is left as it is."""
    by_id = {p.arxiv_id: p for p in papers}
    for query, cited in sorted(cites.items()):
        refs = references[query]
        if any(r["arxiv_id"] == cited for r in refs):
            continue
        w, q = by_id[cited], by_id[query]
        team = set(q.team)
        close = {c for p in papers if set(p.team) & team for c in p.team} - team
        ref = {"s2_id": hashlib.sha1(cited.encode()).hexdigest(), "arxiv_id": cited, "arxiv": cited,
               "doi": f"10.48550/arxiv.{cited}", "title": w.title, "year": w.published.year,
               "authors": [f"{people[m].first} {people[m].last}" for m in sorted(w.team)], "in_world": True,
               "own": bool(set(w.team) & team), "coauthor": bool(set(w.team) & close)}
        outside = [k for k, r in enumerate(refs) if not r["in_world"]]
        refs[outside[-1] if outside else len(refs) - 1] = _edge(_rng(spec, 5), ref, ref["own"] or ref["coauthor"])


def _share(spec: WorldSpec, *parts: str) -> float:
    """A uniform draw in [0, 1) fixed by the seed and its parts: a paper's draws stay as they were
    when the world grows."""
    return int(hashlib.sha1("/".join([str(spec.seed), *parts]).encode()).hexdigest()[:12], 16) / 16**12


def draw_openalex_profiles(spec: WorldSpec, people: list[_Person], papers: list[_Paper]) -> dict[str, Any]:
    """OpenAlex's impolite identity: ``second_profile`` (person id -> the papers OpenAlex files under
    a second author id of that person) and ``no_orcid`` (``arxiv_id:position`` of authorships of a
    person with an ORCID on which OpenAlex shows none)."""
    split = {p.pid for p in people if _share(spec, "split", p.pid) < SPLIT_PROFILE_SHARE}
    second: dict[str, list[str]] = {}
    hidden = []
    for paper in papers:
        for pos, m in enumerate(paper.team):
            pid = people[m].pid
            if pid in split and _share(spec, "second", pid, paper.arxiv_id) < 0.5:
                second.setdefault(pid, []).append(paper.arxiv_id)
            if people[m].orcid and _share(spec, "orcid", paper.arxiv_id, str(pos)) < HIDDEN_ORCID_SHARE:
                hidden.append(f"{paper.arxiv_id}:{pos}")
    return {"second_profile": {k: sorted(v) for k, v in sorted(second.items())}, "no_orcid": sorted(hidden)}


def draw_graph(spec: WorldSpec, people: list[_Person], papers: list[_Paper], bad: set[int],
               histories: dict[int, list[dict[str, Any]]], mentions: list[dict[str, Any]],
               older_topics: dict[str, dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the graph as the world's ``graph.json`` holds it, the planted graph-only conflicts);
    ``mentions`` are what the PDFs show of each author (their affiliations as spelled there);
    ``older_topics``: the topic and focus of each older work (S2 id -> ``topic``, ``focus``)."""
    person_at = {(p.arxiv_id, pos): m for p in papers for pos, m in enumerate(p.team)}
    shown = [{"person": person_at[(m["arxiv_id"], m["position"])], "affiliations": m["affiliations"]}
             for m in mentions if (m["arxiv_id"], m["position"]) in person_at]
    affiliations = draw_affiliations(spec, people)
    planted, cites = plant_graph_conflict(spec, people, papers, bad, affiliations, shown)
    references = draw_references(spec, people, papers, histories, older_topics)
    cite_planted(spec, people, papers, references, cites)
    graph = {
        "synthetic": True,
        "notice": "SYNTHETIC citation graph generated by revbench: no work, institution or ROR id in it is real.",
        "institutions": institutions(),
        "references": references,
        "topics": draw_topics(spec, papers),
        "affiliations": affiliations,
        "authors": {p.arxiv_id: [people[m].pid for m in p.team] for p in papers},
        "people": {p.pid: {"name": f"{p.first} {p.last}", "orcid": p.orcid} for p in people},
        "openalex_profiles": draw_openalex_profiles(spec, people, papers),
    }
    return graph, planted


def graph_counts(graph: dict[str, Any]) -> dict[str, int]:
    """The graph's counts for the world's manifest."""
    refs = [r for rs in graph["references"].values() for r in rs]
    return {"references": len(refs), "references_outside": sum(not r["in_world"] for r in refs),
            "references_null_s2_id": sum(r["s2_id"] is None for r in refs),
            "paper_topics": sum(len(t["s2"]) + len(t["openalex"]) for t in graph["topics"].values()),
            "institutions": len(graph["institutions"]),
            "affiliations": sum(len(a) for a in graph["affiliations"].values())}
