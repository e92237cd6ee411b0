"""Research keywords per paper and RATE-style keyword profiles per reviewer.

A reviewer's profile is one sentence over the keywords of their recent papers, duplicates kept
so that recurring topics weigh more: "The reviewer's research keywords include: k1, k2, ...".
Keywords come from the LLM (``templates/prompts/keywords.j2``, a strict JSON answer) when one is
configured, else from YAKE, an unsupervised single-document extractor that needs no model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

PROFILE_PREFIX = "The reviewer's research keywords include: "
KEYWORD_TEMPLATE = "prompts/keywords.j2"
YAKE_EXTRACTOR = "yake"
PAPER_KEYWORDS_SCHEMA = {"paper_id": pl.Utf8, "keywords": pl.List(pl.Utf8), "extractor": pl.Utf8,
                         "template_version": pl.Utf8}
PROFILES_SCHEMA = {"reviewer_id": pl.Utf8, "profile": pl.Utf8, "papers": pl.Int64, "keywords": pl.Int64}


class KeywordAnswer(BaseModel):
    """What the keyword prompt asks the LLM for: ``{"keywords": [3 to 8 short strings]}``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    keywords: list[str] = Field(min_length=3, max_length=8)

    @field_validator("keywords")
    @classmethod
    def _short_and_nonempty(cls, v: list[str]) -> list[str]:
        out = [k.strip() for k in v]
        bad = [k for k in out if not k or len(k) > 80 or "\n" in k]
        if bad:
            raise ValueError(f"keywords must be 1-80 characters on one line; got {bad[0]!r}")
        return out


def parse_keywords(answer: str) -> list[str]:
    """The keywords of an LLM answer to the keyword prompt; ``ValueError`` (saying what is wrong)
    unless it is exactly the JSON object asked for (a Markdown code fence around it is allowed)."""
    text = answer.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.S)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at char {exc.pos})") from None
    try:
        return KeywordAnswer.model_validate(data).keywords
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "answer"
        raise ValueError(f"{where}: {err['msg']}") from None


def yake_keywords(texts: list[str], per_paper: int = 6) -> list[list[str]]:
    """Up to ``per_paper`` keywords (one- and two-word phrases) of each text by YAKE, most
    relevant first, lower-cased and without repeats."""
    import yake

    extractor = yake.KeywordExtractor(lan="en", n=2, top=per_paper * 2, dedupLim=0.7)
    out: list[list[str]] = []
    for t in texts:
        seen: list[str] = []
        for phrase, _ in extractor.extract_keywords(t or ""):
            k = phrase.lower().strip()
            if k and k not in seen:
                seen.append(k)
            if len(seen) == per_paper:
                break
        out.append(seen)
    return out


class Completer(Protocol):
    def complete(self, prompt: str, meta: dict[str, Any] | None = None, use_cache: bool = True) -> str: ...


@dataclass
class KeywordCall:
    """One keyword prompt: the paper, the answer (None when the service failed) and why it
    was rejected, if it was."""

    paper_id: str
    answer: str | None
    error: str | None


def llm_keywords(client: Completer, papers: pl.DataFrame, render: Callable[..., tuple[str, str]],
                 on_call: Callable[[KeywordCall], None] | None = None,
                 errors: tuple[type[BaseException], ...] = ()) -> tuple[dict[str, list[str]], str]:
    """Keywords of each paper (``paper_id, title, abstract``) by the LLM; a paper whose answer is
    not the JSON asked for (after one uncached retry) or whose call failed with one of ``errors``
    is left out. Returns the keywords by paper and the prompt's version."""
    found: dict[str, list[str]] = {}
    version = ""
    for row in papers.iter_rows(named=True):
        prompt, version = render(KEYWORD_TEMPLATE, paper={"title": row["title"] or "", "abstract": row["abstract"] or ""})
        meta = {"template": KEYWORD_TEMPLATE, "template_version": version}
        error: str | None = None
        answer: str | None = None
        for attempt in range(2):
            try:
                answer = client.complete(prompt, meta=meta, use_cache=attempt == 0)
            except errors as exc:
                answer, error = None, f"{type(exc).__name__}: {exc}"
                break
            try:
                found[row["paper_id"]] = parse_keywords(answer)
                error = None
                break
            except ValueError as exc:
                error = f"not the JSON asked for: {exc}"
        if on_call is not None:
            on_call(KeywordCall(row["paper_id"], answer, error))
    return found, version


def paper_keywords(papers: pl.DataFrame, known: pl.DataFrame | None = None, llm: dict[str, list[str]] | None = None,
                   template_version: str = "", per_paper: int = 6) -> pl.DataFrame:
    """Keywords of every paper (``paper_id, title, abstract``): those already ``known`` (a frame
    of :data:`PAPER_KEYWORDS_SCHEMA`), else the LLM's, else YAKE's; one row per paper with the
    extractor that produced it."""
    have = {} if known is None else {r["paper_id"]: r for r in known.iter_rows(named=True)}
    rows: list[dict[str, Any]] = []
    todo: list[tuple[str, str]] = []
    for row in papers.iter_rows(named=True):
        pid = row["paper_id"]
        if pid in have:
            rows.append(have[pid])
        elif llm and pid in llm:
            rows.append({"paper_id": pid, "keywords": llm[pid], "extractor": "llm", "template_version": template_version})
        else:
            todo.append((pid, f"{row['title'] or ''}. {row['abstract'] or ''}"))
    for (pid, _), kws in zip(todo, yake_keywords([t for _, t in todo], per_paper), strict=True):
        rows.append({"paper_id": pid, "keywords": kws, "extractor": YAKE_EXTRACTOR, "template_version": ""})
    if not rows:
        return pl.DataFrame(schema=PAPER_KEYWORDS_SCHEMA)
    return pl.DataFrame(rows, schema=PAPER_KEYWORDS_SCHEMA).sort("paper_id")


def profile_text(keywords: Iterable[str]) -> str:
    """The sentence RATE embeds for a reviewer."""
    return PROFILE_PREFIX + ", ".join(keywords)


def keyword_profiles(links: pl.DataFrame, keywords: pl.DataFrame) -> pl.DataFrame:
    """One profile per reviewer from ``links`` (``reviewer_id, paper_id``, the reviewer's recent
    papers) and the papers' ``keywords``: the keywords of all their papers in paper order,
    duplicates kept. Reviewers whose papers have no keywords get no profile."""
    joined = links.join(keywords.select("paper_id", "keywords"), on="paper_id", how="inner").sort("reviewer_id", "paper_id")
    rows = []
    for (reviewer,), g in joined.group_by(["reviewer_id"], maintain_order=True):
        kws = [k for ks in g["keywords"].to_list() for k in ks]
        if kws:
            rows.append({"reviewer_id": reviewer, "profile": profile_text(kws), "papers": g.height, "keywords": len(kws)})
    return pl.DataFrame(rows, schema=PROFILES_SCHEMA) if rows else pl.DataFrame(schema=PROFILES_SCHEMA)
