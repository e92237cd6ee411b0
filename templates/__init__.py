"""Every text a person or a model reads, versioned: ``render(name, **ctx)`` returns the text
and the template's version (recorded with each output it produced)."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

ROOT = Path(__file__).resolve().parent
# HTML templates escape every value (a paper's abstract may hold markup); text and prompts do not.
_ENV = Environment(loader=FileSystemLoader(str(ROOT)), undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                   autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=False))
_ENV.filters["domain"] = lambda email: str(email).rpartition("@")[2]


def version(name: str) -> str:
    """``<declared version>-<content hash>``: the declared version is the first line's
    ``{# version: N #}``; the hash catches edits that forgot to bump it."""
    text = (ROOT / name).read_text()
    declared = "0"
    first = text.splitlines()[0] if text else ""
    if first.startswith("{# version:"):
        declared = first.removeprefix("{# version:").removesuffix("#}").strip()
    return f"{declared}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def render(template: str, /, **context: Any) -> tuple[str, str]:
    """Render ``template`` with ``context``; returns (text, version)."""
    return _ENV.get_template(template).render(**context), version(template)


def read(name: str) -> str:
    """A static file of this folder (a style sheet), as text."""
    return (ROOT / name).read_text()


@lru_cache(maxsize=1)
def bars_scale() -> dict[str, Any]:
    """The five-level BARS scale: ``question`` and ``levels`` (rating, label, anchor), 5 first."""
    return json.loads((ROOT / "survey" / "bars_scale.json").read_text())
