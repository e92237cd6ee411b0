"""Normalisation of names, emails and affiliations for author disambiguation.

Rules (each has a test in ``tests/test_normalize.py``):

- **Names**: Unicode folded (NFKD, accents dropped, ``ß`` -> ``ss``, ``ø`` -> ``o``), lower-cased,
  punctuation and hyphens become spaces, ``"Family, Given"`` is turned around. The block key is
  ``family|initial``: the last token and the first letter of the first token, so ``J. Smith``,
  ``John Smith`` and ``Smith, John`` share a block.
- **Emails**: trimmed and lower-cased; ``+tag`` dropped from the local part (plus-addressing);
  for gmail alone (where it is certain) dots are dropped and ``googlemail.com`` is
  ``gmail.com``. Other aliases of a domain (``cs.x.edu`` vs ``x.edu``) are left apart: they are
  not certain.
- **Affiliations**: the institution part is preferred to the department (GROBID's
  ``orgName[@type=institution]``; in a free string, the segment that names a university,
  institute, school or company rather than a department); folded like names; common
  abbreviations expanded (``univ`` -> ``university``, ``inst`` -> ``institute``, ``tech`` ->
  ``technology``, ``&`` -> ``and``); ``the`` dropped. The alias table
  (``tasks/reference/institution_aliases.csv``) maps known variants to one canonical name for
  the fallback decider only, never for the exact rule.
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

from revbench.tasks.text import fold

_ABBREV = {"univ": "university", "uni": "university", "inst": "institute", "tech": "technology", "natl": "national",
           "intl": "international", "dept": "department", "lab": "laboratory", "labs": "laboratories", "sci": "science"}
_DEPARTMENT = re.compile(r"\b(department|dept|school of|faculty|division|group|laboratory for|chair)\b", re.I)
_INSTITUTION = re.compile(r"\b(universit|institut|college|school|polytechn|academy|research|labs?\b|inc\b|corp|ltd)", re.I)


def name_tokens(name: str) -> list[str]:
    """Given names first, family name last."""
    if "," in name:
        family, _, given = name.partition(",")
        name = f"{given} {family}"
    return fold(name).split()


def block_key(name: str) -> str:
    """``family|initial``; mentions of one person almost always share it."""
    toks = name_tokens(name)
    if not toks:
        return "|"
    return f"{toks[-1]}|{toks[0][0] if len(toks) > 1 else ''}"


def given_name(name: str) -> str:
    """The first given-name token (``""`` for an initial or a one-word name)."""
    toks = name_tokens(name)
    return toks[0] if len(toks) > 1 and len(toks[0]) > 1 else ""


def normalize_email(email: str | None) -> str | None:
    """A canonical address, or None when there is no usable one."""
    if not email or "@" not in email:
        return None
    local, _, domain = email.strip().lower().rpartition("@")
    local = local.split("+", 1)[0]
    if domain in ("gmail.com", "googlemail.com"):
        domain = "gmail.com"
        local = local.replace(".", "")
    return f"{local}@{domain}" if local and domain else None


def institution_part(affiliation: str) -> str:
    """The part of a free affiliation string that names the institution, not the department."""
    parts = [p.strip() for p in re.split(r"[,;]", affiliation) if p.strip()]
    if len(parts) <= 1:
        return affiliation
    named = [p for p in parts if _INSTITUTION.search(p) and not _DEPARTMENT.search(p)]
    if named:
        return named[0]
    undepartmental = [p for p in parts if not _DEPARTMENT.search(p)]
    return undepartmental[0] if undepartmental else parts[-1]


def normalize_affiliation(institution: str | None, affiliation: str | None = None) -> str | None:
    """The exact-match key of an affiliation (None when empty)."""
    raw = institution or (institution_part(affiliation) if affiliation else None)
    if not raw:
        return None
    toks = [_ABBREV.get(t, t) for t in fold(raw).split() if t != "the"]
    return " ".join(toks) or None


@lru_cache(maxsize=1)
def alias_table() -> dict[str, str]:
    """Normalised alias -> canonical institution, from the shipped reference table."""
    path = Path(__file__).resolve().parent / "reference" / "institution_aliases.csv"
    table: dict[str, str] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            canonical = normalize_affiliation(row["canonical"]) or ""
            table[canonical] = canonical
            for alias in row["aliases"].split("|"):
                key = normalize_affiliation(alias)
                if key:
                    table[key] = canonical
    return table


def canonical_institution(key: str | None) -> str | None:
    """The canonical institution an affiliation key is a known variant of, if any."""
    if not key:
        return None
    return alias_table().get(key)
