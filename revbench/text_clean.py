"""Text made storable where it enters: every string a service answers or a file holds is valid
UTF-8 before it reaches a frame or a table.

JSON allows a lone UTF-16 surrogate (``"\\ud800"``: a producer that cut a string inside a pair
writes one), and Python's ``json`` gives it back as a code point that UTF-8 cannot encode; polars,
DuckDB and every file writer then fail on the whole batch, not on the one string. Here each such
code point becomes U+FFFD and is counted, so one bad record costs one character, and the count is
what a run reports. A pair split in two code points is joined back, never replaced.
"""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
# A surrogate in the text itself, or a \uD800-\uDFFF escape that json turns into one.
_SURROGATE = re.compile("[\ud800-\udfff]|\\\\u[dD][89a-fA-F]")


def clean_text(text: str) -> tuple[str, int]:
    """``text`` with each code point UTF-8 cannot encode (a lone surrogate) replaced by U+FFFD,
    and how many were replaced."""
    try:
        text.encode("utf-8")
        return text, 0
    except UnicodeEncodeError:
        pass
    # Through UTF-16 a high and low surrogate side by side become their one character again;
    # only the halves without a partner are left for "replace".
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed, fixed.count(REPLACEMENT) - text.count(REPLACEMENT)


def clean_value(value: Any) -> tuple[Any, int]:
    """A parsed JSON value with every string in it (object keys too) cleaned by :func:`clean_text`,
    and how many code points were replaced. Lists and objects are cleaned in place."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        total = 0
        for i, item in enumerate(value):
            if isinstance(item, str | list | dict):
                value[i], n = clean_value(item)
                total += n
        return value, total
    if isinstance(value, dict):
        total = 0
        for key in list(value):
            item = value[key]
            if isinstance(item, str | list | dict):
                value[key], n = clean_value(item)
                total += n
            if isinstance(key, str):
                new, n = clean_text(key)
                if n:
                    value[new] = value.pop(key)
                    total += n
        return value, total
    return value, 0


def clean_rows(rows: list[dict[str, Any]]) -> int:
    """Clean every string of ``rows`` (records about to become a frame) in place; how many code points were replaced."""
    return clean_value(rows)[1]


def parse_json(body: bytes | str) -> tuple[Any, int]:
    """``body`` parsed as JSON with every string valid UTF-8, and how many characters were
    replaced by U+FFFD: lone surrogates (escaped or encoded) and bytes that are not UTF-8 at all.
    ``json.JSONDecodeError`` when it is not JSON."""
    replaced = 0
    if isinstance(body, bytes | bytearray):
        encoding = json.detect_encoding(body)
        try:
            # As json.loads decodes bytes itself: encoded surrogates pass, to be replaced below.
            text = body.decode(encoding, "surrogatepass")
        except UnicodeDecodeError:
            text = body.decode(encoding, "replace")
            replaced = text.count(REPLACEMENT) - body.decode(encoding, "ignore").count(REPLACEMENT)
    else:
        text = body
    value = json.loads(text)
    if may_hold_surrogates(text):
        value, n = clean_value(value)
        replaced += n
    return value, replaced


def may_hold_surrogates(json_text: str) -> bool:
    """Whether strings parsed from ``json_text`` can hold a surrogate: it has one itself, or a
    ``\\uD800``-``\\uDFFF`` escape. Most texts have neither, and their values need no walk."""
    return _SURROGATE.search(json_text) is not None
