"""What the docs say `make test` does about chromium and caddy is what the Makefile does: it
installs system packages only when asked (INSTALL_SYSTEM=yes, or under CI=true), never merely
because it runs as root."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("tests/README.md", "docs/tests.md")


def paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks, list items apart, each on one line."""
    blocks = re.split(r"\n\s*\n|\n(?=- )", text)
    return [" ".join(b.split()) for b in blocks if b.strip()]


def test_the_makefile_asks_before_installing_system_packages() -> None:
    make = (ROOT / "Makefile").read_text()
    assert "INSTALL_SYSTEM ?= $(if $(filter true,$(CI)),yes,no)" in make
    assert '[ "$(INSTALL_SYSTEM)" != yes ]' in make  # no consent: one line, and the tests skip


@pytest.mark.parametrize("doc", DOCS)
def test_the_docs_say_make_test_installs_chromium_only_when_asked(doc: str) -> None:
    said = [p for p in paragraphs((ROOT / doc).read_text()) if "make test" in p and "install" in p and "chromium" in p]
    assert said, f"{doc} no longer says what `make test` does about chromium"
    for p in said:
        assert "INSTALL_SYSTEM=yes" in p and "CI=true" in p, (doc, p)
        assert not re.search(r"installs (it|chromium)[^.;]*(when|if) (it is )?run as root", p), (doc, p)
