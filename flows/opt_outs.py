"""The opt-out pull that the survey and ratings flows both run before they write to anyone: a
stage of two flows, so it lives in neither (a flow module is imported only to run its flow)."""

from __future__ import annotations

from revbench.flows.common import Run, stage, stage_task
from revbench.schemas.tables import SURVEY_OPT_OUTS
from revbench.tasks.survey import new_opt_outs
from revbench.warehouse import utcnow
from revbench.warehouse.store import SurveyStore


@stage_task("pull-opt-outs")
def opt_out_stage(run: Run, store: SurveyStore) -> set[str]:
    """Opt-outs recorded by the survey server, kept in the warehouse by address for good."""
    with stage(run, "opt-outs") as st:
        have = st.wh.survey.opted_out_emails()  # kept as first recorded: a later or replaced store never rewrites them
        new = new_opt_outs(st.wh.survey.survey_invitations(), store.opted_out(), have, utcnow())
        if new.height:
            st.wh.survey.upsert(SURVEY_OPT_OUTS, new)
        out = have | set(new["email"].to_list())
        st.result.rows_in, st.result.rows_out = new.height, len(out)
    return out
