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

Names are found through an index keyed by surname token: one set intersection per string decides
whether any surname occurs, and only then are the neighbouring tokens read.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import polars as pl

from revbench.reference import lines


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
ORCID = re.compile(r"(?<![\d-])(\d{4})-(\d{4})-(\d{4})-(\d{3}[\dX])(?![\d-])")
NOTE_KINDS = frozenset({"affiliation"})
"""Hits the audit reports and never stops a release for: a respondent's institution named in a
public abstract ("... at Carnegie Mellon University") identifies nobody by itself."""
TOKEN = re.compile(r"[^\W_]+")
_POSSESSIVE = re.compile(r"(?<=\w)'s\b", re.IGNORECASE)  # "Murphy's law" is about Murphy, not by S. Murphy


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ---------------------------------------------------------------------------------------------
# Folding


class _FoldTable(dict[int, Any]):
    """``str.translate`` table filled on first sight of each character: compatibility
    decomposition, combining marks and format characters (zero-width spaces, soft hyphens)
    dropped, look-alikes of Latin letters, digits, "@", "." and "'" mapped to them."""

    def __init__(self) -> None:
        super().__init__({c: c for c in range(128)})

    def __missing__(self, cp: int) -> str:
        out = []
        for ch in unicodedata.normalize("NFKD", chr(cp)):
            if unicodedata.combining(ch) or unicodedata.category(ch) == "Cf":
                continue
            out.append(ch if ch.isascii() else _look_alikes().get(ch, ch))
        self[cp] = folded = "".join(out)
        return folded


_FOLD = _FoldTable()
_LATIN_EXTRA = {"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "Th",
                "æ": "ae", "Æ": "Ae", "œ": "oe", "Œ": "Oe", "ħ": "h", "ŧ": "t", "ı": "i", "ŀ": "l", "ß": "ss"}
"""Latin letters with no decomposition (a stroke is part of the letter), so NFKD leaves them."""


@lru_cache(maxsize=1)
def _look_alikes() -> dict[str, str]:
    """Non-ASCII characters that Unicode's confusables (UTS #39, via ``confusable_homoglyphs``)
    lists as look-alikes of an ASCII letter, digit, "@", "." or apostrophe, letters before digits,
    case kept (Greek capital eta is "H"). UTS #39 folds "I" into "l"; a capital whose small form
    looks like "i" (Greek iota, Cyrillic і) is read as "I", as a name would be."""
    from confusable_homoglyphs.confusables import confusables_data

    def targets(ch: str) -> list[str]:
        out = []
        for alt in confusables_data.get(ch, ()):
            t = "".join(c for c in unicodedata.normalize("NFKD", alt["c"]) if not unicodedata.combining(c)
                        and unicodedata.category(c) != "Cf")
            if t and t.isascii() and len(t) <= 2 and (t.isalnum() or t in "@.'"):
                out.append(t)
        return sorted(out, key=lambda t: (not t.isalpha(), not t.islower(), t))

    table = {}
    for ch in confusables_data:
        if len(ch) == 1 and not ch.isascii():
            found = targets(ch)
            small = targets(ch.lower()) if ch.lower() != ch else []
            if found and found[0] == "l" and small and small[0] == "i":
                found = ["I"]
            if found:
                table[ch] = found[0]
    return {**table, **_LATIN_EXTRA}


def fold(text: str) -> str:
    """``text`` with compatibility forms, look-alikes, diacritics and invisible characters
    replaced by plain ASCII where there is one; case is kept (name rules read it)."""
    return text if text.isascii() else unicodedata.normalize("NFC", text.translate(_FOLD))


def normalise(text: str) -> str:
    """What names and affiliations are compared as: folded, case-folded, punctuation as spaces,
    whitespace collapsed."""
    return " ".join(TOKEN.findall(_POSSESSIVE.sub("", fold(text)).casefold()))


# ---------------------------------------------------------------------------------------------
# E-mail addresses

_BRACKET_AT = re.compile(r"\s*(?:[\[({<]\s*(?:at|@)\s*[\])}>]|\b_at_\b|-at-)\s*")
_BRACKET_DOT = re.compile(r"\s*(?:[\[({<]\s*(?:dot|\.)\s*[\])}>]|\b_dot_\b|-dot-)\s*")
_STRONG_AT, _STRONG_DOT = "\x02", "\x01"
_LOCAL, _LABEL = r"[a-z0-9_%+\-]+", r"[a-z0-9\-]+"
_DOT = rf"(?:\.|\s*{_STRONG_DOT}\s*|\s+dot\s+)"
_DOMAIN_DOT = rf"(?:\s?\.\s?|\s*{_STRONG_DOT}\s*|\s+dot\s+)"  # "mit . edu"; the user part keeps tight dots
# A user part starts at no word that a dot (".", "dot", "[dot]") joins to the one before: one
# attempt per chain, not one per word of it ("a dot b dot c ..." would be quadratic).
EMAIL = re.compile(rf"(?<![a-z0-9_%+.\-])(?<!dot )(?<!{_STRONG_DOT})(?<!{_STRONG_DOT} )({_LOCAL}(?:{_DOT}{_LOCAL})*)"
                   rf"(\s*@\s*|\s*{_STRONG_AT}\s*|\s+at\s+)({_LABEL}(?:{_DOMAIN_DOT}{_LABEL})+)")
GROUPED = re.compile(rf"\{{\s*({_LOCAL}(?:\.{_LOCAL})*(?:\s*[,;|]\s*{_LOCAL}(?:\.{_LOCAL})*)+)\s*\}}\s*@\s*({_LABEL}(?:\.{_LABEL})+)")
"""Several addresses of one domain written as one: ``{jdoe, asmith}@cs.cmu.edu``."""
_AT_HINT = re.compile(r"@|\bat\b|_at_|-at-")
_WORD_DOT = re.compile(rf"\s*{_STRONG_DOT}\s*|\s+dot\s+")
_SPACED_DOT = re.compile(r"\s?\.\s?")
TLDS = _words("""com net org edu gov mil int info biz name pro io ai co me app dev xyz tech online site ac
    uk de fr cn jp kr ca au ch nl it es se no fi dk be at il in sg hk tw br ru pl cz us eu ie pt gr at nz za mx ar
    tr ir sa ae eg id my th vn ph pk""")
"""Domains an obfuscated address must end in: words do not ("look at the dot product")."""
_GENERIC = frozenset({"com", "net", "org", "edu", "gov", "mil", "int", "info", "biz"})
_WORDISH = frozenset({"in", "it", "is", "at", "no", "me", "us", "be", "id", "my", "so", "to", "do", "go", "am", "as", "by"})


_PROSE_VERBS = frozenset({
    "available", "accessible", "found", "hosted", "released", "online", "located", "published", "provided",
    "obtained", "downloaded", "accessed", "retrieved", "deployed", "maintained"})
"""Words that stand before "at <host>" in prose about code and data ("the code is available at
github.com"), never as the local part of an address written with a spelled-out "at"."""
_PROSE_NOUNS = frozenset({"code", "data", "dataset", "demo", "page", "website", "repository", "project", "here"})
"""Words that do so too ("code at github.com") but can also be a person's local part ("page at
cs.stanford.edu"): prose only before a code or data host, or a web path."""
_CODE_HOSTS = ("github.com", "github.io", "gitlab.com", "bitbucket.org", "huggingface.co", "zenodo.org", "figshare.com",
               "osf.io", "kaggle.com", "google.com", "arxiv.org", "openreview.net")


def _prose_at(local: str, host: str, path_follows: bool) -> bool:
    """Whether "<local> at <host>" is prose about where code or data is, not an address."""
    if local in _PROSE_VERBS:
        return True
    hosting = any(host == h or host.endswith("." + h) for h in _CODE_HOSTS)
    return (local in _PROSE_NOUNS or local in _WORDISH) and (hosting or path_follows)


def find_emails(folded: str, known: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    """(address, form, person) for each address in ``folded`` text: ``form`` is ``plain`` or
    ``obfuscated``; ``person`` names whose known address it is ("" for an unknown one)."""
    low = folded.casefold()
    if not _AT_HINT.search(low):
        return
    low = _BRACKET_DOT.sub(_STRONG_DOT, _BRACKET_AT.sub(_STRONG_AT, low))
    for g in GROUPED.finditer(low):  # "{jdoe, asmith}@cs.cmu.edu": one address per name
        domain = g.group(2)
        if _unknown_address_ok(domain, "plain") or any(f"{x.strip()}@{domain}" in known for x in re.split(r"[,;|]", g.group(1))):
            for x in re.split(r"[,;|]", g.group(1)):
                if x.strip():
                    yield f"{x.strip()}@{domain}", "plain", known.get(f"{x.strip()}@{domain}", "")
    for m in EMAIL.finditer(low):
        local, at, domain = m.group(1), m.group(2), m.group(3)
        address = f"{_WORD_DOT.sub('.', local)}@{_SPACED_DOT.sub('.', _WORD_DOT.sub('.', domain))}"
        person = known.get(address, "")
        plain = at == "@" and not any(c in m.group(0) for c in (" ", _STRONG_DOT))
        how = "plain" if plain else "word" if at.strip() == "at" and not _WORD_DOT.search(domain) else "marked"
        if how == "word" and not person and _prose_at(local, address.split("@", 1)[1], low[m.end():m.end() + 1] == "/"):
            continue  # "code is available at github.com/x": a web address in real abstracts, not a person's
        if person or _unknown_address_ok(address.split("@", 1)[1], how):
            yield address, "plain" if plain else "obfuscated", person


def unknown_address_ok(domain: str, how: str) -> bool:
    """Whether ``domain`` makes an address nobody in the warehouse owns one (see below); the
    release's redaction asks the audit's question, so the two never disagree."""
    return _unknown_address_ok(domain, how)


def _unknown_address_ok(domain: str, how: str) -> bool:
    """Whether an address nobody in the warehouse owns is one. Written plainly ("x@y.org"), the
    last label is letters and some other label has a letter unless it is a generic domain
    ("x@163.com"; not "Hits@10.In" or "mAP@0.5"). Written with spaces, brackets or words ("x [at]
    y [dot] z"), it must also end in a known top-level domain (not "the") that is no English word
    unless three labels make it plain ("look at the dot product", "recall@k. In this"); with "at"
    as a word and tight dots, only a generic domain or three labels will do ("x at mit.edu";
    "done at home.It" is a sentence)."""
    labels = domain.split(".")
    tld = labels[-1]
    if len(labels) < 2 or not tld.isalpha() or len(tld) < 2 or not all(labels):
        return False
    if not (any(c.isalpha() for lab in labels[:-1] for c in lab) or tld in _GENERIC):
        return False
    if how == "plain":
        return True
    if tld not in TLDS or (tld in _WORDISH and len(labels) < 3):
        return False
    return how == "marked" or tld in _GENERIC or len(labels) >= 3


def orcid_checksum_ok(digits: str) -> bool:
    """Whether 16 characters (15 digits and a check digit or X) pass ORCID's ISO 7064 11,2 check:
    sixteen digits that fail it are a phone or a serial number, not an iD."""
    total = 0
    for d in digits[:-1]:
        total = (total + int(d)) * 2
    check = (12 - total % 11) % 11
    return digits[-1] == ("X" if check == 10 else str(check))


def find_orcids(folded: str, known: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(iD, person) for each ORCID iD in ``folded`` text whose check digit holds (a release carries
    none); ``person`` names whose it is when the warehouse knows it."""
    for m in ORCID.finditer(folded):
        orcid = m.group(0)
        if orcid_checksum_ok("".join(m.groups())):
            yield orcid, known.get(orcid, "")


# ---------------------------------------------------------------------------------------------
# Names

PARTICLES = _words("van von der den de del della di da du le la lo dos das do ten ter bin ibn al el st o d l mac")
SUFFIXES = _words("jr sr ii iii iv phd md dr prof mr mrs ms")
LABELS = _words("""figure fig table tab type class section sec part appendix step phase stage group case option
    plan grade level vitamin model method category set round condition experiment study version item point exhibit
    panel box row column note hepatitis schedule form list rule task track block series scenario setting variant
    sample scheme protocol regime configuration design policy strategy architecture dataset benchmark arm cohort trial
    site region zone room building unit layer type""")
"""Words after which a capital letter with a period is a label ("Type A. Long sequences"), not an initial."""


@lru_cache(maxsize=1)
def common_words() -> frozenset[str]:
    """English words that are also names (``revbench/reference/common_words.txt``)."""
    return frozenset(w for line in lines("common_words.txt") for w in line.split())


class Tok(NamedTuple):
    """A word of folded text, case-folded, with what the name rules read of how it was written."""

    norm: str
    cap: bool
    upper: bool
    period: bool
    hyphen_before: bool  # "Berners-Lee": "lee" continues a word
    hyphen_after: bool
    start: int  # where it stands in the folded text
    end: int


def tokens(text: str) -> list[Tok]:
    """The words of folded text (possessives dropped), each case-folded with what the name rules
    read: capitalised, all upper case, followed by a period, joined by a hyphen to the word
    before or after."""
    out = []
    for m in TOKEN.finditer(text):
        raw, a, b = m.group(), m.start(), m.end()
        out.append(Tok(raw.casefold(), raw[0].isupper(), raw.isupper(), text[b:b + 1] == ".",
                       a >= 2 and text[a - 1] == "-" and text[a - 2].isalnum(),
                       text[b:b + 1] == "-" and text[b + 1:b + 2].isalnum(), a, b))
    return out


TitleCase = Callable[[list["Tok"]], bool]
"""Whether a line reads as a title once the given name's words are left out."""


@dataclass(frozen=True)
class NameForm:
    """One way to read a person's name: given-name tokens, middle tokens, surname tokens."""

    person: str
    given: tuple[str, ...]
    middle: tuple[str, ...]
    surname: tuple[str, ...]
    reordered: bool = False
    # Derived once (the audit reads them for every occurrence of a surname):
    initial_only: bool = dataclasses.field(init=False, compare=False)
    joins: frozenset[str] = dataclasses.field(init=False, compare=False)
    """The given name written as one word: "Seoyeon" (from "Seo-yeon" or "Seo Yeon")."""
    initials: frozenset[str] = dataclasses.field(init=False, compare=False)
    near: frozenset[str] = dataclasses.field(init=False, compare=False)
    """Every token that stands next to the surname in some form of this name."""

    def __post_init__(self) -> None:
        first = "".join(g[0] for g in self.given)
        joins = frozenset(j for j in ("".join(self.given) if len(self.given) > 1 else "",
                                      "".join(self.given + self.middle) if self.middle else "") if j)
        initials = frozenset({first, first + "".join(m[0] for m in self.middle)})
        object.__setattr__(self, "initial_only", len(self.given) == 1 and len(self.given[0]) == 1)
        object.__setattr__(self, "joins", joins)
        object.__setattr__(self, "initials", initials)
        object.__setattr__(self, "near", frozenset({*self.given, *joins, *self.middle, *initials, self.given[0][0]}))


def _parses(name: str) -> list[tuple[list[str], int]]:
    """(words given-name first, how many of the last are the surname) for each reading of ``name``:
    "Last, First"; "First Middle Last"; "Wang J" (initials last); and a two-word name also the
    other way round (family name first, as many write it)."""
    if "," in name:
        last, first = name.split(",", 1)
        return [([*first.split(), *last.split()], len(last.split()))]
    words = name.split()
    out = [(words, 1)]
    if len(words) >= 2 and re.fullmatch(r"[A-Z]{1,2}\.?|(?:[A-Z]\.-?){2}", words[-1]) and len(words[0]) > 1:
        out.append(([*words[-1:], *words[:-1]], len(words) - 1))
    elif len(words) == 2 and len(words[0].rstrip(".")) > 1:
        out.append((words[::-1], 1))  # not "E. Ivanov": an initial is no family name (it made "i.e." a hit)
    return out


def name_forms(person: str, name: str) -> list[NameForm]:
    """How ``name`` ("Seo-yeon Murphy", "Murphy, Seo-yeon", "Jan van der Berg", "Wang J") can
    appear: for each reading, the surname with and without its particles, and for three words or
    more the last two as a double surname. A one-word name gives none (it cannot be told from a word)."""
    forms = []
    for k, (words, n_surname) in enumerate(_parses(_POSSESSIVE.sub("", fold(name)))):
        toks = [[t.casefold() for t in TOKEN.findall(w)] for w in words]
        toks = [t for t in toks if t and not (len(t) == 1 and t[0] in SUFFIXES)]
        if len(toks) < 2:
            continue
        start = len(toks) - min(n_surname, len(toks) - 1)
        while start > 1 and all(t in PARTICLES for t in toks[start - 1]):
            start -= 1
        given, middle = tuple(toks[0]), tuple(t for w in toks[1:start] for t in w)
        surname = tuple(t for w in toks[start:] for t in w)
        other = k > 0
        forms.append(NameForm(person, given, middle, surname, other))
        core = surname[next((i for i, t in enumerate(surname) if t not in PARTICLES), len(surname) - 1):]
        if core != surname:
            forms.append(NameForm(person, given, middle, core, other))
        if middle and middle[-1] not in PARTICLES and len(middle[-1]) > 1:
            forms.append(NameForm(person, given, middle[:-1], (middle[-1], *surname), other))
        if len(given[0]) == 1 and middle and len(middle[0]) > 1:  # "J. Robert Oppenheimer"
            forms.append(NameForm(person, middle[:1], middle[1:], surname, other))
    return forms


_BEFORE, _AFTER = 6, 7
"""How far from a surname's first token a given name or initial can stand: three skipped
middle names or initials and a two-token given name before; a three-token surname and a
two-token given name after."""


class NameIndex:
    """Every name form of every person, keyed by the first token of its surname, with the tokens
    that can stand next to that surname in some form (a cheap test before a closer look)."""

    def __init__(self, people: Iterable[tuple[str, str]]):
        by_key: dict[str, set[NameForm]] = defaultdict(set)
        for person, name in people:
            for f in name_forms(person, name):
                by_key[f.surname[0]].add(f)
        self.by_near: dict[str, dict[str, list[NameForm]]] = {}
        for k, forms in by_key.items():
            near: dict[str, list[NameForm]] = defaultdict(list)
            for f in sorted(forms, key=lambda f: (f.surname, f.given, f.middle, f.person, f.reordered)):
                for w in f.near:
                    near[w].append(f)
            self.by_near[k] = dict(near)
        self.keys = frozenset(self.by_near)
        self.common = common_words()

    def candidates(self, words: list[str]) -> bool:
        """Whether some surname in ``words`` (case-folded tokens) has one of its given names,
        middle names or initials near it."""
        for i, w in enumerate(words):
            if w in self.keys:
                near = self.by_near[w]
                if any(x in near for x in words[max(0, i - _BEFORE):i]) or any(x in near for x in words[i + 1:i + _AFTER]):
                    return True
        return False

    def find(self, toks: list[Tok]) -> list[tuple[int, int, str, str]]:
        """(first token, end token, form, person) of each name in ``toks``, each span and person
        once (read as the name is written in the warehouse when it reads both ways)."""
        title_case = _title_case(toks)
        found_at: dict[tuple[int, int, str], tuple[bool, str]] = {}
        for i, t in enumerate(toks):
            near = self.by_near.get(t.norm)
            if near is None:
                continue
            window = {x.norm for x in toks[max(0, i - _BEFORE):i]} | {x.norm for x in toks[i + 1:i + _AFTER]}
            forms = {f for w in window for f in near.get(w, ())}
            for f in sorted(forms, key=lambda f: (f.surname, f.given, f.middle, f.person, f.reordered)):
                n = len(f.surname)
                # A surname inside a compound ("T. Berners-Lee, R. Fielding", "Black-Scholes") is another name.
                if tuple(x.norm for x in toks[i:i + n]) != f.surname or t.hyphen_before or toks[i + n - 1].hyphen_after:
                    continue
                if found := self._before(toks, i, f, title_case):
                    span = found[0], i + n, f.person
                elif found := self._after(toks, i + n, f, t, title_case):
                    span = i, found[0], f.person
                else:
                    continue
                if span not in found_at or found_at[span][0] > f.reordered:
                    found_at[span] = f.reordered, found[1]
        return [(a, b, form, person) for (a, b, person), (_, form) in sorted(found_at.items())]

    def _is_common(self, words: Iterable[str]) -> bool:
        return all(w in self.common for w in words)

    def _full_ok(self, f: NameForm, surname: Tok, given: list[Tok], title_case: TitleCase) -> bool:
        """A full given name next to the surname is a hit, unless both are ordinary words and
        the text does not write them as a name (capitalised, in a line that is not title case)."""
        if not (self._is_common(f.surname) and self._is_common(f.given)):
            return True
        return surname.cap and all(g.cap for g in given) and not title_case([surname, *given])

    def _initial_ok(self, f: NameForm, initial: Tok, surname: Tok, before: Tok | None) -> bool:
        """An initial is a capital or has its period; next to a surname that is an ordinary word
        it needs both, a capital surname, and neither a label word ("Type A. Long ...") nor an
        abbreviation ("the U.S. Field Manual") before it."""
        if self._is_common(f.surname):
            label = before is not None and (before.norm in LABELS or (len(before.norm) == 1 and before.period))
            return initial.period and initial.upper and surname.cap and not label
        if initial.period:
            return True
        return initial.upper and surname.cap and initial.norm not in ("a", "i")

    def _given_ends_at(self, toks: list[Tok], k: int, f: NameForm, surname: Tok, title_case: TitleCase) -> tuple[int, str] | None:
        """(start, form) of the given name or initial ending just before token ``k``."""
        g = len(f.given)
        if k <= 0:
            return None
        prev = toks[k - 1]
        if not f.initial_only and k - g >= 0 and tuple(t.norm for t in toks[k - g:k]) == f.given and \
                self._full_ok(f, surname, toks[k - g:k], title_case):
            return k - g, "first_last"
        if prev.norm in f.joins and self._full_ok(f, surname, [prev], title_case):
            return k - 1, "first_last"
        if prev.norm == f.given[0][0] and self._initial_ok(f, prev, surname, toks[k - 2] if k >= 2 else None):
            return k - 1, "initial_last"
        if len(prev.norm) >= 2 and prev.norm in f.initials and prev.upper and surname.cap and not self._is_common(f.surname):
            return k - 1, "initial_last"
        return None

    def _before(self, toks: list[Tok], i: int, f: NameForm, title_case: TitleCase) -> tuple[int, str] | None:
        """The given name (or initial) before the surname at ``i``, over at most three middle
        names or initials ("Jane Q. Doe", "S.-Y. Murphy", "Juan Carlos García López")."""
        k = i
        # Next to an ordinary word, initials alone must all be the person's own ("U.S. Field
        # Manual" is not S. Field's); a full given name may still carry an unknown middle initial.
        own = {w[0] for w in (*f.given[1:], *f.middle)}
        foreign = False
        for _ in range(4):
            if found := self._given_ends_at(toks, k, f, toks[i], title_case):
                return None if foreign and found[1] == "initial_last" and self._is_common(f.surname) else found
            prev = toks[k - 1]
            if k <= 1 or not (prev.norm in f.middle or len(prev.norm) == 1):
                return None
            foreign |= prev.norm not in own
            k -= 1
        return None

    def _after(self, toks: list[Tok], s: int, f: NameForm, surname: Tok, title_case: TitleCase) -> tuple[int, str] | None:
        """(end, form) of the given name (or initials) after the surname ending at ``s``:
        "Murphy, Seo-yeon", "Murphy Seoyeon", "Murphy, S.-Y.", "Murphy SY"."""
        if s >= len(toks):
            return None
        nxt, g = toks[s], len(f.given)
        if not f.initial_only and tuple(t.norm for t in toks[s:s + g]) == f.given and \
                self._full_ok(f, surname, toks[s:s + g], title_case):
            return s + g, "last_first"
        if nxt.norm in f.joins and self._full_ok(f, surname, [nxt], title_case):
            return s + 1, "last_first"
        common = self._is_common(f.surname)
        if nxt.norm == f.given[0][0] and ((nxt.period and (surname.cap or not common)) or
                                          (nxt.upper and surname.cap and not common)):
            return s + 1, "last_initial"
        if len(nxt.norm) >= 2 and nxt.norm in f.initials and nxt.upper and surname.cap and not common:
            return s + 1, "last_initial"
        return None


def _title_case(toks: list[Tok]) -> TitleCase:
    """Whether the line is a title (its longer words mostly capitalised: capitals say nothing
    there), judged without the words of the name in question."""

    def counted(t: Tok) -> bool:
        return len(t.norm) > 3 and not t.norm.isdigit()

    words = [t for t in toks if counted(t)]
    total, caps = len(words), sum(t.cap for t in words)

    def judge(name: list[Tok]) -> bool:
        mine = [t for t in name if counted(t)]
        n, c = total - len(mine), caps - sum(t.cap for t in mine)
        return n >= 2 and c >= 0.6 * n

    return judge


class KnownAddresses:
    """The user part of each known address followed by its domain, however the punctuation
    between them was written ("jane doe at mit", "jane_doe (at) mit dot edu")."""

    def __init__(self, emails: dict[str, str]):
        self.by_key: dict[str, list[tuple[tuple[str, ...], frozenset[str], str]]] = defaultdict(list)
        for address, person in sorted(emails.items()):
            local, _, domain = address.partition("@")
            parts = tuple(TOKEN.findall(local))
            labels = frozenset(TOKEN.findall(domain.rsplit(".", 1)[0])) if "." in domain else frozenset()
            if len("".join(parts)) < 3 or not labels:
                continue
            self.by_key[parts[0]].append((parts, labels, person))
            if len(parts) > 1:
                self.by_key["".join(parts)].append((("".join(parts),), labels, person))
        self.keys = frozenset(self.by_key)

    def find(self, words: list[str]) -> Iterator[tuple[str, str]]:
        """(text, person) for each known address in ``words`` (case-folded tokens)."""
        for i, w in enumerate(words):
            for parts, labels, person in self.by_key.get(w, ()):
                end = i + len(parts)
                if tuple(words[i:end]) != parts:
                    continue
                j = end + (end < len(words) and words[end] == "at")
                if j < len(words) and words[j] in labels:
                    yield " ".join(words[i:j + 1]), person


# ---------------------------------------------------------------------------------------------
# Affiliations


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


# ---------------------------------------------------------------------------------------------
# The audit


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
        plain = _POSSESSIVE.sub("", folded)
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
