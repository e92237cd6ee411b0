"""The ``lrbench`` kind: LR-bench's paper-centric and reviewer-centric tuples (anchor, positive,
negative) with the keywords file when present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from revbench.errors import InputError
from revbench.evaluation.importers.checks import DEFAULT_SCALE, files_digest, rating, read_json
from revbench.evaluation.importers.openreview import note_fields
from revbench.evaluation.importers.registry import benchmark_kind
from revbench.evaluation.model import (
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    SPLIT_LR_PC,
    SPLIT_LR_RC,
    TUPLES_SCHEMA,
    Benchmark,
    Split,
    frame,
)


def _lr_file(path: Path, stem: str) -> Path | None:
    for name in (f"{stem}.json", f"{stem}.sample.json"):
        if (path / name).exists():
            return path / name
    return None


def _strict_item(where: str, t: dict[str, Any], given: dict[tuple[str, str], tuple[float, int]], index: int) -> None:
    """What a world built from the benchmark needs of one tuple beyond what evaluation needs: a
    title for every paper, a publication list for every reviewer, one rating per (reviewer, paper)."""
    pc = "author_id" in t["positive"]
    for side in ("anchor", "positive", "negative"):
        x = t[side]
        is_paper = (side == "anchor") == pc
        if is_paper and not str(x.get("paper_title") or x.get("title") or "").strip():
            raise InputError(f"{where}: {side}.paper_title is missing or empty")
        if not is_paper:
            if not isinstance(x.get("papers"), list) or not x["papers"]:
                raise InputError(f"{where}: {side}.papers is missing or an empty publication list "
                                 f"(reviewer {x.get('author_id')!r})")
            for j, p in enumerate(x["papers"]):
                if not isinstance(p, dict) or not str(p.get("title") or "").strip():
                    raise InputError(f"{where}: {side}.papers[{j}] has no title")
    anchor = t["anchor"].get("paper_id", t["anchor"].get("author_id"))
    for side in ("positive", "negative"):
        x = t[side]
        key = (str(x["author_id"]), str(anchor)) if pc else (str(anchor), str(x["paper_id"]))
        score = float(x["score"])
        if key in given and given[key][0] != score:
            raise InputError(f"{where}: reviewer {key[0]!r} rates paper {key[1]!r} {score:g} here and "
                             f"{given[key][0]:g} in item {given[key][1]}; one rating per pair")
        given.setdefault(key, (score, index))


def _lr_tuples(items: Any, path: Path, scale: tuple[float, float],
               strict: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a list of {{anchor, positive, negative}} tuples")
    tuples, papers, profiles = [], [], []
    first_item: dict[tuple[str, ...], int] = {}
    given: dict[tuple[str, str], tuple[float, int]] = {}
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
                    profiles.append({"reviewer_id": str(side["author_id"]), **note_fields(p, f"{where} papers[{j}]")})
            tuples.append(dict(reviewer_pos=str(pos["author_id"]), paper_pos=pid, reviewer_neg=str(neg["author_id"]),
                               paper_neg=pid, rating_pos=r_pos, rating_neg=r_neg, cluster=pid))
        else:  # reviewer-centric: anchor reviewer, candidate papers
            if "author_id" not in a or "paper_id" not in pos or "paper_id" not in neg:
                raise InputError(f"{where}: a reviewer-centric tuple needs anchor.author_id and positive/negative paper_id")
            rid = str(a["author_id"])
            for j, p in enumerate(a.get("papers", [])):
                profiles.append({"reviewer_id": rid, **note_fields(p, f"{where} anchor.papers[{j}]")})
            for side in (pos, neg):
                papers.append({"paper_id": str(side["paper_id"]), "title": side.get("paper_title", side.get("title", "")),
                               "abstract": side.get("abstract", "")})
            tuples.append(dict(reviewer_pos=rid, paper_pos=str(pos["paper_id"]), reviewer_neg=rid,
                               paper_neg=str(neg["paper_id"]), rating_pos=r_pos, rating_neg=r_neg, cluster=rid))
        if strict:  # after the ids are known to be there
            _strict_item(where, t, given, i)
    return tuples, papers, profiles


@benchmark_kind("lrbench")
def load_lrbench(path: Path, strict: bool = False) -> Benchmark:
    """LR-bench: ``evaluations_pc.json`` and/or ``evaluations_rc.json`` (anchor, positive,
    negative), with ``keywords.json`` when present. ``strict`` (a world is to be built from it)
    also refuses a paper without a title, a reviewer without publications and a (reviewer, paper)
    rated twice differently."""
    splits, papers, profiles, files = [], [], [], []
    for stem, split_name in (("evaluations_pc", SPLIT_LR_PC), ("evaluations_rc", SPLIT_LR_RC)):
        f = _lr_file(path, stem)
        if f is None:
            continue
        files.append(f)
        t, p, prof = _lr_tuples(read_json(f), f, DEFAULT_SCALE, strict)
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
        name="lrbench", version=files_digest(*files),
        submissions=frame(papers, PAPERS_SCHEMA).unique("paper_id", keep="first").sort("paper_id"),
        draws=[frame(profiles, PROFILE_SCHEMA).unique(["reviewer_id", "paper_id"], keep="first", maintain_order=True)],
        splits=splits, keywords=keywords, scale=DEFAULT_SCALE,
    )
