"""The form a curator answers in the Prefect UI before survey emails go out (imports Prefect:
only tracked runs load it)."""

from __future__ import annotations

from typing import Literal

from prefect.input import RunInput
from pydantic import Field


class SendApproval(RunInput):
    """Send the wave, the first N of it, or nothing."""

    decision: Literal["approve_all", "approve_first_n", "cancel"] = Field(
        "approve_all", description="approve_all sends every message; approve_first_n the first N; cancel sends nothing")
    first_n: int = Field(0, ge=0, description="With approve_first_n: how many")
    approver: str = Field("", description="Your name, recorded with the decision")
