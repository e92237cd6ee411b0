"""Importers: public benchmark layouts and prediction files into the evaluation model.

Every file is checked against its declared format before anything is computed: JSON that
parses, required keys present, ratings within the benchmark's scale, scores finite numbers
(never strings, booleans, NaN or infinity). An error is one ``InputError`` line naming the file,
the row or key, and what was expected.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import InputError
from revbench.evaluation.model import (
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    RATINGS_SCHEMA,
    SCORES_SCHEMA,
    SPLIT_GOLD,
    SPLIT_LR_PC,
    SPLIT_LR_RC,
    SPLIT_PAPER_CENTRIC,
    SPLIT_POINTWISE,
    SPLIT_REVIEWER_CENTRIC,
    TUPLES_SCHEMA,
    Benchmark,
    Scores,
    Split,
    frame,
)

ImportError_ = InputError  # the name earlier code and tests use
DEFAULT_SCALE = (1.0, 5.0)
GOLD_COLUMNS = ["ParticipantID", *[f"Paper{i}" for i in range(1, 11)], *[f"Expertise{i}" for i in range(1, 11)]]
LR_FLAT_KEYS = ("anchor_id", "positive_id", "negative_id", "positive_score", "negative_score",
                "positive_ref_score", "negative_ref_score")


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def file_sha256(*paths: Path) -> str:
    """sha256 over the files' bytes (in the given order)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()


MAX_INT_DIGITS = 309
"""An integer literal longer than this is no number a float can hold (floats end near 1.8e308)."""


class HugeNumber(str):
    """A number literal too large for a float, kept as its text so that the check of the value
    it stands for names it (Python refuses to convert integers beyond 4,300 digits, and a float
    literal beyond ~1.8e308 would silently become infinity)."""

    def shown(self) -> str:
        """The literal as an error shows it (a long one shortened, with its length)."""
        return repr(str(self)) if len(self) <= 24 else f"{self[:8]}... ({len(self)} characters)"


def _parse_int(text: str) -> int | HugeNumber:
    return HugeNumber(text) if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def _parse_float(text: str) -> float | HugeNumber:
    value = float(text)
    return HugeNumber(text) if math.isinf(value) else value


def number_text(text: str, where: str) -> float:
    """A number written as text (a CSV or TSV cell): ``ValueError`` when it is none; a literal
    too large for a float is an error naming ``where`` (``float`` would make it infinity)."""
    value = float(text)
    if math.isinf(value) and "inf" not in text.lower():
        raise InputError(f"{where}: {HugeNumber(text.strip()).shown()} is too large to be a number here")
    return value


class _Duplicates:
    """Objects that repeat a key, as ``json`` builds them (its default keeps the last value)."""

    def __init__(self) -> None:
        self.found: list[tuple[dict[str, Any], str]] = []

    def hook(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs) and not self.found:
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    self.found.append((obj, key))
                    break
                seen.add(key)
        return obj


def _path_to(data: Any, target: Any) -> list[str] | None:
    """Where ``target`` sits inside ``data``, as the keys and list items leading to it."""
    stack: list[tuple[Any, list[str]]] = [(data, [])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            stack += [(v, [*path, repr(k)]) for k, v in node.items() if isinstance(v, dict | list)]
        elif isinstance(node, list):
            stack += [(v, [*path, f"item {i}"]) for i, v in enumerate(node) if isinstance(v, dict | list)]
    return None


def parse_json(text: str, where: str) -> Any:
    """Parsed JSON, or one error naming ``where`` and what broke: invalid syntax (with line and
    column), nesting deeper than the parser goes, or an object that repeats a key (JSON parsers
    silently keep the last value: a duplicate score or rating would win unseen)."""
    dups = _Duplicates()
    try:
        data = json.loads(text, object_pairs_hook=dups.hook, parse_int=_parse_int, parse_float=_parse_float)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(f"{where}: not valid JSON (nested deeper than the parser allows)") from None
    if dups.found:
        obj, key = dups.found[0]
        path = _path_to(data, obj)
        inside = f"the object at {' > '.join(path)}" if path else "the top-level object"
        raise InputError(f"{where}: key {key!r} appears twice in {inside}; give each key once "
                         "(JSON readers would silently keep the last value)")
    return data


def read_json(path: Path) -> Any:
    """Parsed JSON, or an error naming the file and where it broke (see :func:`parse_json`)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_json(text, str(path))


def finite_number(value: Any, where: str) -> float:
    """A score or rating as a float: a JSON number that is finite, nothing else."""
    if isinstance(value, HugeNumber):
        raise InputError(f"{where}: {value.shown()} is too large to be a number here")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {value!r} is not a number")
    try:
        number = float(value)
    except OverflowError:
        raise InputError(f"{where}: an integer of about {int(value.bit_length() * 0.30103) + 1} digits is too large "
                         "to be a number here") from None
    if not math.isfinite(number):
        raise InputError(f"{where}: {value!r} is not a finite number")
    return number


def rating(value: Any, where: str, scale: tuple[float, float]) -> float:
    """A rating within the benchmark's scale."""
    x = finite_number(value, where)
    if not scale[0] <= x <= scale[1]:
        raise InputError(f"{where}: rating {x:g} is outside the benchmark's {scale[0]:g}-{scale[1]:g} scale")
    return x


def _year(value: Any) -> int | None:
    try:
        return int(str(value)[:4]) if value not in (None, "") else None
    except ValueError:
        return None


def _epoch_year(value: Any) -> int | None:
    """The year of an OpenReview date (``pdate``/``cdate``/``mdate``: milliseconds since the epoch)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    try:
        return datetime.fromtimestamp(value / 1000, tz=UTC).year
    except (OverflowError, OSError, ValueError):
        return None


def _note(note: Any, where: str, fallback_id: str | None = None) -> dict[str, Any]:
    if not isinstance(note, dict):
        raise InputError(f"{where}: expected an object with content.title, found {type(note).__name__}")
    content = note.get("content", note)
    if not isinstance(content, dict):
        raise InputError(f"{where}: 'content' is not an object")

    def val(k: str) -> Any:
        v = content.get(k)
        return v.get("value") if isinstance(v, dict) else v
    # The year as OpenReview gives it, best source first: a stated year, then the publication,
    # creation and modification dates (API v1 and v2 both keep those at the note's top level).
    year = _year(val("year")) or _year(note.get("year"))
    for key in ("pdate", "cdate", "mdate"):
        year = year or _epoch_year(note.get(key))
    return {
        "paper_id": str(note.get("id") or fallback_id or hashlib.sha1(str(val("title")).encode()).hexdigest()),
        "title": str(val("title") or ""),
        "abstract": str(val("abstract") or ""),
        "year": year,
    }


BLANK_TITLE = "blank title"


def _jsonl_notes(f: Path) -> list[tuple[str, Any]]:
    """``(where, note)`` for every non-empty line of one ``.jsonl`` file."""
    return [(f"{f} line {i}", parse_json(line, f"{f} line {i}"))
            for i, line in enumerate(f.read_text(errors="replace").splitlines(), start=1) if line.strip()]


def openreview_files(d: Path) -> list[Path]:
    """The files one OpenReview-format dataset is read from, in a fixed order (its version's digest)."""
    subs = [d / "submissions.json"] if (d / "submissions.json").exists() else sorted((d / "submissions").glob("*.jsonl"))
    return [*subs, *sorted((d / "archives").glob("*.jsonl"))]


def read_openreview_notes(d: Path) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """Submissions, reviewer profiles and what was dropped (``"<part>: <reason>" -> count``) of one
    OpenReview-expertise dataset. Submissions are ``submissions.json`` (an object by id, or a list)
    or a ``submissions/`` folder of ``<id>.jsonl`` (one note each); profiles are
    ``archives/~<reviewer>.jsonl``. A note with a blank title is dropped: it says nothing of a topic."""
    sub_path, sub_dir = d / "submissions.json", d / "submissions"
    if sub_path.exists():
        raw = read_json(sub_path)
        if not isinstance(raw, dict | list):
            raise InputError(f"{sub_path}: expected an object of submissions or a list")
        notes = list(raw.items()) if isinstance(raw, dict) else [(None, n) for n in raw]
        subs = [_note(n, f"{sub_path} submission {k or i}", k) for i, (k, n) in enumerate(notes)]
    elif sub_dir.is_dir():
        subs = [_note(n, where, f.stem) for f in sorted(sub_dir.glob("*.jsonl")) for where, n in _jsonl_notes(f)]
        if not subs:
            raise InputError(f"{sub_dir}: no <id>.jsonl submission notes")
    else:
        raise InputError(f"{d}: no submissions.json or submissions/ folder of <id>.jsonl notes")
    archives = d / "archives"
    if not archives.is_dir():
        raise InputError(f"{d}: no archives/ folder of reviewer profiles")
    rows = [{"reviewer_id": f.stem.lstrip("~"), **_note(n, where)}
            for f in sorted(archives.glob("*.jsonl")) for where, n in _jsonl_notes(f)]
    dropped: dict[str, int] = {}
    kept_subs = [s for s in subs if s["title"].strip()]
    kept_rows = [r for r in rows if r["title"].strip()]
    for part, before, after in (("submissions", subs, kept_subs), ("archives", rows, kept_rows)):
        if len(before) > len(after):
            dropped[f"{part}: {BLANK_TITLE}"] = len(before) - len(after)
    return frame(kept_subs, PAPERS_SCHEMA), frame(kept_rows, PROFILE_SCHEMA), dropped


def read_openreview_dir(d: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Submissions and reviewer profiles of one OpenReview-format dataset (see :func:`read_openreview_notes`)."""
    submissions, profiles, _ = read_openreview_notes(d)
    return submissions, profiles


def _once(first: dict[tuple[str, str], int], key: tuple[str, str], row: int, where: str, what: str) -> None:
    """Refuse a (reviewer, paper) pair given a second time: the last one would silently win."""
    if key in first:
        raise InputError(f"{where}: reviewer {key[0]!r} and paper {key[1]!r} already have a {what} in row "
                         f"{first[key]}; give each pair once")
    first[key] = row


def read_gold_evaluations(path: Path, scale: tuple[float, float] = DEFAULT_SCALE) -> pl.DataFrame:
    """The gold standard's tab-separated ratings: ``ParticipantID, Paper1..10, Expertise1..10``."""
    try:
        table = pl.read_csv(path, separator="\t", infer_schema_length=0)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: not a readable tab-separated file ({str(exc).splitlines()[0]})") from None
    missing = [c for c in GOLD_COLUMNS if c not in table.columns]
    if missing:
        sep = " (it looks comma-separated)" if "," in (table.columns[0] if table.columns else "") else ""
        raise InputError(f"{path}: expected tab-separated columns ParticipantID, Paper1..Paper10, Expertise1..Expertise10; "
                         f"missing {', '.join(missing[:3])}{'...' if len(missing) > 3 else ''}{sep}")
    ratings = []
    first_row: dict[str, int] = {}
    for row_no, row in enumerate(table.iter_rows(named=True), start=2):
        who = (row["ParticipantID"] or "").strip()
        if not who:
            raise InputError(f"{path} row {row_no}: empty ParticipantID")
        if who in first_row:
            raise InputError(f"{path} row {row_no}: participant {who!r} also has row {first_row[who]}; "
                             "give each participant one row (a second one would silently replace ratings)")
        first_row[who] = row_no
        papers: dict[str, int] = {}
        for i in range(1, 11):
            paper, exp = (row.get(f"Paper{i}") or "").strip(), (row.get(f"Expertise{i}") or "").strip()
            if bool(paper) != bool(exp):
                raise InputError(f"{path} row {row_no}: Paper{i} and Expertise{i} must both be given or both be empty")
            if paper:
                if paper in papers:
                    raise InputError(f"{path} row {row_no}: Paper{i} {paper!r} is also Paper{papers[paper]}; "
                                     "rate each paper once")
                papers[paper] = i
                try:
                    value = number_text(exp, f"{path} row {row_no} Expertise{i}")
                except ValueError:
                    raise InputError(f"{path} row {row_no}: Expertise{i} {exp!r} is not a number") from None
                ratings.append({"reviewer_id": who, "paper_id": paper,
                                "rating": rating(value, f"{path} row {row_no} Expertise{i}", scale)})
    return frame(ratings, RATINGS_SCHEMA)


def load_goldstandard(path: Path) -> Benchmark:
    """The CMU gold standard: the public repository (``data/evaluations.csv`` and
    ``evaluation_datasets/d_20_<x>``) or a slice laid out flat (``evaluations.tsv``, ``d_20_<x>``)."""
    candidates = [path / "data" / "evaluations.csv", path / "evaluations.csv", path / "evaluations.tsv"]
    ev = next((c for c in candidates if c.exists()), None)
    if ev is None:
        raise InputError(f"{path}: none of {', '.join(str(c) for c in candidates)} exists")
    ratings_df = read_gold_evaluations(ev)
    base = path / "evaluation_datasets" if (path / "evaluation_datasets").is_dir() else path
    draw_dirs = sorted(
        (d for d in base.iterdir() if re.fullmatch(r"d_20_\d+", d.name)), key=lambda d: int(d.name.rsplit("_", 1)[1])
    )
    if not draw_dirs:
        raise InputError(f"{base}: no d_20_<x> evaluation datasets")
    subs, draws = [], []
    for d in draw_dirs:
        s, prof = read_openreview_dir(d)
        subs.append(s)
        draws.append(prof)
    submissions = pl.concat(subs).unique("paper_id", keep="first").sort("paper_id")
    reviewers = set(draws[0]["reviewer_id"].unique())
    ratings_df = ratings_df.filter(pl.col("reviewer_id").is_in(list(reviewers)))
    return Benchmark(
        name="goldstandard", version=_digest(ev), submissions=submissions, draws=draws,
        splits=[Split(SPLIT_GOLD, ratings=ratings_df)], scale=DEFAULT_SCALE,
    )


def _lr_file(path: Path, stem: str) -> Path | None:
    for name in (f"{stem}.json", f"{stem}.sample.json"):
        if (path / name).exists():
            return path / name
    return None


def _lr_tuples(items: Any, path: Path, scale: tuple[float, float]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a list of {{anchor, positive, negative}} tuples")
    tuples, papers, profiles = [], [], []
    first_item: dict[tuple[str, ...], int] = {}
    for i, t in enumerate(items):
        where = f"{path} item {i}"
        if not isinstance(t, dict) or not all(isinstance(t.get(k), dict) for k in ("anchor", "positive", "negative")):
            raise InputError(f"{where}: expected objects 'anchor', 'positive' and 'negative'")
        a, pos, neg = t["anchor"], t["positive"], t["negative"]
        key = tuple(str(x.get(k)) for x in (a, pos, neg) for k in ("paper_id", "author_id"))
        if key in first_item:
            raise InputError(f"{where}: the same tuple as item {first_item[key]}; give each tuple once")
        first_item[key] = i
        r_pos = rating(pos.get("score"), f"{where} positive.score", scale)
        r_neg = rating(neg.get("score"), f"{where} negative.score", scale)
        if "author_id" in pos:  # paper-centric: anchor paper, candidate reviewers
            if "paper_id" not in a or "author_id" not in neg:
                raise InputError(f"{where}: a paper-centric tuple needs anchor.paper_id and positive/negative author_id")
            pid = str(a["paper_id"])
            papers.append({"paper_id": pid, "title": a.get("paper_title", a.get("title", "")), "abstract": a.get("abstract", "")})
            for side in (pos, neg):
                for j, p in enumerate(side.get("papers", [])):
                    profiles.append({"reviewer_id": str(side["author_id"]), **_note(p, f"{where} papers[{j}]")})
            tuples.append(dict(reviewer_pos=str(pos["author_id"]), paper_pos=pid, reviewer_neg=str(neg["author_id"]),
                               paper_neg=pid, rating_pos=r_pos, rating_neg=r_neg, cluster=pid))
        else:  # reviewer-centric: anchor reviewer, candidate papers
            if "author_id" not in a or "paper_id" not in pos or "paper_id" not in neg:
                raise InputError(f"{where}: a reviewer-centric tuple needs anchor.author_id and positive/negative paper_id")
            rid = str(a["author_id"])
            for j, p in enumerate(a.get("papers", [])):
                profiles.append({"reviewer_id": rid, **_note(p, f"{where} anchor.papers[{j}]")})
            for side in (pos, neg):
                papers.append({"paper_id": str(side["paper_id"]), "title": side.get("paper_title", side.get("title", "")),
                               "abstract": side.get("abstract", "")})
            tuples.append(dict(reviewer_pos=rid, paper_pos=str(pos["paper_id"]), reviewer_neg=rid,
                               paper_neg=str(neg["paper_id"]), rating_pos=r_pos, rating_neg=r_neg, cluster=rid))
    return tuples, papers, profiles


def load_lrbench(path: Path) -> Benchmark:
    """LR-bench: ``evaluations_pc.json`` and/or ``evaluations_rc.json`` (anchor, positive,
    negative), with ``keywords.json`` when present."""
    splits, papers, profiles, files = [], [], [], []
    for stem, split_name in (("evaluations_pc", SPLIT_LR_PC), ("evaluations_rc", SPLIT_LR_RC)):
        f = _lr_file(path, stem)
        if f is None:
            continue
        files.append(f)
        t, p, prof = _lr_tuples(read_json(f), f, DEFAULT_SCALE)
        papers += p
        profiles += prof
        splits.append(Split(split_name, tuples=frame(t, TUPLES_SCHEMA)))
    if not splits:
        raise InputError(f"{path}: neither evaluations_pc.json nor evaluations_rc.json")
    keywords: dict[str, str] = {}
    kf = _lr_file(path, "keywords")
    if kf:
        raw = read_json(kf)
        if not isinstance(raw, list) or not all(isinstance(k, dict) and "paper_title" in k and "keywords" in k for k in raw):
            raise InputError(f"{kf}: expected a list of {{paper_title, keywords}}")
        keywords = {k["paper_title"]: k["keywords"] for k in raw}
    return Benchmark(
        name="lrbench", version=_digest(*files),
        submissions=frame(papers, PAPERS_SCHEMA).unique("paper_id", keep="first").sort("paper_id"),
        draws=[frame(profiles, PROFILE_SCHEMA).unique(["reviewer_id", "paper_id"], keep="first", maintain_order=True)],
        splits=splits, keywords=keywords, scale=DEFAULT_SCALE,
    )


def dataset_scale(path: Path) -> tuple[float, float]:
    """The rating scale a dataset declares in ``benchmark.json`` (``{"scale": [1, 5]}``), 1-5 by default."""
    meta = path / "benchmark.json"
    if not meta.exists():
        return DEFAULT_SCALE
    raw = read_json(meta)
    scale = raw.get("scale") if isinstance(raw, dict) else None
    if not (isinstance(scale, list) and len(scale) == 2):
        raise InputError(f"{meta}: expected {{\"scale\": [low, high]}}")
    lo, hi = (finite_number(x, f"{meta} scale") for x in scale)
    if lo >= hi:
        raise InputError(f"{meta}: scale low {lo:g} is not below high {hi:g}")
    return lo, hi


def read_ratings_csv(path: Path, scale: tuple[float, float]) -> pl.DataFrame:
    """``reviewer,paper,rating`` rows, every rating a number within ``scale``."""
    try:
        raw = pl.read_csv(path, infer_schema_length=0)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in ("reviewer", "paper", "rating") if c not in raw.columns]
    if missing:
        raise InputError(f"{path}: expected columns reviewer,paper,rating; missing {', '.join(missing)}")
    rows = []
    first_row: dict[tuple[str, str], int] = {}
    for row_no, (r, p, x) in enumerate(raw.select("reviewer", "paper", "rating").iter_rows(), start=2):
        if not r or not p:
            raise InputError(f"{path} row {row_no}: empty reviewer or paper")
        _once(first_row, (r.lstrip("~"), p), row_no, f"{path} row {row_no}", "rating")
        try:
            value = number_text(x, f"{path} row {row_no}")
        except (TypeError, ValueError):
            raise InputError(f"{path} row {row_no}: rating {x!r} is not a number") from None
        rows.append({"reviewer_id": r.lstrip("~"), "paper_id": p, "rating": rating(value, f"{path} row {row_no}", scale)})
    return frame(rows, RATINGS_SCHEMA)


def load_openreview(path: Path) -> Benchmark:
    """An OpenReview-format dataset (either layout, see :func:`read_openreview_notes`) with
    ``ratings.csv`` (``reviewer,paper,rating``). Ratings of a dropped submission are dropped too, counted."""
    submissions, profiles, dropped = read_openreview_notes(path)
    rf = path / "ratings.csv"
    if not rf.exists():
        raise InputError(f"{path}: no ratings.csv (reviewer,paper,rating)")
    scale = dataset_scale(path)
    ratings = read_ratings_csv(rf, scale)
    kept = ratings.filter(pl.col("paper_id").is_in(submissions["paper_id"].implode()))
    if kept.height < ratings.height:
        dropped["ratings: submission dropped or missing"] = ratings.height - kept.height
    return Benchmark(
        name="openreview", version=_digest(*openreview_files(path), rf), submissions=submissions, draws=[profiles],
        splits=[Split(SPLIT_POINTWISE, ratings=kept, candidate_lists=True)], scale=scale, dropped=dropped,
    )


def scores_from_json(data: Any, path: Path) -> pl.DataFrame:
    """``{reviewer: {paper: score}}`` as a scores frame; every score a finite number."""
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InputError(f"{path}: expected {{reviewer: {{paper: score}}}}")
    rows = [{"reviewer_id": str(r), "paper_id": str(p),
             "score": finite_number(s, f"{path} reviewer {r!r} paper {p!r}")}
            for r, d in data.items() for p, s in d.items()]
    return frame(rows, SCORES_SCHEMA)


def scores_from_csv(path: Path) -> pl.DataFrame:
    """OpenReview ``submission,profile,score`` rows (no header) as a scores frame."""
    try:
        raw = pl.read_csv(path, has_header=False, infer_schema_length=0)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    if raw.width != 3:
        raise InputError(f"{path}: expected 3 columns submission,profile,score; found {raw.width}")
    rows = []
    first_row: dict[tuple[str, str], int] = {}
    for row_no, (p, r, s) in enumerate(raw.iter_rows(), start=1):
        _once(first_row, ((r or "").lstrip("~"), p), row_no, f"{path} row {row_no}", "score")
        try:
            value = number_text(s, f"{path} row {row_no} score")
        except (TypeError, ValueError):
            raise InputError(f"{path} row {row_no}: score {s!r} is not a number") from None
        rows.append({"reviewer_id": (r or "").lstrip("~"), "paper_id": p,
                     "score": finite_number(value, f"{path} row {row_no} score")})
    return frame(rows, SCORES_SCHEMA)


def is_lr_flat(path: Path) -> bool:
    if path.suffix != ".json" or not path.is_file():
        return False
    head = path.read_bytes()[:2000].decode("utf-8", errors="replace")
    return '"anchor_id"' in head and '"positive_ref_score"' in head


def load_lr_flat(path: Path) -> tuple[Split, pl.DataFrame]:
    """LR-bench's flat predictions carry their own labels: a split and the scores on it."""
    items = read_json(path)
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a list of tuples with {', '.join(LR_FLAT_KEYS)}")
    tuples, scores = [], []
    kinds = set()
    first_item: dict[tuple[str, str, str, str], int] = {}
    first_score: dict[tuple[str, str], tuple[float, int]] = {}
    for i, t in enumerate(items):
        where = f"{path} item {i}"
        missing = [k for k in LR_FLAT_KEYS if not isinstance(t, dict) or k not in t]
        if missing:
            raise InputError(f"{where}: missing {', '.join(missing)}")
        kind = t.get("type", "paper_centric")
        if kind not in ("paper_centric", "reviewer_centric"):
            raise InputError(f"{where}: type {kind!r} is neither paper_centric nor reviewer_centric")
        kinds.add(kind)
        a, p, n = str(t["anchor_id"]), str(t["positive_id"]), str(t["negative_id"])
        if (kind, a, p, n) in first_item:
            raise InputError(f"{where}: the same tuple ({a}, {p}, {n}) as item {first_item[kind, a, p, n]}; "
                             "give each tuple once")
        first_item[kind, a, p, n] = i
        pos, neg = ((p, a), (n, a)) if kind == "paper_centric" else ((a, p), (a, n))
        for pair, field in ((pos, "positive_score"), (neg, "negative_score")):
            value = finite_number(t[field], f"{where} {field}")
            earlier = first_score.setdefault(pair, (value, i))
            if earlier[0] != value:
                raise InputError(f"{where} {field}: reviewer {pair[0]!r} and paper {pair[1]!r} have score {value:g} here "
                                 f"and {earlier[0]:g} in item {earlier[1]}; one pair has one score")
        tuples.append(dict(reviewer_pos=pos[0], paper_pos=pos[1], reviewer_neg=neg[0], paper_neg=neg[1],
                           rating_pos=rating(t["positive_ref_score"], f"{where} positive_ref_score", DEFAULT_SCALE),
                           rating_neg=rating(t["negative_ref_score"], f"{where} negative_ref_score", DEFAULT_SCALE),
                           cluster=a))
        scores.append({"reviewer_id": pos[0], "paper_id": pos[1], "score": finite_number(t["positive_score"], f"{where} positive_score")})
        scores.append({"reviewer_id": neg[0], "paper_id": neg[1], "score": finite_number(t["negative_score"], f"{where} negative_score")})
    if not tuples:
        raise InputError(f"{path}: no tuples")
    name = SPLIT_LR_PC if kinds == {"paper_centric"} else SPLIT_LR_RC if kinds == {"reviewer_centric"} else "lr_mixed"
    return Split(name, tuples=frame(tuples, TUPLES_SCHEMA)), frame(scores, SCORES_SCHEMA).unique(
        ["reviewer_id", "paper_id"], keep="first", maintain_order=True
    )


def load_predictions(path: Path, name: str, benchmark: Benchmark) -> Scores:
    """Scores computed elsewhere, one frame per draw of ``benchmark``.

    A file serves every draw; a directory is searched per draw for the gold standard's
    ``<name>_d_20_<x>*.json`` or ``d_20_<x>/predictions_<name>.json``.
    """
    def read(p: Path) -> pl.DataFrame:
        if p.suffix == ".csv":
            return scores_from_csv(p)
        if is_lr_flat(p):
            return load_lr_flat(p)[1]
        return scores_from_json(read_json(p), p)

    if path.is_file():
        scores = read(path)
        return Scores(name, [scores] * len(benchmark.draws), f"predictions:{path.name}", file_sha256(path))
    draws, files = [], []
    for x in range(1, len(benchmark.draws) + 1):
        found = sorted(path.glob(f"{name}_d_20_{x}_*.json")) + sorted(path.glob(f"{name}_d_20_{x}.json"))
        found += [p for p in (path / f"d_20_{x}" / f"predictions_{name}.json",) if p.exists()]
        if not found:
            raise InputError(f"{path}: no predictions of {name!r} for draw d_20_{x}")
        files.append(found[0])
        draws.append(read(found[0]))
    return Scores(name, draws, f"predictions:{path.name}/", file_sha256(*files))


def coverage(benchmark: Benchmark, scores: Scores) -> tuple[int, int, tuple[str, str] | None]:
    """(covered, needed, an example of a missing pair) of the (reviewer, paper) pairs the
    benchmark's splits need, in the least covered draw."""
    needed = benchmark.pairs_needed()
    worst = (needed.height, needed.height, None)
    for draw in scores.draws:
        got = needed.join(draw.select("reviewer_id", "paper_id").unique(), on=["reviewer_id", "paper_id"], how="semi")
        if got.height < worst[0]:
            missing = needed.join(got, on=["reviewer_id", "paper_id"], how="anti").row(0)
            worst = (got.height, needed.height, (missing[0], missing[1]))
    return worst


def load_warehouse(path: Path, profile_max_papers: int = 20) -> Benchmark:
    """The warehouse's own benchmark, built by the ratings flow: the kept ratings as the
    pointwise split (each rated paper with its list of rated candidates), the paper-centric and
    reviewer-centric tuples as two more splits, the rated papers as submissions, and each rater's
    most recent corpus papers (at most ``profile_max_papers``; rated papers left out) as profile."""
    from revbench.warehouse import Warehouse

    with Warehouse.open(path, read_only=True) as wh:
        if not wh.has_table("rating_tuples"):
            raise InputError(f"the warehouse at {path} predates the ratings stage: run `revbench ratings` first")
        f = wh.benchmark_frames(profile_max_papers)
    if f["ratings"].height == 0:
        raise InputError(f"the warehouse at {path} holds no kept ratings yet: send a survey round (`revbench survey send`) "
                         "and pull its answers (`revbench ratings`) first")
    digest = hashlib.sha256()
    for name in ("ratings", "tuples"):
        digest.update(f[name].write_csv().encode())
    return Benchmark(
        name="warehouse", version=digest.hexdigest()[:12], submissions=f["papers"].cast(PAPERS_SCHEMA),
        draws=[f["profiles"].cast(PROFILE_SCHEMA)],
        splits=[Split(SPLIT_POINTWISE, ratings=f["ratings"].cast(RATINGS_SCHEMA), candidate_lists=True),
                *pairwise_splits(f["tuples"])],
    )


def pairwise_splits(t: pl.DataFrame) -> list[Split]:
    """The paper-centric and reviewer-centric splits of revbench's tuples (``kind, anchor_id,
    positive_id, negative_id, rating_pos, rating_neg``); the anchor is the resampled cluster."""
    anchor, pos, neg = pl.col("anchor_id"), pl.col("positive_id"), pl.col("negative_id")
    ratings = (pl.col("rating_pos").cast(pl.Float64), pl.col("rating_neg").cast(pl.Float64), anchor.alias("cluster"))
    pc = t.filter(pl.col("kind") == "paper_centric").select(
        pos.alias("reviewer_pos"), anchor.alias("paper_pos"), neg.alias("reviewer_neg"), anchor.alias("paper_neg"), *ratings)
    rc = t.filter(pl.col("kind") == "reviewer_centric").select(
        anchor.alias("reviewer_pos"), pos.alias("paper_pos"), anchor.alias("reviewer_neg"), neg.alias("paper_neg"), *ratings)
    return [Split(SPLIT_PAPER_CENTRIC, tuples=pc.cast(TUPLES_SCHEMA)),
            Split(SPLIT_REVIEWER_CENTRIC, tuples=rc.cast(TUPLES_SCHEMA))]


def load_release(path: Path) -> Benchmark:
    """A revbench release folder (``data/*.parquet``): the pointwise ratings with candidate lists,
    the paper-centric and reviewer-centric tuples, the papers as submissions and the reviewers'
    publications as profiles (a publication's id is the sha1 of its title, as the ``lrbench``
    importer gives the same publication from the JSON files, so both read the same benchmark).
    Every file is first checked against the folder's ``manifest.json`` (``ReleaseTampered``
    names the first that differs); the benchmark carries the manifest's sha256 as its digest."""
    from revbench.release_files import verify_release
    from revbench.schemas.release import RELEASE_TABLES

    data = path / "data"
    missing = [t.name for t in RELEASE_TABLES if not (data / f"{t.name}.parquet").is_file()]
    if missing and not (path / "manifest.json").is_file():
        raise InputError(f"{path}: not a revbench release (no data/{missing[0]}.parquet)")
    release = verify_release(path)  # every file as its manifest lists it, before any is read
    try:
        t = {tab.name: tab.conform(pl.read_parquet(data / f"{tab.name}.parquet")) for tab in RELEASE_TABLES}
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"{path}: a release file cannot be read ({str(exc).splitlines()[0]})") from None
    pubs = t["reviewers"].explode("publications").drop_nulls("publications").unnest("publications")
    profiles = pubs.select(pl.col("reviewer_id"),
                           pl.col("title").map_elements(lambda x: hashlib.sha1(str(x).encode()).hexdigest(),
                                                        return_dtype=pl.Utf8).alias("paper_id"),
                           "title", "abstract", "year").unique(["reviewer_id", "paper_id"], keep="first", maintain_order=True)
    tuples = pl.concat([  # the release's two tuple tables in the warehouse's one shape
        t["paper_centric"].select(pl.lit("paper_centric").alias("kind"), pl.col("paper_id").alias("anchor_id"),
                                  pl.col("reviewer_pos").alias("positive_id"), pl.col("reviewer_neg").alias("negative_id"),
                                  "rating_pos", "rating_neg"),
        t["reviewer_centric"].select(pl.lit("reviewer_centric").alias("kind"), pl.col("reviewer_id").alias("anchor_id"),
                                     pl.col("paper_pos").alias("positive_id"), pl.col("paper_neg").alias("negative_id"),
                                     "rating_pos", "rating_neg")])
    return Benchmark(
        name="release", version=release.version, digest=release.digest,
        submissions=t["papers"].select("paper_id", "title", "abstract", "year").cast(PAPERS_SCHEMA),
        draws=[profiles.cast(PROFILE_SCHEMA)],
        splits=[Split(SPLIT_POINTWISE, ratings=t["pointwise"].cast({"rating": pl.Float64}), candidate_lists=True),
                *pairwise_splits(tuples)],
    )


def load_benchmark(kind: str, path: Path) -> Benchmark:
    """A benchmark by kind: ``goldstandard``, ``lrbench``, ``openreview``, ``warehouse`` or ``release``."""
    if not path.exists():
        raise InputError(f"{path} does not exist")
    loaders = {"goldstandard": load_goldstandard, "lrbench": load_lrbench, "openreview": load_openreview,
               "warehouse": load_warehouse, "release": load_release}
    if kind not in loaders:
        raise InputError(f"unknown benchmark kind {kind!r}; expected one of {sorted(loaders)}")
    return loaders[kind](path)
