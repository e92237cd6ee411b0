"""Under CI the real samples must be there: a conformance suite that skips proves nothing."""

from __future__ import annotations

import os

import pytest

from tests.support.conformance import REAL


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="only CI insists on ../shared")
def test_the_real_samples_are_beside_the_project_under_ci() -> None:
    services = {p.name for p in REAL.iterdir()} if REAL.exists() else set()
    assert {"arxiv", "grobid", "grobid-fulltext", "s2", "s2-graph", "openreview", "openalex"} <= services, f"{REAL} lacks real samples: {sorted(services)}"
