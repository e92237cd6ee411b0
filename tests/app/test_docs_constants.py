"""The settings the pages state in words are the code's: a constant changed without its page
(or a page edited without the constant) fails here. Measured numbers are checked elsewhere
(``test_docs_numbers``: rendered from the results files); these are rules, not measurements."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from revbench.evaluation.lean_gold import LEVELS
from revbench.tasks.graph import TITLE_YEAR_SLACK
from revbench.warehouse.bulk_state import COMPACT_PARTS, COMPACT_SHARE

ROOT = Path(__file__).resolve().parents[2]
WORDS = {"a quarter": Fraction(1, 4), "a third": Fraction(1, 3), "half": Fraction(1, 2), "one": 1, "two": 2, "three": 3}


def _said(page: str, pattern: str) -> list[str]:
    found = re.findall(pattern, " ".join((ROOT / page).read_text().split()))
    assert found, f"{page}: no longer says /{pattern}/ (update this test with the page)"
    return found


@pytest.mark.parametrize(("page", "pattern", "value"), [
    ("docs/going-live.md", r"once the masks hide (a quarter|a third|half) of the rows", Fraction(COMPACT_SHARE)),
    ("docs/going-live.md", r"or a folder has (\d+) parts, it is rewritten whole", COMPACT_PARTS),
    ("docs/benchmarks.md", r"ratings off a 1/(\d+) grid", LEVELS),
    ("docs/stages/evaluation.md", r"between steps of 1/(\d+)", LEVELS),
    ("docs/stages/graph.md", r"a title only when the reference's year is within (one|two|three) of the new paper's",
     TITLE_YEAR_SLACK),
])
def test_a_rule_a_page_states_is_the_codes(page: str, pattern: str, value: object) -> None:
    for said in _said(page, pattern):
        assert (WORDS[said] if said in WORDS else int(said)) == value, f"{page} says {said!r}; the code has {value}"
