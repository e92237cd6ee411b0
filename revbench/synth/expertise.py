"""Who knows what in a SYNTHETIC world, and how a person rates a paper on the survey's 1-5 scale.

Expertise rests on every work a person wrote (``truth/works.parquet``: the world's papers and their
older works), at the level of keywords within a subtopic, not of the subtopic alone: two people of
one subtopic who work on different parts of it know a paper differently, as real experts do. A
person's true affinity for a paper is the cosine between the paper's focus and the sum of their
works' foci (recent works weigh more), plus a little for the share of their work in the paper's
arXiv category; the cuts between levels are set so that pools built like LR-bench's (authors of the
papers whose text is nearest a query's) rate as LR-bench's did (``revbench/reference/world_targets.txt``).

An answer is that affinity seen through the person's own calibration (a lenient or a harsh rater,
fixed per person) and the noise of one self-assessment, then cut into levels; the two spreads are
set so that text scorers lose on the demo's benchmark about what they lose on the real LR-bench.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

CATEGORY_WEIGHT = 0.15
"""What the share of a person's work in the paper's arXiv category adds to their affinity."""
LEVEL_CUTS = (0.05, 0.195, 0.345, 0.505)
"""Affinity from which a person is at level 2, 3, 4 and 5."""
ANSWER_NOISE = 0.09
"""Standard deviation of one self-assessment around the person's affinity."""
RATER_BIAS = 0.06
"""Standard deviation of a person's leniency (fixed per person: some rate high throughout)."""
HALF_LIFE_YEARS = 1.5
"""A work's weight in its authors' expertise halves every this many years before the world's newest
paper: what one worked on lately one knows best (and the corpus, which profiles are made of, is
their latest work)."""


def _unit(*parts: object) -> float:
    return int(hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:12], 16) / 16**12


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def rater_bias(person_id: str) -> float:
    """A person's leniency, the same in every survey of any world (drawn from their id)."""
    u = min(max(_unit("rater-bias", person_id), 1e-9), 1 - 1e-9)
    # The inverse normal CDF by bisection: no scipy needed where the panel runs.
    lo, hi = -6.0, 6.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _phi(mid) < u else (lo, mid)
    return RATER_BIAS * (lo + hi) / 2


def level_of(affinity: float) -> int:
    """The level (1-5) an affinity falls in."""
    return 1 + sum(affinity >= c for c in LEVEL_CUTS)


@dataclass
class Expertise:
    """Each person's keyword profile and category shares, and each paper's focus, from a world's works."""

    profiles: dict[str, dict[str, float]] = field(default_factory=dict)
    """person id -> ``topic:keyword`` -> weight (each work adds its weight, spread over its focus)."""
    categories: dict[str, dict[str, float]] = field(default_factory=dict)
    """person id -> arXiv category -> share of their works."""
    papers: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """arXiv id -> (topic, focus)."""
    norms: dict[str, float] = field(default_factory=dict)
    """person id -> the length of their profile."""

    @classmethod
    def from_works(cls, works: pl.DataFrame) -> Expertise:
        """From ``truth/works.parquet`` (``work_id, arxiv_id, topic, focus, authors, year``)."""
        out = cls()
        counts: dict[str, dict[str, float]] = {}
        newest = int(works["year"].max()) if works.height else 0
        for arxiv_id, topic, focus, authors, year in works.select("arxiv_id", "topic", "focus", "authors", "year").iter_rows():
            focus = tuple(focus or ())
            if arxiv_id:
                out.papers[arxiv_id] = (topic, focus)
            weight = 0.5 ** ((newest - year) / HALF_LIFE_YEARS)
            for person in authors or []:
                profile = out.profiles.setdefault(person, {})
                for k in focus:
                    profile[f"{topic}:{k}"] = profile.get(f"{topic}:{k}", 0.0) + weight / len(focus)
                cat = topic.split("/")[0]
                counts.setdefault(person, {}).setdefault(cat, 0.0)
                counts[person][cat] += weight
        out.categories = {p: {c: n / sum(cs.values()) for c, n in cs.items()} for p, cs in counts.items()}
        out.norms = {p: math.sqrt(sum(v * v for v in profile.values())) for p, profile in out.profiles.items()}
        return out

    def affinity(self, person_id: str, arxiv_id: str) -> float:
        """How well the person knows the paper's subject (0: nothing of it; 1 + CATEGORY_WEIGHT at most)."""
        if arxiv_id not in self.papers:
            return 0.0
        topic, focus = self.papers[arxiv_id]
        profile = self.profiles.get(person_id, {})
        norm = self.norms.get(person_id, 0.0)
        dot = sum(profile.get(f"{topic}:{k}", 0.0) for k in focus) / max(len(focus), 1)
        cosine = dot / (norm * math.sqrt(1.0 / max(len(focus), 1))) if norm else 0.0
        return cosine + CATEGORY_WEIGHT * self.categories.get(person_id, {}).get(topic.split("/")[0], 0.0)

    def level(self, person_id: str, arxiv_id: str) -> int:
        """The person's true level for the paper, before any self-assessment noise."""
        return level_of(self.affinity(person_id, arxiv_id))

    def answer(self, rng: np.random.Generator, person_id: str, arxiv_id: str) -> int:
        """The level the person gives the paper on a survey: affinity, their leniency and one draw of noise."""
        return level_of(self.affinity(person_id, arxiv_id) + rater_bias(person_id) + float(rng.normal(0.0, ANSWER_NOISE)))

    def answer_shares(self, person_id: str, arxiv_id: str) -> list[float]:
        """The chance of each level 1-5 in the person's answer (over leniency and noise alike)."""
        a = self.affinity(person_id, arxiv_id)
        spread = math.hypot(ANSWER_NOISE, RATER_BIAS)
        below = [0.0, *(_phi((c - a) / spread) for c in LEVEL_CUTS), 1.0]
        return [below[i + 1] - below[i] for i in range(5)]
