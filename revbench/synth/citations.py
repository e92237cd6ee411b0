"""The SYNTHETIC world's citations: each paper's references, drawn from the works published before it
by topic (its subtopic, more so on the same keywords, then its category) and by how much their
authors know of its subject; a share of them to its own authors' and their co-authors' works, and a
share outside the world. Calibrated on real data (docs/benchmarks.md, "How real the world is").

Every paper draws from its own seeded stream (``GRAPH_STREAM``), so its references depend only on the
seed, the paper and the works published before it, and growth days leave earlier references as they were.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import numpy as np

from revbench.synth.draw import Generator, WorldSpec, _Paper, _Person, distinct_title
from revbench.synth.vocab import FIRST_NAMES, LAST_NAMES, TOPICS

GRAPH_STREAM = 35
"""The graph's streams are ``(seed, GRAPH_STREAM, ...)``: apart from every stream the world drew before."""
REFERENCES = (15, 55)
"""Each paper cites this many works (inclusive)."""
OUTSIDE_SHARE = (0.2, 0.3)
"""Each paper's share of references to works outside the world (drawn per paper in this range)."""
OWN_SHARE = 0.15
"""Chance that an in-world reference goes to the citing authors' own earlier work (when they have
some left): about a tenth of all references, outside ones included (revbench/reference/world_targets.txt)."""
COAUTHOR_SHARE = 0.08
"""... and to their co-authors' (anyone who wrote a world paper with one of them)."""
SAME_SUBTOPIC_WEIGHT = 12.0
"""How much likelier a work on the citing paper's subtopic is cited than one outside its category;"""
SAME_CATEGORY_WEIGHT = 3.0
"""... and a work of its arXiv category on another subtopic."""
FOCUS_BOOST = 1.0
"""A work on the citing paper's subtopic weighs 1 + this much more per focus keyword the two share."""
EXPERT_BOOST = 2.0
"""... and 1 + this times the largest share of their work its authors spend on that subtopic."""
POOL = 100
"""Earlier works of any kind looked at per citing paper (a uniform sample), so big worlds stay linear;"""
POOL_TOPIC = 150
"""... earlier works on its subtopic;"""
POOL_CATEGORY = 60
"""... and of its category, besides its own authors' and co-authors' works."""
NULL_S2_SHARE = 0.3
"""Outside works Semantic Scholar could not match to a paper of its own (``paperId`` null)."""


@dataclass
class _Work:
    key: str
    title: str
    year: int
    when: str
    arxiv_id: str | None
    authors: frozenset[int]
    category: str | None
    topic: str | None = None
    focus: tuple[str, ...] = ()


def _works(papers: list[_Paper], histories: dict[int, list[dict[str, Any]]],
           older_topics: dict[str, dict[str, Any]] | None = None) -> list[_Work]:
    """The world's citable works, oldest first: its papers and its people's older papers, each
    with its topic and focus (``older_topics``: S2 id -> ``topic``, ``focus`` of an older paper)."""
    works = [_Work(hashlib.sha1(p.arxiv_id.encode()).hexdigest(), p.title, p.published.year,
                   p.published.isoformat(), p.arxiv_id, frozenset(p.team), p.primary_category, p.topic,
                   tuple(p.focus)) for p in papers]
    older: dict[str, _Work] = {}
    for m, hist in histories.items():
        for h in hist:
            if (h.get("externalIds") or {}).get("ArXiv"):
                continue
            known = (older_topics or {}).get(h["paperId"], {})
            topic = known.get("topic")
            w = older.setdefault(h["paperId"], _Work(h["paperId"], h["title"], h["year"],
                                                     f"{h['publicationDate']}T00:00:00+00:00", None, frozenset(),
                                                     topic.split("/")[0] if topic else None, topic,
                                                     tuple(known.get("focus", ()))))
            w.authors = w.authors | {m}
    works.extend(older.values())
    works.sort(key=lambda w: (w.when, w.key))
    return works


def _rng(spec: WorldSpec, *parts: int) -> np.random.Generator:
    return np.random.default_rng([spec.seed, GRAPH_STREAM, *parts])


def _paper_rng(spec: WorldSpec, arxiv_id: str) -> np.random.Generator:
    return _rng(spec, 1, int(hashlib.sha1(arxiv_id.encode()).hexdigest()[:12], 16))


def _outside(g: Generator, topic: str, before_year: int) -> dict[str, Any]:
    """A work outside the world: a title, a year, authors' names, sometimes a DOI or an arXiv id."""
    rng = g.rng
    title = g.title(topic if rng.random() < 0.7 else g.choice(g.topic_ids))
    year = int(rng.integers(1998, before_year + 1))
    key = hashlib.sha1(f"outside/{title}/{year}".encode()).hexdigest()
    title = distinct_title(title, key)  # the work is the drawn title's and year's: one ending for it
    doi = f"10.{int(rng.integers(1000, 9999))}/synthetic.{key[:10]}" if rng.random() < 0.6 else None
    arxiv = None
    if year >= 2015 and rng.random() < 0.3:
        arxiv = f"{year % 100:02d}{int(rng.integers(1, 13)):02d}.{int(rng.integers(1, 30000)):05d}"
    names = [f"{g.choice(FIRST_NAMES)} {g.choice(LAST_NAMES)}" for _ in range(1 + int(rng.integers(4)))]
    return {"s2_id": None if rng.random() < NULL_S2_SHARE else key, "arxiv_id": None, "arxiv": arxiv, "doi": doi,
            "title": title, "year": year, "authors": names, "in_world": False, "own": False, "coauthor": False}


def _edge(rng: np.random.Generator, ref: dict[str, Any], close: bool) -> dict[str, Any]:
    """How the citing paper uses a reference (S2's edge) and how GROBID reads it from the PDF."""
    influential = bool(rng.random() < (0.35 if close else 0.1))
    intents = [i for i, p in (("background", 0.7), ("methodology", 0.3), ("result", 0.1)) if rng.random() < p]
    n_contexts = 1 + int(rng.poisson(0.8)) + (int(rng.poisson(2)) if influential else 0)
    r = rng.random()
    grobid = {"typed_doi": bool(ref["doi"]) and rng.random() < 0.7,
              "arxiv_in": None if not ref["arxiv"] else "idno" if r < 0.45 else "note" if r < 0.9 else None,
              "title": bool(rng.random() >= 0.05), "date": bool(rng.random() >= 0.05)}
    return {**ref, "is_influential": influential, "intents": intents, "n_contexts": n_contexts, "grobid": grobid}


class _Citable:
    """The works as arrays a citing paper weighs at once: topic and category codes, focus as a
    bit mask over the subtopic's keywords, and how much of their work the authors spend on the
    work's own subtopic (people cite the work of those who know their subject)."""

    def __init__(self, works: list[_Work]):
        self.topics = sorted({w.topic for w in works if w.topic})
        code = {t: i for i, t in enumerate(self.topics)}
        cats = sorted({w.category for w in works if w.category})
        self.topic = np.array([code.get(w.topic, -1) if w.topic else -1 for w in works], dtype=np.int64)
        self.category = np.array([cats.index(w.category) if w.category else -1 for w in works], dtype=np.int64)
        self.category_of = {c: i for i, c in enumerate(cats)}
        self.mask = np.array([_mask(w.topic, w.focus) for w in works], dtype=np.int64)
        on: dict[int, dict[str, int]] = {}
        for w in works:
            for m in w.authors:
                if w.topic:
                    on.setdefault(m, {}).setdefault(w.topic, 0)
                    on[m][w.topic] += 1
        share = {m: {t: n / sum(c.values()) for t, n in c.items()} for m, c in on.items()}
        self.expert = np.array([max((share.get(m, {}).get(w.topic, 0.0) for m in w.authors), default=0.0) if w.topic else 0.0
                                for w in works])
        self.by_topic: dict[int, list[int]] = {}
        self.by_category: dict[int, list[int]] = {}
        for k in range(len(works)):  # indices ascending: each list is in publication order
            if self.topic[k] >= 0:
                self.by_topic.setdefault(int(self.topic[k]), []).append(k)
            if self.category[k] >= 0:
                self.by_category.setdefault(int(self.category[k]), []).append(k)

    def topical(self, rng: np.random.Generator, topic: str, category: str, n_earlier: int) -> set[int]:
        """A sample of the earlier works on the citing paper's subtopic, of its category, and of any."""
        out: set[int] = set()
        for listed, most in ((self.by_topic.get(self.topic_code(topic), []), POOL_TOPIC),
                             (self.by_category.get(self.category_of.get(category, -1), []), POOL_CATEGORY)):
            earlier = bisect_left(listed, n_earlier)
            if earlier:
                out.update(listed[int(i)] for i in rng.choice(earlier, min(most, earlier), replace=False))
        if n_earlier:
            out.update(rng.integers(0, n_earlier, min(POOL, n_earlier)).tolist())
        return out

    def inclusion(self, pool: np.ndarray, topic: str, category: str, n_earlier: int) -> np.ndarray:
        """Each pooled work's chance of having been drawn into the pool by :meth:`topical`: dividing
        the weights by it makes a citation as likely as if every earlier work had been weighed, so
        the share of references on a subject does not grow with the world."""
        t, c = self.topic_code(topic), self.category_of.get(category, -1)
        n_t = bisect_left(self.by_topic.get(t, []), n_earlier)
        n_c = bisect_left(self.by_category.get(c, []), n_earlier)
        p_t = min(1.0, POOL_TOPIC / n_t) if n_t else 0.0
        p_c = min(1.0, POOL_CATEGORY / n_c) if n_c else 0.0
        p_any = 1.0 - (1.0 - 1.0 / n_earlier) ** min(POOL, n_earlier) if n_earlier else 0.0
        missed = (1.0 - p_t * (self.topic[pool] == t)) * (1.0 - p_c * (self.category[pool] == c)) * (1.0 - p_any)
        return 1.0 - missed

    def topic_code(self, topic: str) -> int:
        i = bisect_left(self.topics, topic)
        return i if i < len(self.topics) and self.topics[i] == topic else -2

    def weights(self, pool: np.ndarray, topic: str, category: str, focus: list[str], link: float = 1.0) -> np.ndarray:
        """How likely the citing paper cites each work of ``pool``, before its authors' own and
        their co-authors' works are favoured; ``link`` (``WorldSpec.citation_link``) is the power the
        weights are raised to: 0 makes every work equally likely, above 1 sharpens subject and expertise."""
        same_topic = self.topic[pool] == self.topic_code(topic)
        same_cat = self.category[pool] == self.category_of.get(category, -1)
        shared = _POPCOUNT[self.mask[pool] & _mask(topic, focus)] * same_topic
        w = np.where(same_topic, SAME_SUBTOPIC_WEIGHT, np.where(same_cat, SAME_CATEGORY_WEIGHT, 1.0))
        w = w * (1.0 + FOCUS_BOOST * shared) * (1.0 + EXPERT_BOOST * self.expert[pool] * same_topic)
        return w if link == 1.0 else w ** link


_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def _mask(topic: str | None, focus: list[str] | tuple[str, ...]) -> int:
    """A focus as a bit mask over its subtopic's (at most eight) keywords."""
    if not topic:
        return 0
    cat, sub = topic.split("/")
    kws = TOPICS[cat][sub]
    return sum(1 << kws.index(k) for k in focus if k in kws)


def draw_references(spec: WorldSpec, people: list[_Person], papers: list[_Paper],
                    histories: dict[int, list[dict[str, Any]]],
                    older_topics: dict[str, dict[str, Any]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each paper's references, in order: ``REFERENCES`` works published before it, 20-30% from
    outside the world. In-world works are weighed by topic (its subtopic, more so on the same
    keywords, then its category) and by how much their authors know of the citing paper's subject;
    a share of them (``OWN_SHARE``, ``COAUTHOR_SHARE``) go to the paper's own authors' and their
    co-authors' works."""
    works = _works(papers, histories, older_topics)
    citable = _Citable(works)
    whens = [w.when for w in works]
    coauthors: dict[int, set[int]] = {}
    for p in papers:
        for m in p.team:
            coauthors.setdefault(m, set()).update(p.team)
    by_author: dict[int, list[int]] = {}
    for k, w in enumerate(works):
        for m in w.authors:
            by_author.setdefault(m, []).append(k)
    out: dict[str, list[dict[str, Any]]] = {}
    for p in papers:
        rng = _paper_rng(spec, p.arxiv_id)
        g = Generator(spec, rng)
        team = set(p.team)
        close = set().union(*(coauthors.get(m, set()) for m in team)) - team
        n_earlier = bisect_left(whens, p.published.isoformat())
        mine = {k for m in team | close for k in by_author.get(m, []) if k < n_earlier}
        pool = sorted(mine | citable.topical(rng, p.topic, p.primary_category, n_earlier))
        n = int(rng.integers(REFERENCES[0], REFERENCES[1] + 1))
        n_out = int(round(n * rng.uniform(*OUTSIDE_SHARE)))
        n_in = min(n - n_out, len(pool))
        refs: list[dict[str, Any]] = []
        chosen: list[int] = []
        if n_in:
            idx = np.array(pool, dtype=np.int64)
            own = np.array([bool(works[k].authors & team) for k in pool])
            near = np.array([bool(works[k].authors & close) for k in pool]) & ~own
            # Every own and co-author work is in the pool; the rest were sampled, so they are
            # weighed by their chance of being drawn (as if every earlier work had been weighed).
            drawn = np.where(own | near, 1.0, citable.inclusion(idx, p.topic, p.primary_category, n_earlier))
            weights = citable.weights(idx, p.topic, p.primary_category, p.focus, spec.citation_link) / np.maximum(drawn, 1e-12)
            # Self- and co-author citation at the literature's rate, whatever the world's size.
            n_own = min(int(own.sum()), int(rng.binomial(n_in, OWN_SHARE)))
            n_near = min(int(near.sum()), int(rng.binomial(n_in, COAUTHOR_SHARE)))
            for group, k_group in ((own, n_own), (near, n_near), (~own & ~near, n_in - n_own - n_near)):
                at = np.flatnonzero(group)
                k_group = min(k_group, len(at))
                if k_group:
                    w = weights[at]
                    chosen += at[rng.choice(len(at), k_group, replace=False, p=w / w.sum())].tolist()
            for k in chosen:
                w = works[pool[k]]
                refs.append({"s2_id": w.key, "arxiv_id": w.arxiv_id, "arxiv": w.arxiv_id,
                             "doi": f"10.48550/arxiv.{w.arxiv_id}" if w.arxiv_id else None, "title": w.title,
                             "year": w.year, "authors": [f"{people[m].first} {people[m].last}" for m in sorted(w.authors)],
                             "in_world": True, "own": bool(w.authors & team), "coauthor": bool(w.authors & close)})
        refs.extend(_outside(g, p.topic, p.published.year) for _ in range(n_out))
        rng.shuffle(refs)  # type: ignore[arg-type]
        out[p.arxiv_id] = [_edge(rng, r, r["own"] or r["coauthor"]) for r in refs]
    return out
