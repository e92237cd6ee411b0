"""Text checks shared by reconciliation rules."""

from __future__ import annotations

import re

from revbench.keys import fold

# UTF-8 read as Latin-1 leaves pairs like "Ã©"; control characters other than whitespace never
# belong in titles, abstracts or names.
_MOJIBAKE = re.compile("[\u00c2\u00c3][\u0080-\u00bf]")
_CONTROL = re.compile("[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]")


def corruption(text: str | None) -> str | None:
    """Why ``text`` looks corrupted (replacement characters, mojibake, control bytes), or None."""
    if not text:
        return None
    if "\ufffd" in text:
        return "replacement character (text was not valid UTF-8)"
    if _MOJIBAKE.search(text):
        return "mojibake (UTF-8 decoded as Latin-1)"
    if _CONTROL.search(text):
        return "control characters"
    return None


def title_similarity(a: str | None, b: str | None) -> float:
    """Similarity in [0, 1] of two titles after folding (rapidfuzz normalised Indel ratio)."""
    from rapidfuzz import fuzz

    if not a or not b:
        return 0.0
    return float(fuzz.ratio(fold(a), fold(b))) / 100.0
