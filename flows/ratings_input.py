"""The form a curator answers in the Prefect UI about flagged ratings (imports Prefect: only
tracked runs load it). Choices go from broad to narrow (all, by rule, by respondent, one flag);
the narrowest one given wins. Nothing is preset: every choice starts ``undecided`` (a plain enum
renders as a select in the UI, where an optional one renders as a type switch), and a flag no
choice reaches stays pending.

The rule and respondent choices are fields made for the run (``flag_form``), each titled with
its rule or respondent and described by its evidence: the UI shrinks a long form's description
out of sight, while a field's description always shows, wrapped, above its select."""

from __future__ import annotations

from typing import Any, Literal

from prefect.input import RunInput
from pydantic import BaseModel, Field, create_model

Decision = Literal["undecided", "keep", "drop"]


class FlagDecision(BaseModel):
    """Keep or drop the ratings one flag puts in doubt."""

    flag_id: str = Field(description="The flag, as listed in the 'ratings-flags' artifact")
    decision: Decision = Field("undecided", description="keep the flagged ratings, or drop them; undecided: no choice")
    reason: str = Field("", description="Why (optional, recorded with the decision)")


class FlagDecisions(RunInput):
    """Decide the flags at once, by rule, by respondent or one by one; flags left undecided stay
    pending and are asked again next run."""

    all_flags: Literal["undecided", "keep all", "drop all"] = Field(
        "undecided", description="One decision for every flag no narrower choice reaches; undecided: no choice")
    decisions: list[FlagDecision] = Field(default_factory=list, description="Add a flag here to decide it alone")
    reason: str = Field("", description="Why (optional, recorded with decisions made for all, by rule or by respondent)")
    curator: str = Field("", description="Your name, recorded with every decision")


def flag_form(rules: list[dict[str, str]], respondents: list[dict[str, str]]) -> type[FlagDecisions]:
    """``FlagDecisions`` plus one choice per rule (``rule_<i>``: ``{rule, fires_when}``) and per
    respondent (``respondent_<i>``: ``{respondent, evidence}``), in the order given."""
    fields: dict[str, Any] = {}
    for i, r in enumerate(rules):
        fields[f"rule_{i}"] = (Decision, Field("undecided", title=f"All {r['rule']} flags",
                                               description=f"Fires when {r['fires_when']}"))
    for i, r in enumerate(respondents):
        fields[f"respondent_{i}"] = (Decision, Field("undecided", title=f"Respondent {r['respondent']}",
                                                     description=r["evidence"]))
    return create_model("FlagDecisions", __base__=FlagDecisions, **fields)


def choices(answer: FlagDecisions, rules: list[dict[str, str]],
            respondents: list[dict[str, str]]) -> tuple[dict[str, str], dict[str, str]]:
    """The answer's choices by rule and by respondent (``flag_form``'s fields read back)."""
    return ({r["rule"]: getattr(answer, f"rule_{i}", "undecided") for i, r in enumerate(rules)},
            {r["respondent"]: getattr(answer, f"respondent_{i}", "undecided") for i, r in enumerate(respondents)})
