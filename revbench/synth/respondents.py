"""A SYNTHETIC panel of survey respondents: people of the world reading their captured emails and
following the real links over HTTP, as a person's mail client and browser would.

Each recipient behaves in one seeded way: never answers; answers every paper by true expertise
(graded by how much of their work is on the paper's topic, with noise); skips a paper on the page; changes a rating; opts out; or answers with low effort
(the same level everywhere, or every paper within seconds). Who did what is written beside the
answers (``respondents.parquet``), so the ratings stage can measure its quality flags.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import polars as pl

from revbench.synth.truth import WorldTruth, topic_shares, true_rating

BEHAVIOURS: dict[str, float] = {
    "silent": 0.22, "diligent": 0.42, "skipper": 0.10, "changer": 0.10, "opt_out": 0.03,
    "straight_liner": 0.07, "rusher": 0.06,
}
"""Share of recipients behaving each way."""
LOW_EFFORT = ("straight_liner", "rusher")
MIN_PATTERN_PAPERS = 4
"""Papers an email must list before its recipient may be a low-effort respondent."""

_PAPER = re.compile(r"^(\d+)\. (.+)$")
_LINK = re.compile(r"^\s+([1-5]) \([^)]*\): (\S+)$")


@dataclass
class ParsedEmail:
    """What a reader sees in the plain-text part."""

    to: str
    papers: list[tuple[str, dict[int, str]]]
    page_url: str
    optout_url: str


def parse_email(msg: EmailMessage) -> ParsedEmail:
    """Titles with their five rating links, the page link and the opt-out link."""
    body = msg.get_body(preferencelist=("plain",))
    text = body.get_content() if body is not None else ""
    papers: list[tuple[str, dict[int, str]]] = []
    page = optout = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if (m := _PAPER.match(line)) and i + 2 < len(lines):
            papers.append((m.group(2).strip(), {}))
        elif (m := _LINK.match(line)) and papers:
            papers[-1][1][int(m.group(1))] = m.group(2)
        elif "/i/" in line and line.strip().startswith("http"):
            page = line.strip()
        elif "/u/" in line:
            optout = line.strip().rsplit(" ", 1)[-1]
    return ParsedEmail(str(msg["To"]), [p for p in papers if len(p[1]) == 5], page, optout)


def _unit(seed: int, *parts: object) -> float:
    return int(hashlib.sha256("\x1f".join(map(str, (seed, *parts))).encode()).hexdigest()[:12], 16) / 16**12


def behaviour(seed: int, email: str) -> str:
    """The seeded behaviour of one recipient."""
    u, acc = _unit(seed, "behaviour", email), 0.0
    for name, share in BEHAVIOURS.items():
        acc += share
        if u < acc:
            return name
    return "diligent"


def answer(truth: WorldTruth, messages: list[EmailMessage], corpus: pl.DataFrame, seed: int, out_dir: Path,
           pace_seconds: float = 0.2, workers: int = 8) -> dict[str, int]:
    """Let every recipient of ``messages`` act on their email (``workers`` people at a time, each
    taking ``pace_seconds`` per paper unless they rush); returns counts by what happened."""
    from revbench.workers import map_unordered

    shares = topic_shares(truth)
    person_of = {e.lower(): (p, shares.get(p, {})) for p, emails in truth.persons.select("person_id", "emails").iter_rows()
                 for e in emails}
    topic_of_title = {" ".join(t.split()): truth.paper_topics.get(a) for a, t in corpus.select("arxiv_id", "title").iter_rows()}

    def act(msg: EmailMessage) -> tuple[dict[str, Any], dict[str, int]]:
        e = parse_email(msg)
        person, expertise = person_of.get(e.to.lower(), (None, {}))
        how = behaviour(seed, e.to)
        if how in LOW_EFFORT and len(e.papers) < MIN_PATTERN_PAPERS:
            how = "diligent"  # a few answers make no pattern: low effort shows over several papers
        row = {"email": e.to, "person_id": person, "behaviour": how, "low_effort": how in LOW_EFFORT}
        c = {"emails": 1, "answered": 0, "ratings": 0, "skips": 0, "changes": 0, "opt_outs": 0, "silent": 0}
        rng = np.random.default_rng(int(_unit(seed, "rng", e.to) * 2**32))
        if how == "silent" or not e.papers:
            c["silent"] = 1
            return row, c
        with httpx.Client(follow_redirects=True, timeout=30) as http:
            if how == "opt_out":
                http.post(e.optout_url, data={}).raise_for_status()
                c["opt_outs"] = 1
                return row, c
            c["answered"] = 1
            same = int(rng.integers(1, 6))
            skip_index = int(rng.integers(len(e.papers))) if how == "skipper" else -1
            for i, (title, links) in enumerate(e.papers):
                if i == skip_index:
                    continue
                if how != "rusher" and i:
                    time.sleep(pace_seconds)  # reading the next abstract
                topic = topic_of_title.get(title) or ""
                value = same if how == "straight_liner" else true_rating(rng, topic, expertise) if topic else 3
                http.get(links[value]).raise_for_status()
                c["ratings"] += 1
                if how == "changer" and i == 0:
                    http.get(links[6 - value]).raise_for_status()  # a second thought
                    http.get(links[value]).raise_for_status()  # and back
                    c["changes"] = 1
            if skip_index >= 0 and e.page_url:
                page = http.get(e.page_url)
                page.raise_for_status()
                ids = list(dict.fromkeys(re.findall(r'name="answer-([^"]+)"', page.text)))
                http.post(e.page_url, data={f"answer-{ids[skip_index]}": "skip"}).raise_for_status()
                c["skips"] = 1
        return row, c

    counts = {"emails": 0, "answered": 0, "ratings": 0, "skips": 0, "changes": 0, "opt_outs": 0, "silent": 0}
    rows: list[dict[str, Any]] = []
    for row, c in map_unordered(act, messages, workers):
        rows.append(row)
        for k, v in c.items():
            counts[k] += v
    out_dir.mkdir(parents=True, exist_ok=True)
    schema = {"email": pl.Utf8, "person_id": pl.Utf8, "behaviour": pl.Utf8, "low_effort": pl.Boolean}
    out = pl.DataFrame(rows, schema=schema)
    path = out_dir / "respondents.parquet"
    if path.exists():  # a later wave adds people; those who acted before keep their row
        out = pl.concat([pl.read_parquet(path), out]).unique("email", keep="last")
    out.sort("email").write_parquet(path)
    return counts
