"""How the privacy audit reads text: folded to plain ASCII where a look-alike stands for a letter
(Unicode compatibility forms, Unicode's confusables from other scripts, diacritics, invisible
format characters), then, for names and affiliations, case-folded into word tokens.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

TOKEN = re.compile(r"[^\W_]+")
POSSESSIVE = re.compile(r"(?<=\w)'s\b", re.IGNORECASE)  # "Murphy's law" is about Murphy, not by S. Murphy


def word_set(text: str) -> frozenset[str]:
    """The words of a whitespace-separated list."""
    return frozenset(text.split())


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
    return " ".join(TOKEN.findall(POSSESSIVE.sub("", fold(text)).casefold()))
