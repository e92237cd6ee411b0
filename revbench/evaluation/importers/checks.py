"""The checks every importer shares: JSON parsed strictly, numbers that are finite, ratings
within the benchmark's scale, a (reviewer, paper) pair given once, and a digest of the files a
benchmark version is read from. A failed check is one ``InputError`` line naming the file, the
row or key, and what was expected.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

from revbench.errors import InputError
from revbench.text_clean import clean_value, may_hold_surrogates

log = logging.getLogger("revbench.evaluate")

DEFAULT_SCALE = (1.0, 5.0)


def files_digest(*paths: Path) -> str:
    """A benchmark version: 12 hex digits of sha256 over each file's name and bytes, so a renamed
    or edited file is another version."""
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


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
    silently keep the last value: a duplicate score or rating would win unseen). A lone surrogate
    in a string is replaced by U+FFFD, and the count logged."""
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
    if may_hold_surrogates(text):
        # JSON allows a lone surrogate ("\ud800"), which no frame nor file can hold: replaced, counted.
        data, replaced = clean_value(data)
        if replaced:
            log.warning("%s: %d characters UTF-8 cannot hold (lone surrogates) replaced by U+FFFD", where, replaced)
    return data


def read_json(path: Path) -> Any:
    """Parsed JSON, or an error naming the file and where it broke (see :func:`parse_json`)."""
    if path.is_dir():
        raise InputError(f"{path}: a folder, not a JSON file")
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


def once(first: dict[tuple[str, str], int], key: tuple[str, str], row: int, where: str, what: str) -> None:
    """Refuse a (reviewer, paper) pair given a second time: the last one would silently win."""
    if key in first:
        raise InputError(f"{where}: reviewer {key[0]!r} and paper {key[1]!r} already have a {what} in row "
                         f"{first[key]}; give each pair once")
    first[key] = row


def _shown(text: str, limit: int = 60) -> str:
    """A title or abstract as an error line shows it: white space collapsed, a long one cut."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit - 1] + "…")


class PaperTexts:
    """The title and the abstract each paper id was first given with, and where (a file and the
    item, row or line in it): a second, different text for one id is refused, since a loader keeps
    one row per paper and would silently drop the other. White space and case are no difference,
    nor is an empty text beside a written one."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], tuple[str, Path, str]] = {}

    def check(self, paper_id: str, title: str, abstract: str, path: Path, at: str) -> None:
        """Record ``paper_id``'s texts as given at ``path`` ``at`` (``item 3``, ``line 7``), or
        refuse a different one in one line naming both places and both texts."""
        for field, text in (("title", title), ("abstract", abstract)):
            key = " ".join(text.split()).casefold()
            if not key:
                continue
            if (paper_id, field) not in self.first:
                self.first[(paper_id, field)] = (text, path, at)
                continue
            text0, path0, at0 = self.first[(paper_id, field)]
            if key != " ".join(text0.split()).casefold():
                there = at0 if path0 == path else f"{path0} {at0}"
                given = f"is titled {_shown(text)} here" if field == "title" else f"has the abstract {_shown(text)} here"
                raise InputError(f"{path} {at}: paper {paper_id!r} {given} and {_shown(text0)} in {there}; "
                                 f"give each paper id one {field}")
