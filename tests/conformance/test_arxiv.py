"""arXiv API: every recorded Atom answer, served with its recorded status, fetched and parsed by
the real client; the result is compared field by field with ``expected/arxiv.json``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from revbench.clients.arxiv_api import ArxivClient, ArxivRecord
from revbench.retry import PermanentError
from revbench.settings import ArxivSettings, HttpSettings
from tests.support.conformance import REAL, expected, needs_samples

pytestmark = needs_samples

EXPECTED = {k: v for k, v in expected("arxiv").items() if not k.startswith("_")}
RESPONSES = json.loads((REAL / "arxiv" / "responses.json").read_text()) if REAL.exists() else {}


def test_every_sample_has_expected_values() -> None:
    on_disk = {p.name for p in (REAL / "arxiv").glob("*.xml")}
    assert on_disk == set(EXPECTED) == set(RESPONSES)


def _client(base: str) -> ArxivClient:
    return ArxivClient(ArxivSettings(base_url=f"{base}/api/query", delay_seconds=0), HttpSettings(max_attempts=1))


def _fetch(serve: Any, name: str) -> Any:
    want = EXPECTED[name]
    route = {"method": "GET", "path": "/api/query", "query": want["query"], "status": RESPONSES[name]["status_code"],
             "headers": {"content-type": "application/atom+xml"}, "body": (REAL / "arxiv" / name).read_bytes()}
    with serve([route]) as base:
        return _client(base).fetch(want["query"])


def _as_expected(r: ArxivRecord) -> dict[str, Any]:
    iso = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(t, datetime) else t  # noqa: E731
    return {"arxiv_id": r.arxiv_id, "version": r.version, "title": r.title, "authors": r.authors,
            "affiliations": r.author_affiliations, "primary_category": r.primary_category,
            "categories": r.categories, "published": iso(r.published), "updated": iso(r.updated),
            "journal_ref": r.journal_ref, "doi": r.doi}


@pytest.mark.parametrize("name", sorted(n for n, v in EXPECTED.items() if "error" not in v))
def test_feed_parses_with_every_field(serve: Any, name: str) -> None:
    want = EXPECTED[name]
    page = _fetch(serve, name)
    assert page.total == want["total"]
    got = [_as_expected(r) for r in page.records]
    assert len(got) == len(want["entries"])
    for g, w in zip(got, want["entries"], strict=True):
        assert g == w, g["arxiv_id"]
        assert g["categories"][0] == g["primary_category"]


@pytest.mark.parametrize("name", sorted(n for n, v in EXPECTED.items() if "error" in v))
def test_error_feed_text_is_the_one_line_error(serve: Any, name: str) -> None:
    with pytest.raises(PermanentError) as exc:
        _fetch(serve, name)
    message = str(exc.value)
    assert EXPECTED[name]["error"] in message and f"HTTP {EXPECTED[name]['status']}" in message
    assert "\n" not in message and exc.value.kind == "bad_query"


def test_the_samples_carry_what_the_readme_counts(serve: Any) -> None:
    """A guard on the expected file itself: the totals the samples' README states."""
    entries = [e for v in EXPECTED.values() for e in v["entries"]]
    assert len(entries) == 221
    assert sum(1 for e in entries if e["journal_ref"]) == 34 and sum(1 for e in entries if e["doi"]) == 60
    assert sum(len(a) for e in entries for a in e["affiliations"]) == 6
    assert "Dirk Wübben" in {a for e in entries for a in e["authors"]}
