"""Every text a person or a model reads, versioned: ``render(name, **ctx)`` returns the text
and the template's version (recorded with each output it produced)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

ROOT = Path(__file__).resolve().parent
_ENV = Environment(loader=FileSystemLoader(str(ROOT)), undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, autoescape=False)
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


def render(name: str, **context: Any) -> tuple[str, str]:
    """Render ``name`` with ``context``; returns (text, version)."""
    return _ENV.get_template(name).render(**context), version(name)
