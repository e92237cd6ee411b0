"""The ``openreview`` kind: an OpenReview-expertise dataset (submissions and reviewer archives as
OpenReview notes) with ``ratings.csv``; its note and folder readers serve the gold standard and
LR-bench too."""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import InputError
from revbench.evaluation.importers.checks import (
    DEFAULT_SCALE,
    PaperTexts,
    files_digest,
    finite_number,
    number_text,
    once,
    parse_json,
    rating,
    read_json,
)
from revbench.evaluation.importers.registry import benchmark_kind
from revbench.evaluation.model import PAPERS_SCHEMA, PROFILE_SCHEMA, RATINGS_SCHEMA, SPLIT_POINTWISE, Benchmark, Split, frame


def _year(value: Any) -> int | None:
    try:
        return int(str(value)[:4]) if value not in (None, "") else None
    except ValueError:
        return None


SECONDS_BELOW = 1e11
"""OpenReview writes dates in milliseconds since the epoch; openreview-expertise's own files (and
other exports) in seconds. A value below this is read as seconds (1e11 s is the year 5138), one at
or above it as milliseconds (1e11 ms is 1973): no date of a paper is mistaken for the other unit."""
FIRST_YEAR = 1900


def _epoch_year(value: Any, where: str, key: str) -> int | None:
    """The year of an OpenReview date (``pdate``/``cdate``/``tcdate``/``mdate``), read in seconds or
    milliseconds by magnitude; ``InputError`` naming ``where`` when neither reading is a plausible
    date (never a silent 1970). Not a number: no date; 0: no date (what an unset date is written as)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value == 0:
        return None
    unit, seconds = ("seconds", value) if abs(value) < SECONDS_BELOW else ("milliseconds", value / 1000)
    last = datetime.now(UTC).year + 1
    try:
        year: int | None = datetime.fromtimestamp(seconds, tz=UTC).year
    except (OverflowError, OSError, ValueError):
        year = None
    # A date within 1970 is far likelier a placeholder or a unit error (any date of our times in
    # seconds, read as milliseconds, lands there) than a paper of that year.
    if year is None or not FIRST_YEAR <= year <= last or year == 1970:
        when = f"in {year}" if year is not None else "beyond any calendar"
        raise InputError(f"{where}: {key} {value!r} is not a date: read as {unit} since 1970 (by its size) it falls "
                         f"{when}; expected a year from {FIRST_YEAR} to {last} other than 1970")
    return year


def note_fields(note: Any, where: str, fallback_id: str | None = None) -> dict[str, Any]:
    """``paper_id, title, abstract, year`` of one OpenReview note (API v1 or v2; LR-bench's papers
    have the same shape); without an id, ``fallback_id`` or the sha1 of the title."""
    if not isinstance(note, dict):
        raise InputError(f"{where}: expected an object with content.title, found {type(note).__name__}")
    content = note.get("content", note)
    if not isinstance(content, dict):
        raise InputError(f"{where}: 'content' is not an object")

    def val(k: str) -> Any:
        v = content.get(k)
        return v.get("value") if isinstance(v, dict) else v
    # The year as OpenReview gives it, best source first: a stated year, then the publication,
    # creation (as shown, then true) and modification dates (API v1 and v2 both keep those at the
    # note's top level).
    year = _year(val("year")) or _year(note.get("year"))
    for key in ("pdate", "cdate", "tcdate", "mdate"):
        year = year or _epoch_year(note.get(key), where, key)
    return {
        "paper_id": str(note.get("id") or fallback_id or hashlib.sha1(str(val("title")).encode()).hexdigest()),
        "title": str(val("title") or ""),
        "abstract": str(val("abstract") or ""),
        "year": year,
    }


BLANK_TITLE = "blank title"


def _jsonl_lines(f: Path) -> list[tuple[int, Any]]:
    """``(line number, note)`` for every non-empty line of one ``.jsonl`` file."""
    return [(i, parse_json(line, f"{f} line {i}"))
            for i, line in enumerate(f.read_text(errors="replace").splitlines(), start=1) if line.strip()]


def _jsonl_notes(f: Path) -> list[tuple[str, Any]]:
    """``(where, note)`` for every non-empty line of one ``.jsonl`` file."""
    return [(f"{f} line {i}", n) for i, n in _jsonl_lines(f)]


def openreview_files(d: Path) -> list[Path]:
    """The files one OpenReview-format dataset is read from, in a fixed order (its version's digest)."""
    subs = [d / "submissions.json"] if (d / "submissions.json").exists() else sorted((d / "submissions").glob("*.jsonl"))
    return [*subs, *sorted((d / "archives").glob("*.jsonl"))]


def read_openreview_notes(d: Path, texts: PaperTexts | None = None) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """Submissions, reviewer profiles and what was dropped (``"<part>: <reason>" -> count``) of one
    OpenReview-expertise dataset. Submissions are ``submissions.json`` (an object by id, or a list)
    or a ``submissions/`` folder of ``<id>.jsonl`` (one note each); profiles are
    ``archives/~<reviewer>.jsonl``. A note with a blank title is dropped: it says nothing of a topic.
    A submission id given two titles or abstracts is refused, within the dataset and across the
    datasets that share ``texts`` (the gold standard's draws)."""
    texts = PaperTexts() if texts is None else texts
    sub_path, sub_dir = d / "submissions.json", d / "submissions"
    if sub_path.exists():
        raw = read_json(sub_path)
        if not isinstance(raw, dict | list):
            raise InputError(f"{sub_path}: expected an object of submissions or a list")
        notes = list(raw.items()) if isinstance(raw, dict) else [(None, n) for n in raw]
        subs = []
        for i, (k, n) in enumerate(notes):
            subs.append(note_fields(n, f"{sub_path} submission {k or i}", k))
            texts.check(subs[-1]["paper_id"], subs[-1]["title"], subs[-1]["abstract"], sub_path, f"submission {k or i}")
    elif sub_dir.is_dir():
        subs = []
        for f in sorted(sub_dir.glob("*.jsonl")):
            for line, n in _jsonl_lines(f):
                subs.append(note_fields(n, f"{f} line {line}", f.stem))
                texts.check(subs[-1]["paper_id"], subs[-1]["title"], subs[-1]["abstract"], f, f"line {line}")
        if not subs:
            raise InputError(f"{sub_dir}: no <id>.jsonl submission notes")
    else:
        raise InputError(f"{d}: no submissions.json or submissions/ folder of <id>.jsonl notes")
    archives = d / "archives"
    if not archives.is_dir():
        raise InputError(f"{d}: no archives/ folder of reviewer profiles")
    rows = [{"reviewer_id": f.stem.lstrip("~"), **note_fields(n, where)}
            for f in sorted(archives.glob("*.jsonl")) for where, n in _jsonl_notes(f)]
    dropped: dict[str, int] = {}
    kept_subs = [s for s in subs if s["title"].strip()]
    kept_rows = [r for r in rows if r["title"].strip()]
    for part, before, after in (("submissions", subs, kept_subs), ("archives", rows, kept_rows)):
        if len(before) > len(after):
            dropped[f"{part}: {BLANK_TITLE}"] = len(before) - len(after)
    return frame(kept_subs, PAPERS_SCHEMA), frame(kept_rows, PROFILE_SCHEMA), dropped


def read_openreview_dir(d: Path, texts: PaperTexts | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Submissions and reviewer profiles of one OpenReview-format dataset (see :func:`read_openreview_notes`)."""
    submissions, profiles, _ = read_openreview_notes(d, texts)
    return submissions, profiles


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
        once(first_row, (r.lstrip("~"), p), row_no, f"{path} row {row_no}", "rating")
        try:
            value = number_text(x, f"{path} row {row_no}")
        except (TypeError, ValueError):
            raise InputError(f"{path} row {row_no}: rating {x!r} is not a number") from None
        rows.append({"reviewer_id": r.lstrip("~"), "paper_id": p, "rating": rating(value, f"{path} row {row_no}", scale)})
    return frame(rows, RATINGS_SCHEMA)


@benchmark_kind("openreview")
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
        name="openreview", version=files_digest(*openreview_files(path), rf), submissions=submissions, draws=[profiles],
        splits=[Split(SPLIT_POINTWISE, ratings=kept, candidate_lists=True)], scale=scale, dropped=dropped,
    )
