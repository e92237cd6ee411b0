"""A replay world imported from a published benchmark (LR-bench or the CMU gold standard): its
real titles and abstracts behind the same services as a SYNTHETIC world, so the whole loop can
rebuild the benchmark and be compared with it.

What the source gives is kept: every query paper's and every reviewer publication's title and
abstract, who rated what, and each rating. What it does not give is made up deterministically
(from the seed and the source's ids, never from the order of the files):

- **people**: each reviewer becomes a person (a synthesised name made of words the benchmark's
  text never uses, an institution and an email; their Semantic Scholar id is the digits of the benchmark's id when it has them); each query paper
  gets one to three synthesised authors who write nothing else and are never reviewers;
- **papers**: the query papers, and every distinct publication of the reviewers (one paper per
  distinct title, written by every reviewer who lists it; a publication whose title is a query
  paper's makes that reviewer one of the query's authors);
- **dates and ids**: a paper's arXiv date is drawn inside the world's window from a hash of its
  source id (or title), its id is ``YYMM.NNNNN`` in the order of those dates; the query papers
  are in :data:`QUERY_CATEGORY`, the publications in :data:`PROFILE_CATEGORY`, so pools draw
  their queries from the benchmark's query papers alone;
- **PDFs and GROBID answers** are rendered from the real metadata as for a SYNTHETIC world (with
  its impolite parts: missing emails, initials, second affiliations, absent S2 records).

The hidden truth (``truth/``) holds, beside what a SYNTHETIC world's holds, the benchmark's ratings
keyed by both the benchmark's ids and the world's (``benchmark_ratings.parquet``), which the
simulated panel answers from and the comparison reads.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from revbench.evaluation.model import Benchmark
from revbench.files import write_atomic
from revbench.synth.vocab import FIRST_NAMES, INSTITUTIONS
from revbench.synth.answers import _Rendered, render_paper
from revbench.synth.draw import Generator, WorldSpec, _email_local, _Paper, _Person
from revbench.synth.world import write_world

IMPORT_FORMAT = 2
"""Bumped when what an imported world holds changes, so cached ones are rebuilt."""
QUERY_CATEGORY = "cs.LG"
PROFILE_CATEGORY = "cs.AI"
WORLD_KINDS = ("lrbench", "goldstandard")
"""Benchmark kinds a world can be imported from."""
_SPACE = re.compile(r"\s+")
NAME_POOL_PEOPLE = 20_000
"""People the synthesised names are drawn for (ten full names each, as in SYNTHETIC worlds)."""


def title_key(title: str) -> str:
    """A title as the world matches titles: case and runs of white space ignored."""
    return _SPACE.sub(" ", title).strip().lower()


def _unit(seed: int, *parts: object) -> int:
    return int(hashlib.sha256("\x1f".join(map(str, (seed, *parts))).encode()).hexdigest()[:15], 16)


def held_ratings(bench: Benchmark) -> pl.DataFrame:
    """Every (reviewer, paper, rating) the benchmark holds: the sides of its tuples, or its
    pointwise ratings (the benchmark ids; one row per pair)."""
    parts = []
    for s in bench.splits:
        if s.tuples is not None and s.tuples.height:
            for side in ("pos", "neg"):
                parts.append(s.tuples.select(pl.col(f"reviewer_{side}").alias("reviewer_id"),
                                             pl.col(f"paper_{side}").alias("paper_id"), pl.col(f"rating_{side}").alias("rating")))
        if s.ratings is not None and s.ratings.height:
            parts.append(s.ratings.select("reviewer_id", "paper_id", pl.col("rating").cast(pl.Float64)))
    if not parts:
        return pl.DataFrame(schema={"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "rating": pl.Float64})
    return pl.concat(parts).unique(["reviewer_id", "paper_id"], keep="first").sort("reviewer_id", "paper_id")


def survey_level(rating: float) -> int:
    """The 1-5 survey level a benchmark rating is given as (the gold standard's quarter steps are
    rounded half up: 4.5 -> 5, 4.25 -> 4; LR-bench's levels are already whole)."""
    return min(5, max(1, math.floor(rating + 0.5)))


@dataclass(frozen=True)
class ImportedPaper:
    """One paper of the world before rendering: its source key, text and authors (person indices)."""

    key: str
    title: str
    abstract: str
    query: bool
    source_id: str | None
    team: list[int]


_WORD = re.compile(r"[^\W_]+")


def text_words(texts: list[str]) -> frozenset[str]:
    """Every word of ``texts``, case-folded, diacritics dropped ("Müller" -> "muller")."""
    words: set[str] = set()
    for t in texts:
        plain = "".join(c for c in unicodedata.normalize("NFKD", t) if not unicodedata.combining(c))
        words.update(w.casefold() for w in _WORD.findall(plain))
    return frozenset(words)


def _uses(name: str, banned: frozenset[str]) -> bool:
    return bool(text_words([name]) & banned)


class _Names:
    """Unique synthesised names, drawn from a hash of (seed, who) so a person keeps their name
    whatever else the benchmark holds, and made of words that ``banned`` (the real text's words)
    does not hold: a synthesised respondent whose name a real abstract happens to spell ("Michael
    S." in "Michael S. Jordan") would stop the release's privacy audit on public text."""

    def __init__(self, seed: int, surnames: list[str], banned: frozenset[str] = frozenset()):
        self.seed, self.used = seed, set[tuple[str, str]]()
        self.first = [f for f in FIRST_NAMES if not _uses(f, banned)]
        self.surnames = [s for s in surnames if not _uses(s, banned)]

    def draw(self, who: str) -> tuple[str, str]:
        for attempt in range(10_000):
            u = _unit(self.seed, "name", who, attempt)
            name = (self.first[u % len(self.first)], self.surnames[(u // len(self.first)) % len(self.surnames)])
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError(f"no free name for {who}")  # 10,000 draws from far more names than people: not reached


def _s2_id(reviewer_id: str, taken: set[str], seed: int) -> str:
    digits = "".join(re.findall(r"\d+", reviewer_id))
    sid = digits if digits and len(digits) <= 12 and digits not in taken else str(50_000_000 + _unit(seed, "s2", reviewer_id) % 40_000_000)
    while sid in taken:
        sid = str(int(sid) + 1)
    taken.add(sid)
    return sid


def _person(index: int, name: tuple[str, str], inst: int, sid: str) -> _Person:
    local = _email_local(*name)
    return _Person(f"person_{index + 1:06d}", name[0], name[1], inst, [f"{local}@{INSTITUTIONS[inst][3]}"], [sid], [])


def plan_world(bench: Benchmark, seed: int) -> tuple[list[_Person], list[ImportedPaper], dict[str, int]]:
    """The people and papers of the world built from ``bench`` (reviewers first, then the query
    papers' authors), and each reviewer's person index by benchmark id."""
    held = held_ratings(bench)
    rated_papers = set(held["paper_id"].to_list())
    profiles = bench.draws[0].filter(pl.col("title").str.strip_chars() != "")
    reviewers = sorted(set(profiles["reviewer_id"].to_list()) | set(held["reviewer_id"].to_list()))
    # A fixed pool (about 4,000 surnames), not one sized by the benchmark: a person keeps their
    # name when the benchmark grows.
    real = [*bench.submissions["title"].to_list(), *bench.submissions["abstract"].to_list(),
            *profiles["title"].to_list(), *profiles["abstract"].to_list()]
    names = _Names(seed, Generator(WorldSpec(seed=seed)).surnames(NAME_POOL_PEOPLE), text_words([t for t in real if t]))
    taken: set[str] = set()
    people = [_person(i, names.draw(f"reviewer:{r}"), _unit(seed, "inst", r) % len(INSTITUTIONS), _s2_id(r, taken, seed))
              for i, r in enumerate(reviewers)]
    person_of = {r: i for i, r in enumerate(reviewers)}
    listed: dict[str, list[int]] = {}  # title key -> reviewers listing it
    text: dict[str, tuple[str, str, str]] = {}  # title key -> (title, abstract, source id), the first given
    for r, pid, title, abstract in profiles.select("reviewer_id", "paper_id", "title", "abstract").iter_rows():
        k = title_key(title)
        if person_of[r] not in listed.setdefault(k, []):
            listed[k].append(person_of[r])
        text.setdefault(k, (title, abstract or "", pid))
    papers: list[ImportedPaper] = []
    query_keys = set()
    subs = bench.submissions.filter(pl.col("paper_id").is_in(list(rated_papers))).sort("paper_id")
    for pid, title, abstract in subs.select("paper_id", "title", "abstract").iter_rows():
        k = title_key(title)
        query_keys.add(k)
        team = []
        for j in range(1 + _unit(seed, "team", pid) % 3):
            who = f"query:{pid}:{j}"
            team.append(len(people))
            sid = str(40_000_000 + len(people))
            while sid in taken:  # a reviewer's own id may lie in this range
                sid = str(int(sid) + 1_000_000)
            taken.add(sid)
            people.append(_person(len(people), names.draw(who), _unit(seed, "inst", who) % len(INSTITUTIONS), sid))
        team += sorted(listed.get(k, []))  # a reviewer who lists the query paper wrote it
        papers.append(ImportedPaper(f"query:{pid}", title, abstract or "", True, pid, team))
    for k in sorted(listed):
        if k not in query_keys:
            title, abstract, source_id = text[k]
            papers.append(ImportedPaper(f"profile:{k}", title, abstract, False, source_id, sorted(listed[k])))
    return people, papers, person_of


def _dated(papers: list[ImportedPaper], seed: int, start: date, end: date) -> tuple[list[_Paper], dict[str, str]]:
    """Each paper with a date in the window (from a hash of its key) and an arXiv id in date
    order; and the arXiv id of each paper's key."""
    t0 = datetime(start.year, start.month, start.day, tzinfo=UTC)
    span = int((datetime(end.year, end.month, end.day, 23, 59, tzinfo=UTC) - t0).total_seconds())
    when = sorted(((t0 + timedelta(seconds=_unit(seed, "date", p.key) % span), p.key, p) for p in papers),
                  key=lambda x: (x[0], x[1]))
    seq: dict[str, int] = {}
    out, ids = [], {}
    for published, key, p in when:
        yymm = published.strftime("%y%m")
        seq[yymm] = seq.get(yymm, 0) + 1
        cat = QUERY_CATEGORY if p.query else PROFILE_CATEGORY
        out.append(_Paper(f"{yymm}.{seq[yymm]:05d}", "imported/query" if p.query else "imported/profile", p.title,
                          p.abstract, p.team, [(1, published)], published, cat, [cat]))
        ids[key] = out[-1].arxiv_id
    return out, ids


def world_key(kind: str, bench: Benchmark, seed: int) -> str:
    """What names an imported world: the source's kind, a digest of everything the world is made
    from (the ratings, the submissions, the first draw's profiles: a benchmark's version may
    cover its ratings file alone), the seed and the format."""
    h = hashlib.sha256()
    for part in (held_ratings(bench), bench.submissions.sort("paper_id"), bench.draws[0]):
        h.update(part.write_csv().encode())
    return f"import-{kind}-{h.hexdigest()[:16]}-s{seed}-f{IMPORT_FORMAT}"


def import_world(out_dir: Path, kind: str, source: Path, bench: Benchmark, seed: int, start: date, end: date,
                 progress: Callable[[str, int, int], None] | None = None, key: str | None = None) -> dict[str, Any]:
    """Write the world built from ``bench`` (read from ``source``, of ``kind``) to ``out_dir`` and
    return its manifest; same benchmark files and seed, same bytes."""
    key = key or world_key(kind, bench, seed)
    people, planned, person_of = plan_world(bench, seed)
    papers, id_of = _dated(planned, seed, start, end)
    spec = WorldSpec(n_papers=len(papers), seed=seed, start=start, end=end, bad_share=0.0, homonym_share=0.0)
    g = Generator(spec)
    shown = _Rendered()
    for i, paper in enumerate(papers):
        render_paper(g, spec, paper, people, "", None, shown)
        if progress and (i % 200 == 0 or i == len(papers) - 1):
            progress("rendering papers", i + 1, len(papers))
    histories = [dict(author_id=people[m].s2_ids[0], json=json.dumps(h, ensure_ascii=False))
                 for m, h in sorted(shown.histories.items())]
    manifest = write_world(out_dir, spec, people, papers, shown, histories, [])
    arxiv_of = {p.source_id: id_of[p.key] for p in planned if p.query}
    held = held_ratings(bench).with_columns(
        pl.col("reviewer_id").replace_strict({r: people[i].pid for r, i in person_of.items()}).alias("person_id"),
        pl.col("paper_id").replace_strict(arxiv_of, default=None).alias("arxiv_id"),
        pl.col("rating").map_elements(survey_level, return_dtype=pl.Int64).alias("level"))
    held.write_parquet(out_dir / "truth" / "benchmark_ratings.parquet")
    pl.DataFrame([{"reviewer_id": r, "person_id": people[i].pid} for r, i in person_of.items()],
                 schema={"reviewer_id": pl.Utf8, "person_id": pl.Utf8}).write_parquet(out_dir / "truth" / "reviewers.parquet")
    manifest.update({
        "notice": (f"Built by revbench from the {kind} benchmark at {source}: real titles and abstracts; its people, "
                   "emails, dates, ids and PDFs are SYNTHETIC, and the survey's answers are the benchmark's ratings."),
        "spec_key": key, "base_key": key,
        "imported": {"kind": kind, "source": str(source), "benchmark_version": bench.version, "format": IMPORT_FORMAT,
                     "query_category": QUERY_CATEGORY, "profile_category": PROFILE_CATEGORY,
                     "queries": sum(p.query for p in planned), "reviewers": len(person_of),
                     "publications": sum(not p.query for p in planned), "rated_pairs": held.height},
    })
    write_atomic(out_dir / "world.json", json.dumps(manifest, indent=2))  # a killed import leaves no half manifest
    return manifest


def ensure_imported_world(out_dir: Path, kind: str, source: Path, bench: Benchmark, seed: int, start: date, end: date,
                          progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """The world built from ``bench``, reused when ``out_dir`` already holds it."""
    key = world_key(kind, bench, seed)  # hashes every rating, submission and profile: once
    path = out_dir / "world.json"
    if path.exists():
        try:
            manifest = json.loads(path.read_text())
        except ValueError:
            manifest = {}  # damaged: built again
        if manifest.get("spec_key") == key:
            return manifest
    return import_world(out_dir, kind, source, bench, seed, start, end, progress, key)
