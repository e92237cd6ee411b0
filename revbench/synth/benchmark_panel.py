"""The simulated panel of a world imported from a benchmark: each reviewer reads their captured
email and, for every paper in it that the benchmark holds a rating of theirs for, opens that
level's link and presses Confirm; a paper the benchmark holds no rating for is left unanswered
(as is the whole email when none is held). The mail scanners in front of some mailboxes open
every link first, as in the SYNTHETIC panel, and must record nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import polars as pl

from revbench.synth.imported import title_key
from revbench.synth.respondents import PanelClock, confirm, parse_email, scan, scanned


def held_levels(world_dir: Path, corpus: pl.DataFrame) -> dict[tuple[str, str], int]:
    """(email, title key) -> the survey level the benchmark's rating is given as, for every held
    pair whose paper is in the corpus (``corpus``: ``arxiv_id, title`` as the emails show them)."""
    truth = world_dir / "truth"
    held = pl.read_parquet(truth / "benchmark_ratings.parquet").drop_nulls("arxiv_id")
    emails = pl.read_parquet(truth / "persons.parquet").select("person_id", "emails").explode("emails")
    title_of = {a: title_key(t) for a, t in corpus.select("arxiv_id", "title").iter_rows()}
    out = {}
    for person, arxiv_id, level in held.select("person_id", "arxiv_id", "level").iter_rows():
        if arxiv_id not in title_of:
            continue
        for e in emails.filter(pl.col("person_id") == person)["emails"].to_list():
            out[(e.lower(), title_of[arxiv_id])] = int(level)
    return out


def answer_held(held: dict[tuple[str, str], int], messages: list[EmailMessage], seed: int, out_dir: Path,
                recorded: Callable[[], int], pace_seconds: float = 0.2, workers: int = 8,
                stall_seconds: float = 0.0, scan_links: int | None = None) -> dict[str, int]:
    """Every recipient of ``messages`` answers the papers ``held`` gives them a level for (see the
    module), ``pace_seconds`` apart on their simulated clock (``PanelClock``); returns counts like
    the SYNTHETIC panel's, with ``unheld`` (papers left unanswered because the benchmark has no
    rating of that pair)."""
    from revbench.workers import map_unordered

    fronted = [m for m in messages if scanned(seed, str(m["To"]))]
    before = recorded()
    scanner_requests = sum(map_unordered(lambda m: scan(m, seed, scan_links), fronted, workers))
    scanner_recorded = recorded() - before
    start = datetime.now(UTC)

    def act(msg: EmailMessage) -> tuple[dict[str, Any], dict[str, int]]:
        e = parse_email(msg)
        to = e.to.lower()
        todo = [(links, held[(to, title_key(title))]) for title, links in e.papers if (to, title_key(title)) in held]
        c = {"emails": 1, "answered": int(bool(todo)), "ratings": 0, "unheld": len(e.papers) - len(todo),
             "silent": int(not todo)}
        clock = PanelClock(start, stall_seconds)
        with httpx.Client(follow_redirects=True, timeout=30) as http:
            for i, (links, level) in enumerate(todo):
                confirm(http, links[level], clock.after(pace_seconds if i else 0.0))  # after reading the abstract
                c["ratings"] += 1
        return {"email": e.to, "behaviour": "benchmark" if todo else "silent", "low_effort": False}, c

    counts = {"emails": 0, "answered": 0, "ratings": 0, "unheld": 0, "silent": 0, "scanned_mailboxes": len(fronted),
              "scanner_requests": scanner_requests, "scanner_recorded": scanner_recorded}
    rows = []
    for row, c in map_unordered(act, messages, workers):
        rows.append(row)
        for k, v in c.items():
            counts[k] += v
    out_dir.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows, schema={"email": pl.Utf8, "behaviour": pl.Utf8, "low_effort": pl.Boolean}).sort("email").write_parquet(
        out_dir / "respondents.parquet")
    return counts
