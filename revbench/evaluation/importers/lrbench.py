"""The ``lrbench`` kind: LR-bench's paper-centric and reviewer-centric tuples (anchor, positive,
negative) with the keywords file when present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from revbench.errors import InputError
from revbench.evaluation.importers.checks import DEFAULT_SCALE, PaperTexts, files_digest, rating, read_json
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
from revbench.release_files import MANIFEST, verify_release


def _lr_file(path: Path, stem: str) -> Path | None:
    for name in (f"{stem}.json", f"{stem}.sample.json"):
        if (path / name).exists():
            return path / name
    return None


def _text(value: Any) -> str | None:
    """A title or abstract as text (OpenReview v2's ``{"value": ...}`` unwrapped); None when it is
    neither text nor absent."""
    value = value.get("value") if isinstance(value, dict) else value
    return "" if value is None else value if isinstance(value, str) else None


Given = dict[tuple[str, str], tuple[float, str, int]]
"""(reviewer, paper) -> (its rating, the file and the item that gave it), across a benchmark's files."""


def _strict_item(where: str, t: dict[str, Any], given: Given, pc_file: bool, path: Path, index: int) -> None:
    """What a world built from the benchmark needs of one tuple beyond what evaluation needs: the
    file's kind of tuple, ids, a title for every paper (text, as the importer reads it), a
    publication list for every reviewer, a positive rated above the negative, and one rating per
    (reviewer, paper) across every file (``given``: pair -> (rating, where))."""
    pc = "author_id" in t["positive"]
    if pc != pc_file:
        raise InputError(f"{where}: a {'paper' if pc else 'reviewer'}-centric tuple in the "
                         f"{'paper' if pc_file else 'reviewer'}-centric file")
    for side in ("anchor", "positive", "negative"):
        x = t[side]
        is_paper = (side == "anchor") == pc
        id_key = "paper_id" if is_paper else "author_id"
        if not isinstance(x.get(id_key), (str, int)) or isinstance(x.get(id_key), bool) or str(x[id_key]).strip() == "":
            raise InputError(f"{where}: {side}.{id_key} is missing, empty or not a string or number")
        if is_paper:
            title = _text(x.get("paper_title") or x.get("title"))
            if title is None:
                raise InputError(f"{where}: {side}.paper_title is not text")
            if not title.strip():
                raise InputError(f"{where}: {side}.paper_title is missing or empty")
            if _text(x.get("abstract")) is None:
                raise InputError(f"{where}: {side}.abstract is not text")
        else:
            if not isinstance(x.get("papers"), list) or not x["papers"]:
                raise InputError(f"{where}: {side}.papers is missing or an empty publication list "
                                 f"(reviewer {x.get('author_id')!r})")
            for j, p in enumerate(x["papers"]):
                content = p.get("content", p) if isinstance(p, dict) else None
                title = _text(content.get("title")) if isinstance(content, dict) else None
                if not title or not title.strip() or _text(content.get("abstract")) is None:
                    raise InputError(f"{where}: {side}.papers[{j}] has no title, or a title or abstract that is not text")
    if float(t["positive"]["score"]) <= float(t["negative"]["score"]):
        raise InputError(f"{where}: positive.score {t['positive']['score']} is not above negative.score "
                         f"{t['negative']['score']}; the positive is the one rated higher")
    anchor = t["anchor"].get("paper_id", t["anchor"].get("author_id"))
    keys = []
    for side in ("positive", "negative"):
        x = t[side]
        key = (str(x["author_id"]), str(anchor)) if pc else (str(anchor), str(x["paper_id"]))
        if key in keys:
            raise InputError(f"{where}: the positive and the negative are the same (reviewer, paper) pair")
        keys.append(key)
        score = float(x["score"])
        if key in given and given[key][0] != score:
            earlier, f, i = given[key]
            there = f"item {i}" if f == str(path) else f"{f} item {i}"
            raise InputError(f"{where}: reviewer {key[0]!r} rates paper {key[1]!r} {score:g} here and "
                             f"{earlier:g} in {there}; one rating per pair")
        given.setdefault(key, (score, str(path), index))


def _lr_tuples(items: Any, path: Path, scale: tuple[float, float],
               given: Given | None = None, texts: PaperTexts | None = None,
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The tuples, papers and profiles of one file; with ``given`` (strict: a world is to be built),
    every item also passes :func:`_strict_item`, pairs checked across files through ``given``.
    ``texts`` holds every paper's title and abstract across the benchmark's files: one paper id
    given two titles (or abstracts) is refused, naming both items."""
    texts = PaperTexts() if texts is None else texts
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a list of {{anchor, positive, negative}} tuples")
    if given is not None and not items:
        raise InputError(f"{path}: holds no tuples; a world needs rated pairs")
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
            papers.append({"paper_id": pid, "title": _text(a.get("paper_title") or a.get("title")) or "",
                           "abstract": _text(a.get("abstract")) or ""})
            texts.check(pid, papers[-1]["title"], papers[-1]["abstract"], path, f"item {i}")
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
                papers.append({"paper_id": str(side["paper_id"]), "title": _text(side.get("paper_title") or side.get("title")) or "",
                               "abstract": _text(side.get("abstract")) or ""})
                texts.check(papers[-1]["paper_id"], papers[-1]["title"], papers[-1]["abstract"], path, f"item {i}")
            tuples.append(dict(reviewer_pos=rid, paper_pos=str(pos["paper_id"]), reviewer_neg=rid,
                               paper_neg=str(neg["paper_id"]), rating_pos=r_pos, rating_neg=r_neg, cluster=rid))
        if given is not None:  # after the ids are known to be there
            _strict_item(where, t, given, path.name.startswith("evaluations_pc"), path, i)
    return tuples, papers, profiles


def lrbench_version(path: Path) -> str | None:
    """The version :func:`load_lrbench` gives the folder ``path`` (None without its evaluation
    files), read without parsing them: the results page knows a SYNTHETIC release's LR-bench
    reading by it."""
    files = [f for stem in ("evaluations_pc", "evaluations_rc") if (f := _lr_file(path, stem)) is not None]
    return files_digest(*files) if files else None


@benchmark_kind("lrbench")
def load_lrbench(path: Path, strict: bool = False) -> Benchmark:
    """LR-bench: ``evaluations_pc.json`` and/or ``evaluations_rc.json`` (anchor, positive,
    negative), with ``keywords.json`` when present. ``strict`` (a world is to be built from it)
    also refuses a paper without a title, a reviewer without publications and a (reviewer, paper)
    rated twice differently. A folder with a ``manifest.json`` (a revbench release, whose JSON reads
    back as LR-bench) is first checked against it, every file by size and sha256 (``ReleaseTampered``
    names the first that differs)."""
    if (path / MANIFEST).is_file():
        verify_release(path)
    splits, papers, profiles, files = [], [], [], []
    given: Given | None = {} if strict else None
    texts = PaperTexts()
    for stem, split_name in (("evaluations_pc", SPLIT_LR_PC), ("evaluations_rc", SPLIT_LR_RC)):
        f = _lr_file(path, stem)
        if f is None:
            continue
        files.append(f)
        t, p, prof = _lr_tuples(read_json(f), f, DEFAULT_SCALE, given, texts)
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
