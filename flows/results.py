"""What flows return: frozen dataclasses read by attribute (the console, the demo, the refresh
and the tests), never dictionaries. Each flow module defines its result as a subclass of
:class:`FlowResult` beside the flow."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from revbench.evaluation.report import ReportTable

Scalar = int | float | bool | str


@dataclass(frozen=True)
class FlowResult:
    """The base of every flow's result."""

    def scalars(self) -> dict[str, Scalar]:
        """The scalar fields (counts, flags, short texts): what the refresh reports of a stage.
        Nested tables, lists and long texts are left out."""
        out: dict[str, Scalar] = {}
        for f in fields(self):
            value: Any = getattr(self, f.name)
            if isinstance(value, int | float | bool) or (isinstance(value, str) and len(value) < 80):
                out[f.name] = value
        return out


@dataclass(frozen=True)
class ConfiguredEvaluation(FlowResult):
    """The configured scorers' evaluation that ends the ratings and release flows and the refresh
    (``revbench.flows.evaluate.evaluate_configured``); here, beside the base, because the ratings
    and release flows' results carry it."""

    run_id: str
    markdown: str
    tables: list[ReportTable]
    report_dir: str
    judgements: list[str] = field(default_factory=list)
    """One line each for the assignment and the collusion attack, when they ran."""
