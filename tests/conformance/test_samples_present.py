"""The real samples, when they are beside the project, are whole; under CI they must be there: a
conformance suite that skips proves nothing. A copy of the project alone (no ../shared) skips
this, and says so in the skipped-groups summary at the end of the run."""

from __future__ import annotations

import os

import pytest

from tests.support.conformance import REAL

SERVICES = {"arxiv", "grobid", "grobid-fulltext", "s2", "s2-graph", "openreview", "openalex"}


def test_the_real_samples_are_beside_the_project_and_whole() -> None:
    if not REAL.exists() and os.environ.get("CI") != "true":
        pytest.skip("../shared/external/real-responses is not beside the project (only CI insists on it)")
    services = {p.name for p in REAL.iterdir()} if REAL.exists() else set()
    assert SERVICES <= services, f"{REAL} lacks real samples: {sorted(SERVICES - services)}"
