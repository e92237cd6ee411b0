"""A table artifact too big for Prefect's server (it refuses events over 1.5 MB: the curator would
see no table) is cut to the rows that fit, and its description says how many of how many."""

from __future__ import annotations

import json

from revbench.flows.common import ARTIFACT_MAX_BYTES, bounded_rows


def _rejected(n: int) -> list[dict[str, object]]:
    # The shape of ingest's rejected papers: at 160k papers 9,600 rows made a 2 MB event.
    return [{"arxiv_id": f"2609.{i:05d}", "title": "A title of some length " * 4, "reason": "blank_abstract",
             "detail": "the abstract is empty after cleaning"} for i in range(n)]


def test_a_table_too_big_for_an_artifact_keeps_the_rows_that_fit_and_says_so() -> None:
    rows = _rejected(9_600)
    assert len(json.dumps(rows)) > ARTIFACT_MAX_BYTES
    shown, description = bounded_rows(rows, "Papers this run rejected")
    assert 0 < len(shown) < len(rows) and shown == rows[:len(shown)]
    assert len(json.dumps(shown)) <= ARTIFACT_MAX_BYTES
    assert len(json.dumps(rows[:len(shown) + 1])) > ARTIFACT_MAX_BYTES  # as many as fit, not fewer
    assert description.startswith("Papers this run rejected (the first ") and "of 9,600 rows" in description


def test_a_table_that_fits_is_published_whole() -> None:
    rows = _rejected(50)
    assert bounded_rows(rows, "Papers this run rejected") == (rows, "Papers this run rejected")
