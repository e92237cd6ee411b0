"""The names of the people who rated, as the privacy audit finds them in folded text: every form
of each name (the forms are listed in :mod:`revbench.tasks.privacy`), a surname next to its
person's given name or initial, and names made of ordinary words only where they look like names.

Names are found through an index keyed by surname token: one set intersection per string decides
whether any surname occurs, and only then are the neighbouring tokens read.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from revbench.reference import lines
from revbench.tasks.privacy_fold import POSSESSIVE, TOKEN, fold, word_set

PARTICLES = word_set("van von der den de del della di da du le la lo dos das do ten ter bin ibn al el st o d l mac")
SUFFIXES = word_set("jr sr ii iii iv phd md dr prof mr mrs ms")
LABELS = word_set("""figure fig table tab type class section sec part appendix step phase stage group case option
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
    for k, (words, n_surname) in enumerate(_parses(POSSESSIVE.sub("", fold(name)))):
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
