"""A SYNTHETIC panel of survey respondents: people of the world reading their captured emails and
following the real links over HTTP, as a person's mail client and browser would: a rating link
opens a page, and the person presses its Confirm button.

A seeded share of mailboxes sits behind a mail security scanner (Safe Links, Proofpoint and the
like): before the person reads the message, the scanner opens every link in it, fast and in
order (HEAD and GET, following redirects or not, fetching the page's style sheet or not). The
panel counts the scanner's requests and how many events or opt-outs appeared in the survey store
meanwhile; the goal is none.

Each recipient behaves in one seeded way: never answers; answers every paper by true expertise
(:mod:`revbench.synth.expertise`: what their works are about, seen through their own leniency and
the noise of a self-assessment); skips a paper on the page; changes a rating; opts out; or answers with low effort
(the same level everywhere, or every paper within seconds). Who did what is written beside the
answers (``respondents.parquet``), so the ratings stage can measure its quality flags.

The panel keeps a simulated clock per person (the time spent reading each abstract, a rusher's
haste) and tells the survey server when, on that clock, each answer was given: a server for a
SYNTHETIC panel records that time (REVBENCH_SURVEY__SIMULATED_ANSWER_TIMES), so the flags on
pace read the same times however slowly the machine ran the panel.
"""

from __future__ import annotations

import hashlib
import html
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import polars as pl

from revbench.survey import SIMULATED_TIME_HEADER
from revbench.synth.expertise import Expertise
from revbench.synth.truth import WorldTruth

BEHAVIOURS: dict[str, float] = {
    "silent": 0.22, "diligent": 0.42, "skipper": 0.10, "changer": 0.10, "opt_out": 0.03,
    "straight_liner": 0.07, "rusher": 0.06,
}
"""Share of recipients behaving each way."""
LOW_EFFORT = ("straight_liner", "rusher")
MIN_PATTERN_PAPERS = 4
"""Papers an email must list before its recipient may be a low-effort respondent."""

SCANNED_SHARE = 0.25
"""Share of mailboxes behind a link-opening mail security scanner."""
RUSH_SHARE = 0.1
"""A rusher's time per paper, as a share of a reader's (``pace_seconds``)."""
SECOND_THOUGHT_SHARE = 0.05
"""Time between a changed rating and the one before it, as a share of ``pace_seconds``."""

_PAPER = re.compile(r"^(\d+)\. (.+)$")
_LINK = re.compile(r"^\s+([1-5]) \([^)]*\): (\S+)$")
_HREF = re.compile(r'href="([^"]+)"')
_URL = re.compile(r"https?://[^\s<>\"]+")
_CONFIRM = re.compile(r'<form class="confirm" method="post" action="([^"]+)"')
_BUTTON_FORM = re.compile(r'<form method="post" action="([^"]+)"')
_STYLESHEET = re.compile(r'<link rel="stylesheet" href="([^"]+)"')


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


def simulated(at: datetime | None) -> dict[str, str]:
    """The header that tells a survey server when, on the panel's simulated clock, an answer was
    given (none without a time: the server's clock counts)."""
    return {} if at is None else {SIMULATED_TIME_HEADER: at.isoformat(timespec="microseconds")}


def _press(http: httpx.Client, link: str, button: re.Pattern[str], what: str, at: datetime | None) -> httpx.Response:
    """Open ``link`` (a page that records nothing) and press its one button (the POST that does)."""
    page = http.get(link)
    page.raise_for_status()
    action = button.search(page.text)
    if action is None:
        raise ValueError(f"{link}: the page has no {what} button")
    done = http.post(str(page.url.join(html.unescape(action.group(1)))), data={}, headers=simulated(at))
    done.raise_for_status()
    return done


def confirm(http: httpx.Client, link: str, at: datetime | None = None) -> httpx.Response:
    """A person's rating: open the rating link (a page naming the paper and level), then press
    its Confirm button (``at``: when, on a simulated clock); returns the final response."""
    return _press(http, link, _CONFIRM, "Confirm", at)


def opt_out(http: httpx.Client, link: str, at: datetime | None = None) -> httpx.Response:
    """A person's opt-out: open the link, then press the page's one button."""
    return _press(http, link, _BUTTON_FORM, "opt-out", at)


class PanelClock:
    """One person's simulated clock: it moves by what the person does (reading, hurrying), not by
    how long the machine took to do it; ``stall_seconds`` of real time pass before each answer
    (a slow or loaded machine, in tests) without moving it."""

    def __init__(self, start: datetime, stall_seconds: float = 0.0):
        self.now, self.stall_seconds = start, stall_seconds

    def after(self, seconds: float) -> datetime:
        """The time of the next answer, ``seconds`` after the last on this clock."""
        if self.stall_seconds:
            time.sleep(self.stall_seconds)
        self.now += timedelta(seconds=seconds)
        return self.now


def answer_on_page(http: httpx.Client, page_url: str, index: int, value: str, at: datetime | None = None) -> None:
    """Open the invitation's page and submit ``value`` (a level, or ``skip``) for its ``index``-th paper."""
    page = http.get(page_url)
    page.raise_for_status()
    ids = list(dict.fromkeys(re.findall(r'name="answer-([^"]+)"', page.text)))
    http.post(page_url, data={f"answer-{ids[index]}": value}, headers=simulated(at)).raise_for_status()


def message_links(msg: EmailMessage) -> list[str]:
    """Every link of a message as a scanner finds them: the HTML part's, the plain part's, then
    the List-Unsubscribe header's web address (repeats kept: a scanner opens what it finds)."""
    links: list[str] = []
    for kind in ("html", "plain"):
        part = msg.get_body(preferencelist=(kind,))
        text = part.get_content() if part is not None else ""
        found = _HREF.findall(text) if kind == "html" else _URL.findall(text)
        links += [html.unescape(u) for u in found if u.startswith("http")]
    links += _URL.findall(str(msg.get("List-Unsubscribe", "")).replace(">", " "))
    return links


def scan(msg: EmailMessage, seed: int, max_links: int | None = None) -> int:
    """A mail security scanner opening every link of ``msg`` before its reader does, as fast as
    it can: HEAD then GET (or GET then HEAD), following redirects or not, fetching the pages'
    style sheets or not (each seeded per mailbox); returns how many requests it made. Only links
    to the survey server (the host of the opt-out link every invitation carries) are opened: a web
    address in a real paper's title is passed over, so a simulated panel makes no request beyond
    the machine and a survey server that does not answer still fails loudly. ``max_links``: the
    first links only, as scanners that give up on a long message do (a rebuild's invitations can
    list hundreds of papers, five links each)."""
    to = str(msg["To"])
    links = message_links(msg)
    if max_links is not None:
        links = links[:max_links]
    survey = {httpx.URL(u).host for u in links if "/u/" in u}
    follow = _unit(seed, "scanner-follow", to) < 0.5
    resources = _unit(seed, "scanner-resources", to) < 0.5
    methods = ("HEAD", "GET") if _unit(seed, "scanner-order", to) < 0.5 else ("GET", "HEAD")
    requests = 0
    with httpx.Client(follow_redirects=follow, timeout=30) as http:
        for link in links:
            try:
                if survey and httpx.URL(link).host not in survey:
                    continue
            except httpx.InvalidURL:
                continue
            for method in methods:
                r = http.request(method, link)
                requests += 1 + len(r.history)
                if resources and method == "GET" and "text/html" in r.headers.get("content-type", ""):
                    for sheet in _STYLESHEET.findall(r.text):
                        http.get(str(r.url.join(html.unescape(sheet))))
                        requests += 1
    return requests


def scanned(seed: int, email: str) -> bool:
    """Whether a recipient's mailbox sits behind a link-opening scanner (seeded)."""
    return _unit(seed, "scanner", email) < SCANNED_SHARE


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
           recorded: Callable[[], int], pace_seconds: float = 0.2, workers: int = 8,
           stall_seconds: float = 0.0) -> dict[str, int]:
    """Let every recipient of ``messages`` act on their email (``workers`` people at a time, each
    taking ``pace_seconds`` per paper on their simulated clock unless they rush; see
    ``PanelClock``), after the scanners in front of some mailboxes opened every link; returns
    counts by what happened, with the scanners' requests and how far ``recorded`` (the survey
    store's count of events and opt-outs) moved while only scanners were at work."""
    from revbench.workers import map_unordered

    fronted = [m for m in messages if scanned(seed, str(m["To"]))]
    before = recorded()
    scanner_requests = sum(map_unordered(lambda m: scan(m, seed), fronted, workers))
    scanner_recorded = recorded() - before

    expertise = Expertise.from_works(truth.works)
    person_of = {e.lower(): p for p, emails in truth.persons.select("person_id", "emails").iter_rows() for e in emails}
    paper_of_title = {" ".join(t.split()): a for a, t in corpus.select("arxiv_id", "title").iter_rows()}
    start = datetime.now(UTC)  # everyone opens their email now; from here on, their own clocks count

    def act(msg: EmailMessage) -> tuple[dict[str, Any], dict[str, int]]:
        e = parse_email(msg)
        person = person_of.get(e.to.lower())
        how = behaviour(seed, e.to)
        if how in LOW_EFFORT and len(e.papers) < MIN_PATTERN_PAPERS:
            how = "diligent"  # a few answers make no pattern: low effort shows over several papers
        row = {"email": e.to, "person_id": person, "behaviour": how, "low_effort": how in LOW_EFFORT}
        c = {"emails": 1, "answered": 0, "ratings": 0, "skips": 0, "changes": 0, "opt_outs": 0, "silent": 0}
        rng = np.random.default_rng(int(_unit(seed, "rng", e.to) * 2**32))
        if how == "silent" or not e.papers:
            c["silent"] = 1
            return row, c
        clock = PanelClock(start, stall_seconds)
        with httpx.Client(follow_redirects=True, timeout=30) as http:
            if how == "opt_out":
                opt_out(http, e.optout_url, clock.after(0))
                c["opt_outs"] = 1
                return row, c
            c["answered"] = 1
            same = int(rng.integers(1, 6))
            skip_index = int(rng.integers(len(e.papers))) if how == "skipper" else -1
            for i, (title, links) in enumerate(e.papers):
                if i == skip_index:
                    continue
                # Reading the next abstract, or not quite.
                took = 0.0 if not i else pace_seconds * (RUSH_SHARE if how == "rusher" else 1.0)
                paper = paper_of_title.get(title)
                value = (same if how == "straight_liner" else expertise.answer(rng, person, paper) if paper and person
                         else 3)
                confirm(http, links[value], clock.after(took))
                c["ratings"] += 1
                if how == "changer" and i == 0:
                    confirm(http, links[6 - value], clock.after(pace_seconds * SECOND_THOUGHT_SHARE))  # a second thought
                    # And back, on the page: the server records a rating link once (a replay records
                    # nothing), so pressing the first link's Confirm again would leave the second thought.
                    if e.page_url:
                        answer_on_page(http, e.page_url, i, str(value), clock.after(pace_seconds * SECOND_THOUGHT_SHARE))
                    c["changes"] = 1
            if skip_index >= 0 and e.page_url:
                answer_on_page(http, e.page_url, skip_index, "skip", clock.after(pace_seconds))
                c["skips"] = 1
        return row, c

    counts = {"emails": 0, "answered": 0, "ratings": 0, "skips": 0, "changes": 0, "opt_outs": 0, "silent": 0,
              "scanned_mailboxes": len(fronted), "scanner_requests": scanner_requests, "scanner_recorded": scanner_recorded}
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
