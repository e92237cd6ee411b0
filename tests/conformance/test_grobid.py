"""Every recorded GROBID TEI through the real ``GrobidHeaderClient``: the replay server answers
``processHeaderDocument`` with the recorded bytes, the client posts a PDF, decodes and parses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from revbench.clients.tei import TeiHeader
from revbench.settings import Settings
from tests.support.conformance import REAL, expected, needs_samples, through_grobid

pytestmark = needs_samples
EXPECTED = expected("grobid") if REAL.exists() else {}
SAMPLES = sorted(p.name for p in (REAL / "grobid").glob("*.tei.xml")) if REAL.exists() else []


def test_every_sample_has_expected_values() -> None:
    assert SAMPLES and sorted(EXPECTED) == SAMPLES


def _header(serve: Callable[..., Any], settings: Settings, name: str) -> TeiHeader:
    return through_grobid(serve, settings, REAL / "grobid" / name, "processHeaderDocument",
                          lambda client: client.header(b"%PDF-1.4\n%%EOF\n", name="sample.pdf"))


@pytest.mark.parametrize("name", SAMPLES)
def test_grobid_sample(serve, settings, name: str) -> None:
    want = EXPECTED[name]
    h = _header(serve, settings, name)
    assert h.title == want["title"]
    if want.get("abstract_starts") is None:
        assert h.abstract is None
    else:
        assert h.abstract is not None and h.abstract.startswith(want["abstract_starts"])
        for part in want.get("abstract_contains", []):
            assert part in h.abstract
    got = [{"forename": a.forename, "surname": a.surname, "affiliations": [x.text for x in a.affiliations],
            "email": a.email, "orcid": a.orcid} for a in h.authors]
    assert got == want["authors"]
    # No phantom author: every author kept has a name, and none of these files has a nameless one.
    assert all(a.full_name for a in h.authors) and not h.dropped_authors
    for i, j, dept, inst, country in want.get("structured", []):
        aff = h.authors[i].affiliations[j]
        assert (aff.department, aff.institution, aff.country) == (dept, inst, country)
    for a in h.authors:  # the first affiliation stays in the flat fields
        first = a.affiliations[0] if a.affiliations else None
        assert a.institution == (first.institution if first else None)
        assert a.department == (first.department if first else None)
    assert len(h.orphan_affiliations) == want["orphans"]
    for i, text in want.get("orphan_texts", {}).items():
        assert h.orphan_affiliations[int(i)].text == text
    for i, dept, inst, country in want.get("orphan_structured", []):
        o = h.orphan_affiliations[i]
        assert (o.department, o.institution, o.country) == (dept, inst, country)
