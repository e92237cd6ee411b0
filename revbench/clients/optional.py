"""Reading JSON answers in which every key is optional: a value of the wrong type (a JSON null
where a list is documented, a number where a string is) is read as absent, never as a crash.
Semantic Scholar's and OpenAlex's parsers share these (both send null for empty lists)."""

from __future__ import annotations

from typing import Any


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_text(value: Any) -> str | None:
    """``value`` stripped when it is a non-blank string, else None."""
    return (value.strip() or None) if isinstance(value, str) else None
