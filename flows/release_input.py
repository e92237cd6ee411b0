"""The form a curator answers in the Prefect UI before a release is published (imports Prefect:
only tracked runs load it)."""

from __future__ import annotations

from prefect.input import RunInput
from pydantic import Field


class ReleaseApproval(RunInput):
    """Publish the release, or reject it (the folder stays, marked rejected)."""

    publish: bool = Field(True, description="Publish this release (false: reject it)")
    approver: str = Field("", description="Your name, recorded with the decision")
    reason: str = Field("", description="Why (optional, recorded with the decision)")
