"""The form a curator answers in the Prefect UI about flagged ratings (imports Prefect: only
tracked runs load it)."""

from __future__ import annotations

from typing import Literal

from prefect.input import RunInput
from pydantic import BaseModel, Field


class FlagDecision(BaseModel):
    """Keep or drop the ratings one flag puts in doubt."""

    flag_id: str = Field(description="The flag, as listed in the 'ratings-flags' artifact")
    decision: Literal["keep", "drop"] = Field("keep", description="keep the flagged ratings, or drop them from the benchmark")
    reason: str = Field("", description="Why (optional, recorded with the decision)")


class FlagDecisions(RunInput):
    """One decision per flag; flags left out stay undecided and are asked again next run."""

    decisions: list[FlagDecision] = Field(default_factory=list)
    curator: str = Field("", description="Your name, recorded with every decision")
