"""What a curator sees and answers when a run waits: the flag decisions grouped by respondent with
each flag's evidence, the release's audit and changes, and the answers turned back into
decisions. Pure over frames and plain values; the forms themselves (Prefect ``RunInput``) live
in ``revbench.flows.*_input``.

Nothing is preset: a flag no answer reaches stays pending (asked again next run), never kept by
default.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

from revbench.settings import RatingsSettings

DECISIONS = ("keep", "drop")
BULK = {"keep all": "keep", "drop all": "drop"}
"""The form's whole-run choices and the decision each gives every flag."""
UNDECIDED = "undecided"
"""The form's empty choice (as is None): no decision."""


def _chosen(value: str | None) -> str | None:
    return None if value in (None, UNDECIDED) else value


def rule_thresholds(cfg: RatingsSettings) -> dict[str, str]:
    """Each rule's firing condition with the configured thresholds, as the curator reads it."""
    return {
        "near_zero_variance": f"variance <= {cfg.variance_max} over >= {cfg.variance_min_ratings} ratings",
        "straight_lining": f"one value for all of >= {cfg.straight_line_min_papers} papers",
        "content_insensitive": (f"Spearman rho(rating, similarity) <= {cfg.content_max_rho} over >= "
                                f"{cfg.content_min_items} ratings, or all 1 or all 5 with similarity spread >= "
                                f"{cfg.content_min_spread}"),
        "burst": (f">= {cfg.burst_min_papers} papers within {cfg.burst_window_seconds} s, or < "
                  f"{cfg.min_seconds_per_paper} s per paper"),
    }


def _statistic(evidence: dict[str, Any]) -> str:
    """The evidence's scalar facts (the per-paper answers are shown beside it)."""
    return ", ".join(f"{k}={v}" for k, v in sorted(evidence.items()) if not isinstance(v, dict | list))


ABS_URL = "https://arxiv.org/abs/{}"
"""Where a flagged paper opens, so the curator can read what the respondent was rating."""
SHORT_TITLE = 48
"""Characters of a title in a form entry's one line (the description and artifact show it whole)."""


def short_title(title: str, limit: int = SHORT_TITLE) -> str:
    """``title`` cut at a word to at most ``limit`` characters, with an ellipsis when cut."""
    if len(title) <= limit:
        return title
    return title[:limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"


def flag_groups(flags: pl.DataFrame, ratings: pl.DataFrame,
                titles: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The flags grouped by respondent (``reviewer_id``), respondents and flags in id order:
    ``{respondent, flags: [{flag_id, rule, answers, papers, statistic}]}``; ``answers`` are the
    respondent's ratings of the flagged papers (``paper=rating``, ``?`` when not in ``ratings``),
    ``papers`` the same as ``{paper, title, rating}`` (``titles``: arXiv id -> title)."""
    values = {(r, p): v for r, p, v in ratings.select("reviewer_id", "paper_id", "rating").iter_rows()}
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in flags.sort("reviewer_id", "flag_id").iter_rows(named=True):
        papers = [{"paper": p, "title": (titles or {}).get(p), "rating": values.get((f["reviewer_id"], p), "?")}
                  for p in f["paper_ids"]]
        groups.setdefault(f["reviewer_id"], []).append({
            "flag_id": f["flag_id"], "rule": f["rule"], "papers": papers,
            "answers": " ".join(f"{x['paper']}={x['rating']}" for x in papers),
            "statistic": _statistic(json.loads(f["evidence"]))})
    return [{"respondent": r, "flags": fs} for r, fs in groups.items()]


def paper_line(paper: Mapping[str, Any], markdown: bool = True) -> str:
    """One rated paper as the curator reads it: its title, id (linked in markdown) and the rating."""
    pid, title = paper["paper"], paper.get("title")
    ref = f"[{pid}]({ABS_URL.format(pid)})" if markdown else pid
    return f"{ref} “{title}” = {paper['rating']}" if title else f"{ref} = {paper['rating']}"


def respondent_entries(flags: pl.DataFrame, ratings: pl.DataFrame,
                       titles: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """The form's per-respondent entries, each with its evidence in one line beside the choice
    (the UI shrinks a long form's description out of sight, so the evidence travels with it):
    ``{respondent, evidence}``, evidence as ``rule (statistic); ... | answers paper "title…"=rating ...``."""
    out = []
    for g in flag_groups(flags, ratings, titles):
        seen: dict[str, dict[str, Any]] = {}
        for f in g["flags"]:
            for x in f["papers"]:
                seen.setdefault(x["paper"], x)
        answers = [paper_line({**x, "title": short_title(x["title"]) if x["title"] else None}, markdown=False)
                   for _, x in sorted(seen.items())]
        out.append({"respondent": g["respondent"],
                    "evidence": "; ".join(f"{f['rule']} ({f['statistic']})" for f in g["flags"])
                                + " | answers " + "; ".join(answers)})
    return out


def rule_entries(flags: pl.DataFrame, cfg: RatingsSettings) -> list[dict[str, str]]:
    """The form's per-rule entries: ``{rule, fires_when}`` with the threshold and the flag count."""
    thresholds = rule_thresholds(cfg)
    return [{"rule": r, "fires_when": f"{thresholds.get(r, '')} ({flags.filter(pl.col('rule') == r).height} flags)"}
            for r in sorted(set(flags["rule"].to_list()))]


def flag_form_markdown(flags: pl.DataFrame, ratings: pl.DataFrame, cfg: RatingsSettings,
                       titles: Mapping[str, str] | None = None) -> str:
    """The flag form's description: how to answer, the rules with their thresholds, then one
    compact section per respondent with each flag's rule, statistic and the rated papers (title,
    linked id, rating)."""
    groups = flag_groups(flags, ratings, titles)
    thresholds = rule_thresholds(cfg)
    rules = sorted(set(flags["rule"].to_list()))
    lines = [f"**{flags.height} flags on {len(groups)} respondents wait for a decision.** Nothing is preset: every "
             "choice below starts undecided, and a flag no choice reaches stays pending (its ratings are left "
             "out) and is asked again next run.",
             "", "Choose for all flags at once, by rule, by respondent, or flag by flag; the most specific choice "
             "wins (flag, then respondent, then rule, then all).", "", "| rule | fires when | flags |", "|---|---|---|"]
    lines += [f"| {r} | {thresholds.get(r, '')} | {flags.filter(pl.col('rule') == r).height} |" for r in rules]
    for g in groups:
        lines += ["", f"**{g['respondent']}** ({len(g['flags'])} flags)", ""]
        for f in g["flags"]:
            lines.append(f"- `{f['flag_id']}` {f['rule']}: {f['statistic']}")
            lines += [f"    - {paper_line(x)}" for x in f["papers"]]
    return "\n".join(lines)


def resolve_flag_decisions(flags: pl.DataFrame, bulk: str | None, by_rule: Mapping[str, str | None],
                           by_respondent: Mapping[str, str | None], by_flag: Mapping[str, tuple[str | None, str]],
                           reason: str = "") -> dict[str, tuple[str, str]]:
    """flag id -> (decision, reason) from the form's answers, the most specific choice winning
    (flag, respondent, rule, all); flags no choice reaches are left out (pending). ``bulk`` is a
    key of ``BULK``, ``undecided`` or None; ``undecided`` or None anywhere is no choice."""
    out: dict[str, tuple[str, str]] = {}
    for flag_id, rule, respondent in flags.select("flag_id", "rule", "reviewer_id").iter_rows():
        own, own_reason = by_flag.get(flag_id, (None, ""))
        own = _chosen(own)
        decision = (own or _chosen(by_respondent.get(respondent)) or _chosen(by_rule.get(rule))
                    or (BULK.get(bulk) if bulk else None))
        if decision is not None:
            out[flag_id] = (decision, own_reason if own else reason)
    return out


def unknown_ids(given: Iterable[str], known: Iterable[str]) -> list[str]:
    """Ids an answer named that the form did not offer (reported, then ignored)."""
    offered = set(known)
    return sorted({g for g in given if g not in offered})


def release_form_markdown(version: str, parent: str | None, audit: str, changes: str, max_lines: int = 40) -> str:
    """The release form's description: what publishing does, the privacy audit's result, and the
    changes against the parent release (``CHANGES.md``, cut after ``max_lines`` lines)."""
    lines = [line for line in changes.strip().splitlines() if not line.startswith("# ")]  # the form has its own title
    shown = "\n".join(lines[:max_lines])
    if len(lines) > max_lines:
        shown += f"\n\n... {len(lines) - max_lines} more lines in `CHANGES.md` of the release folder"
    against = f"against {parent}" if parent else "(no earlier published release: every row is new)"
    return (f"**Publish release {version}?** Publishing is off unless you switch it on; submitting with it off rejects "
            f"the release (its folder stays, marked rejected).\n\n**Privacy audit:** {audit}\n\n"
            f"**Changes {against}:**\n\n{shown}")
