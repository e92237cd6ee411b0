"""A rated round for the release tests."""

from __future__ import annotations

import pytest

from revbench.flows.ratings import ratings_flow
from revbench.settings import Settings
from tests.support.survey import KEY


@pytest.fixture
def rated(answered) -> tuple[Settings, dict]:
    s, info = answered
    s = s.with_overrides(release={"id_key": KEY})
    ratings_flow.fn(s, decide="drop", curator="ada")
    return s, info
