"""The privacy audit of a release, read as a re-identifier would read it.

Every string a release carries (nested publication lists included) is folded first: Unicode
compatibility forms, look-alike letters from other scripts (Unicode's confusables), diacritics and
invisible format characters, so "Ｍurphy" (full-width), "Murрhy" (Cyrillic р), "Múrphy" and
"Mur<zero-width space>phy" all read as "Murphy". Then it looks for:

- e-mail addresses, plain or obfuscated ("x [at] y [dot] z", "x (at) y (dot) z", "x at y dot z",
  spaces around "@", a full-width "＠"), any address at all (a release carries none) and, named by
  person, the warehouse's known addresses, even when only the user part and the domain are left;
- the names of the warehouse's authors, mention names and invitees in every common form: "First
  Last", "Last, First", "F. Last", "Last F.", "Last, F.", "First M. Last", hyphenated given names
  ("Seo-yeon", "Seoyeon", "Seo yeon", "S.-Y."), either order. A surname alone is never a hit (it
  is a common word as often as a name): a hit is a surname next to its person's given name or
  initial. Names made of ordinary words ("Will Price", "A. Field") must also look like names;
- ORCID iDs (their check digit holding), survey tokens, invitation ids, URLs with query strings
  and IP addresses;
- multi-word affiliations of the people who rated, reported but never blocking (public abstracts
  name institutions; an institution alone re-identifies nobody).

Whose names and addresses: the people who rated, in every spelling the warehouse holds. Another
author's name in a public abstract is public; a respondent's is what links an anonymous id to a
person.

The readers live beside it: folding in :mod:`revbench.tasks.privacy_fold`, addresses and ORCID
iDs in :mod:`revbench.tasks.privacy_emails`, names in :mod:`revbench.tasks.privacy_names`. This
module holds the audit over a release's frames, the affiliations and the redaction the release asks for.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from revbench.tasks.privacy_emails import KnownAddresses, find_emails, find_orcids
from revbench.tasks.privacy_fold import POSSESSIVE, TOKEN, fold, normalise
from revbench.tasks.privacy_names import NameIndex, Tok, tokens


@dataclass(frozen=True)
class AuditHit:
    """One string in a release that must not be there: where (table, row, field), what (``kind``:
    email, person_name, ...; ``form``: how it was written), the text found and whose it is."""

    table: str
    row: int
    field: str
    kind: str
    found: str
    form: str = ""
    person: str = ""

    @property
    def blocks(self) -> bool:
        """Whether this hit stops a release (see :data:`NOTE_KINDS` for those that do not)."""
        return self.kind not in NOTE_KINDS

    def redacted(self) -> str:
        """``found`` fit for a log line: an address keeps its first character and its domain."""
        if self.kind != "email":
            return self.found
        local, sep, domain = self.found.partition("@")
        return f"{local[:1]}***{sep}{domain}" if sep else self.found[:1] + "***"


PATTERNS: dict[str, re.Pattern[str]] = {
    "survey_token": re.compile(r"\binv_[0-9a-f]{20}\b|\b[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{16,}\b"),
    "url_with_query": re.compile(r"https?://[^\s?#]+\?[^\s#]+"),
    "ip_address": re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b"),
}
NOTE_KINDS = frozenset({"affiliation"})
"""Hits the audit reports and never stops a release for: a respondent's institution named in a
public abstract ("... at Carnegie Mellon University") identifies nobody by itself."""


class PhraseSet:
    """Multi-word phrases (affiliations) found on whole normalised words, indexed by first word
    (no regex of thousands of alternatives, no scan of every n-gram)."""

    def __init__(self, phrases: Iterable[str]):
        self.by_first: dict[str, dict[tuple[str, ...], str]] = defaultdict(dict)
        for p in phrases:
            words = tuple(normalise(p).split()) if p else ()
            if len(words) >= 2:  # one word alone ("Google") is a common word as often as an identifier
                self.by_first[words[0]][words] = " ".join(words)
        self.keys = frozenset(self.by_first)

    def find(self, words: list[str]) -> str | None:
        """The first phrase among ``words`` (normalised tokens), or None."""
        for i, w in enumerate(words):
            for phrase, shown in self.by_first.get(w, {}).items():
                if tuple(words[i:i + len(phrase)]) == phrase:
                    return shown
        return None


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for j, v in enumerate(value):
            yield from _walk(v, f"{path}[{j}]")


def _strings(df: pl.DataFrame) -> Iterator[tuple[int, str, str]]:
    """(row, field, text) of every string in a table, however deep: lists, structs, lists of
    structs (a reviewer's ``publications[3].abstract``)."""
    for i, row in enumerate(df.iter_rows(named=True)):
        for col, v in row.items():
            for path, text in _walk(v, col):
                yield i, path, text


class Auditor:
    """What one release is checked against: the people (id, name, e-mail and, when given, ORCID)
    who rated, and their affiliations."""

    def __init__(self, people: pl.DataFrame, affiliations: Iterable[str]):
        self.orcids: dict[str, str] = {}
        if "orcid" in people.columns:
            for p, o in people.select("person_id", "orcid").drop_nulls().unique().sort(pl.all()).iter_rows():
                self.orcids[o.upper()] = ",".join(sorted({*self.orcids.get(o.upper(), "").split(","), p} - {""}))
        rows = list(people.select("person_id", "name", "email").unique().sort(pl.all(), nulls_last=True).iter_rows())
        self.names = NameIndex((p, n) for p, n, _ in rows if p and n)
        self.emails: dict[str, str] = {}
        for p, _, e in rows:
            if p and e:
                address = fold(e).casefold().strip()
                self.emails[address] = ",".join(sorted({*self.emails.get(address, "").split(","), p} - {""}))
        self.addresses = KnownAddresses(self.emails)
        self.affiliations = PhraseSet(affiliations)
        self.keys = self.names.keys | self.addresses.keys | self.affiliations.keys

    def scan(self, text: str) -> list[tuple[str, str, str, str]]:
        """(kind, form, found, person) of each identifier in ``text``, each once."""
        folded = fold(text)
        out: list[tuple[str, str, str, str]] = []
        for kind, pattern in PATTERNS.items():
            out += [(kind, "", m.group(0), "") for m in pattern.finditer(folded)]
        out += [("email", form, address, person) for address, form, person in find_emails(folded, self.emails)]
        out += [("orcid", "", orcid, person) for orcid, person in find_orcids(folded, self.orcids)]
        plain = POSSESSIVE.sub("", folded)
        words = TOKEN.findall(plain.casefold())
        present = self.keys.intersection(words)
        if not present:
            return list(dict.fromkeys(out))
        if present & self.names.keys and self.names.candidates(words):
            toks = tokens(plain)
            # A name that is the user part of an address found above is that address, once.
            users = {(o[3], normalise(o[2].split("@")[0])) for o in out if o[0] == "email"}
            for a, b, form, person in self.names.find(toks):
                shown = _span(plain, toks, a, b)
                if not any(p == person and normalise(shown) in user for p, user in users):
                    out.append(("person_name", form, shown, person))
        if present & self.addresses.keys:
            mailed = {o[3] for o in out if o[0] == "email"}
            out += [("email", "known_address", found, person) for found, person in self.addresses.find(words)
                    if person not in mailed]
        if present & self.affiliations.keys and (found := self.affiliations.find(words)):
            out.append(("affiliation", "", found, ""))
        return list(dict.fromkeys(out))


REDACTED = {"person_name": "[name]", "email": "[email]", "orcid": "[orcid]"}
"""What a respondent's identifier written in a paper's text becomes when redaction is asked for."""


def redact_people_in(text: str | None, auditor: Auditor) -> str | None:
    """``text`` with each name, address and ORCID iD of the people who rated replaced as in
    :data:`REDACTED`; what cannot be found as written (a folded look-alike) stays, and the audit,
    which runs after, still stops the release on it."""
    if not text:
        return text
    for kind, _form, found, person in auditor.scan(text):
        if kind in REDACTED and (person or kind != "email"):
            text = text.replace(found, REDACTED[kind])
    return text


def without_people(df: pl.DataFrame, columns: Iterable[str], auditor: Auditor) -> pl.DataFrame:
    """``df`` with :func:`redact_people_in` applied to ``columns``."""
    return df.with_columns(pl.col(c).map_elements(lambda t: redact_people_in(t, auditor), return_dtype=pl.Utf8)
                           for c in columns)


def _span(text: str, toks: list[Tok], a: int, b: int) -> str:
    """The text from token ``a`` to token ``b`` (exclusive), as written."""
    return text[toks[a].start:toks[b - 1].end + toks[b - 1].period]


def privacy_audit(tables: dict[str, pl.DataFrame], people: pl.DataFrame,
                  affiliations: Iterable[str]) -> tuple[list[AuditHit], int]:
    """Every string of every table (nested ones included) read for e-mail addresses (plain,
    obfuscated or known), ORCID iDs, the names of ``people`` (``person_id, name, email[, orcid]``:
    every spelling of the people who rated) in any common form, survey tokens, URLs with query
    strings, IP addresses and multi-word ``affiliations``; returns the hits (each naming table,
    row, field, kind, form and person; those of :data:`NOTE_KINDS` do not block) and how many
    strings were read."""
    auditor = Auditor(people, affiliations)
    hits = []
    scanned = 0
    for table, df in tables.items():
        for row, where, text in _strings(df):
            scanned += 1
            hits += [AuditHit(table, row, where, kind, found, form, person) for kind, form, found, person in auditor.scan(text)]
    return hits, scanned
