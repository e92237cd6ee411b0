"""Crawl arXiv by category over last-revision-date slices."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from datetime import UTC, date, datetime, time, timedelta

import polars as pl

from revbench.clients.arxiv_api import API_CEILING, ArxivClient, ArxivRecord
from revbench.retry import PermanentError
from revbench.schemas.tables import ARXIV_RECORDS


def plan_slices(since: date, until: date, slice_days: int) -> list[tuple[datetime, datetime]]:
    """Consecutive [start, end] minute windows covering ``since``..``until`` (both inclusive)."""
    if until < since:
        raise ValueError(f"--until {until} is before --since {since}")
    out = []
    day = since
    while day <= until:
        last = min(day + timedelta(days=slice_days - 1), until)
        out.append((datetime.combine(day, time(0, 0), UTC), datetime.combine(last, time(23, 59), UTC)))
        day = last + timedelta(days=1)
    return out


def is_closed(slice_end: datetime, now: datetime) -> bool:
    """A slice can be marked done only once it lies wholly in the past (with an hour's margin
    for arXiv's index to settle); open slices are crawled again next time."""
    return slice_end + timedelta(hours=1) < now


def fetch_slice(client: ArxivClient, category: str, start: datetime, end: datetime) -> list[ArxivRecord]:
    """Every record of one slice. A window over the result ceiling is halved; a single minute,
    which cannot be halved, is paged through as far as the API pages. A window the API cannot
    serve either way stops the slice with one line naming it (``PermanentError``), after a few
    requests: halving never recurses to failure."""
    return _fetch(client, category, start, end, client.search_window(category, start, end))


def _window(category: str, start: datetime, end: datetime) -> str:
    return f"{category} {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"


def _fetch(client: ArxivClient, category: str, start: datetime, end: datetime,
           first: tuple[list[ArxivRecord], int]) -> list[ArxivRecord]:
    records, total = first
    if total <= client.settings.max_results_per_query:
        return records
    if end - start < timedelta(minutes=1):
        if total > API_CEILING:
            raise PermanentError(
                f"arXiv reports {total} results for {_window(category, start, end)}, more than its API pages through "
                f"({API_CEILING}), and a minute cannot be split; the slice is left for the next run", kind="window_too_large")
        return client.search_window(category, start, end, most=API_CEILING)[0]
    mid = (start + (end - start) / 2).replace(second=0, microsecond=0)
    halves = [(start, mid), (mid + timedelta(minutes=1), end)]
    answers = [client.search_window(category, s, e) for s, e in halves]
    if all(t >= total for _, t in answers):
        # Two disjoint halves cannot each hold the whole window: the total ignores the dates
        # (a query arXiv did not read as asked), and halving it would never bring it down.
        raise PermanentError(
            f"arXiv reports {total} results for {_window(category, start, end)} and as many for each half of it: its "
            "totals do not follow the date window, so splitting cannot end; the slice is left for the next run",
            kind="window_ignored")
    return [r for (s, e), answer in zip(halves, answers, strict=True) for r in _fetch(client, category, s, e, answer)]


def record_hash(r: ArxivRecord) -> str:
    """A digest of everything arXiv said about the record."""
    payload = asdict(r)
    # Fields added later join the digest only when arXiv gave them, so a record without them
    # keeps the hash it had before and its paper is not reloaded for nothing.
    for key in ("journal_ref", "doi"):
        if payload[key] is None:
            del payload[key]
    if not any(payload["author_affiliations"]):
        del payload["author_affiliations"]
    return hashlib.sha256(json.dumps(payload, default=str, sort_keys=True).encode()).hexdigest()


def records_frame(records: list[ArxivRecord], crawled_at: datetime) -> pl.DataFrame:
    """Records as rows of ``arxiv_records``; a paper seen twice keeps its highest version."""
    if not records:
        return ARXIV_RECORDS.empty()
    rows = [{**asdict(r), "record_hash": record_hash(r), "crawled_at": crawled_at} for r in records]
    df = ARXIV_RECORDS.conform(pl.DataFrame(rows, infer_schema_length=None))
    return df.sort("arxiv_id", "version").unique("arxiv_id", keep="last", maintain_order=True)
