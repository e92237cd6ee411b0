"""The form a curator answers in the Prefect UI before a release is published (imports Prefect:
only tracked runs load it). Publishing is off until switched on; the privacy audit's result and
the changes against the parent release are in the form's description."""

from __future__ import annotations

from prefect.input import RunInput
from pydantic import Field


class ReleaseApproval(RunInput):
    """Publish the release, or reject it (the folder stays, marked rejected)."""

    publish: bool = Field(False, description="Switch on to publish this release; left off, submitting rejects it")
    approver: str = Field("", description="Your name, recorded with the decision")
    reason: str = Field("", description="Why (optional, recorded with the decision)")
