"""The ratings flow on real survey answers: emails sent through a real SMTP server, links clicked
over HTTP on the real survey server, events pulled into the warehouse, flags decided by policy,
on the command line and by a curator through the Prefect API, tuples built and evaluated."""

from __future__ import annotations

import threading

import polars as pl

from revbench.flows.ratings import ratings_flow
from revbench.schemas.tables import FLAG_DECISIONS, RATING_TUPLES, RATINGS, SURVEY_EVENTS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.warehouse.status import read_status
from revbench.warehouse.store import SurveyStore
from tests.support.common import run_cli, settings_env
from tests.support.survey import paused_run_id
from tests.support.waiting import assert_waiting, flow_messages, form_of, shown_in_ui


def test_events_become_ratings_tuples_and_a_rerun_changes_nothing(answered) -> None:
    s, who = answered
    out = ratings_flow.fn(s, decide="drop", curator="ada")
    store = SurveyStore(s.survey_store_path)
    events = store.events_since(0)
    latest = {(e, p): r for e, ans in store.answered().items() for p, r in ans.items() if r is not None}
    assert out.events_pulled == out.events == len(events)
    assert out.duplicates == len(events) - len(latest) > 0
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        ratings = wh.read(RATINGS)
        stored = wh.read(SURVEY_EVENTS)
        tuples = wh.read(RATING_TUPLES)
        decisions = wh.read(FLAG_DECISIONS)
        invitations = dict(wh.survey.survey_invitations().select("invitation_id", "email").iter_rows())
    # Every rating is the store's latest answer for its pair; the history holds every event.
    assert {(i, p): v for i, p, v in ratings.select("invitation_id", "paper_id", "rating").iter_rows()} == latest
    assert stored.height == len(events) and set(stored["disposition"]) == {"latest", "superseded"}
    # The straight-liner's ratings were flagged, dropped by the command-line decision, and kept as rows.
    liner = ratings.filter(pl.col("invitation_id").replace_strict(invitations, default=None) == who["liner"])
    assert liner.height >= 2 and set(liner["status"]) == {"dropped"} and set(liner["rating"]) == {3}
    assert decisions.height == out.flags >= 1 and set(decisions["decided_by"]) == {"ada"}
    assert set(ratings.filter(pl.col("status") != "dropped")["status"]) == {"kept"}
    # Tuples only from kept ratings, higher rating positive, no ties.
    kept = {(r, p): v for r, p, v, st in ratings.select("reviewer_id", "paper_id", "rating", "status").iter_rows() if st == "kept"}
    for kind, a, pos, neg, rp, rn, gap in tuples.iter_rows():
        hi, lo = ((pos, a), (neg, a)) if kind == "paper_centric" else ((a, pos), (a, neg))
        assert kept[hi] == rp > rn == kept[lo] and gap == rp - rn
    assert out.reviewer_centric_tuples == tuples.filter(pl.col("kind") == "reviewer_centric").height > 0
    # Nothing new: the same tables, nothing asked.
    again = ratings_flow.fn(s)
    assert again.events_pulled == 0 and again.flags_asked == 0
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.read(RATINGS).drop("rated_at").equals(ratings.drop("rated_at"))
        assert wh.read(RATING_TUPLES).equals(tuples)


def test_waiting_for_a_curator_in_process_is_one_clear_line_and_keeps_the_answers(answered, monkeypatch) -> None:
    s, _ = answered
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    code, _out, err = run_cli("ratings", "--no-track")
    assert code == 2 and "flags wait for a curator's decision" in err and "--decide" in err
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        ratings = wh.read(RATINGS)
        assert wh.count(SURVEY_EVENTS) > 0 and wh.read(FLAG_DECISIONS).height == 0
    code, _out, err = run_cli("ratings", "--decide", "maybe")
    assert code == 2 and "--decide 'maybe'" in err
    code, out, err = run_cli("ratings", "--no-track", "--decide", "keep", "--curator", "bo", "--evaluate")
    assert code == 0, err
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert set(wh.read(RATINGS)["status"]) == {"kept"} and wh.read(RATINGS).height == ratings.height
    assert "Evaluation on the warehouse benchmark" in out
    code, out, err = run_cli("evaluate", "-b", "warehouse", "-s", "trivial", "-s", "tpms", "--bootstrap", "50")
    assert code == 0, err
    for split in ("pointwise", "paper_centric", "reviewer_centric"):
        assert split in out


def test_the_warehouse_benchmark_before_any_ratings_says_what_to_run(survey_settings: Settings, monkeypatch) -> None:
    for k, v in settings_env(survey_settings).items():
        monkeypatch.setenv(k, v)
    code, _out, err = run_cli("evaluate", "-b", "warehouse")
    assert code == 2 and "revbench ratings" in err


def artifacts_of(run_id: str) -> dict[str, str]:
    """The markdown artifacts of a flow run, by key."""
    import uuid

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[uuid.UUID(str(run_id))])))
    return {a.key: str(a.data) for a in found if a.key}


def test_a_curator_decides_in_the_prefect_ui_and_a_rerun_asks_nothing(prefect_server, answered) -> None:
    from prefect.flow_runs import resume_flow_run

    s, who = answered
    result: dict[str, object] = {}
    runner = threading.Thread(target=lambda: result.update(out=ratings_flow(s)))
    with flow_messages() as said:
        runner.start()
        run_id = paused_run_id(runner, result)
        assert_waiting(s, run_id, said, "decisions on", "revbench ratings --decide keep|drop")
    description, schema = form_of(run_id)
    assert "straight_lining" in description and "Nothing is preset" in description
    # Where the curator looks, the run says what it waits for: at the top of its form, in an artifact.
    assert description.startswith("**This run waits for") and "`revbench ratings --decide keep|drop" in description
    assert "](https://arxiv.org/abs/" in description and "“" in description  # papers by title, linked
    props = schema["properties"]  # nothing preset: every choice offered starts undecided, the evidence beside it
    choices = {k: v for k, v in props.items() if k.startswith(("all_flags", "rule_", "respondent_"))}
    assert len(choices) >= 3 and {v["default"] for v in choices.values()} == {"undecided"}
    assert all("answers" in v["description"] and "“" in v["description"]
               for k, v in choices.items() if k.startswith("respondent_"))
    artifacts = artifacts_of(run_id)
    assert "This run waits for" in artifacts["waiting"] and "https://arxiv.org/abs/" in artifacts["ratings-flags"]
    # The paused run has let go of the warehouse: another process could read it meanwhile.
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        flags = wh.read(RATINGS).explode("flags")["flags"].drop_nulls().unique().to_list()
    assert flags
    # The bulk choice, through the form's schema on the server.
    resume_flow_run(run_id, run_input={"curator": "curator ada", "all_flags": "drop all", "reason": "one value for all"})
    runner.join(timeout=120)
    assert read_status(s.warehouse_path).waiting == []
    out = result["out"]
    assert out.flags_asked == len(flags) and out.dropped >= 2  # type: ignore[attr-defined]
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        d = wh.read(FLAG_DECISIONS)
    assert set(d["decided_by"]) == {"curator ada"} and set(d["reason"]) == {"one value for all"} and set(d["decision"]) == {"drop"}
    again = ratings_flow.fn(s)  # unattended policy is 'wait', yet nothing is asked: every flag is decided
    assert again.flags_asked == 0 and again.dropped == out.dropped  # type: ignore[attr-defined]


def test_a_pause_nobody_answers_ends_the_run_as_paused_expired_in_one_line(prefect_server, answered) -> None:
    from revbench.flows.common import PauseExpired

    s, _ = answered
    # Below the setting's floor on purpose (validation skipped): a wait of seconds, not a day.
    s = s.model_copy(update={"ratings": s.ratings.model_copy(update={"decision_timeout_seconds": 3})})
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["out"] = ratings_flow(s)
        except PauseExpired as exc:
            result["error"] = exc

    runner = threading.Thread(target=run)
    runner.start()
    runner.join(timeout=180)
    error = result["error"]
    assert "\n" not in str(error) and "paused-expired" in str(error) and "revbench ratings --decide" in str(error)
    st = read_status(s.warehouse_path)
    assert st.waiting == [] and st.runs[0]["status"] == "paused-expired"
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.read(FLAG_DECISIONS).height == 0 and "pending" in set(wh.read(RATINGS)["status"])
    assert shown_in_ui(st.runs[0]["run_id"], "wait expired") == "Failed"


def test_a_decision_made_anywhere_ends_every_run_waiting_for_it(prefect_server, answered) -> None:
    """Two tracked runs wait for the curator's decisions on the same flags; `revbench ratings
    --decide drop` in its own process (no Prefect at all) decides them: both runs end their wait
    by themselves and finish with those decisions, nothing is left waiting, and the dropped flags
    show on each run in the UI."""
    from tests.support.cli import cli

    s, _ = answered
    results: list[dict[str, object]] = [{}, {}]
    runners = [threading.Thread(target=lambda r=r: r.update(out=ratings_flow(s))) for r in results]
    runners[0].start()
    first = paused_run_id(runners[0], results[0])
    runners[1].start()
    second = paused_run_id(runners[1], results[1], besides=(first,))
    assert [w["run_id"] for w in read_status(s.warehouse_path).waiting] == [str(first), str(second)]
    res = cli(s, "ratings", "--decide", "drop", "--curator", "ada", "--no-track", "--no-evaluate")
    assert res.returncode == 0, res.stderr
    for runner in runners:
        runner.join(timeout=90)
    assert not any(r.is_alive() for r in runners), "a waiting run did not end its wait"
    st = read_status(s.warehouse_path)
    assert st.waiting == []
    assert {r["run_id"]: r["status"] for r in st.runs if r["run_id"] in (str(first), str(second))} == {
        str(first): "completed", str(second): "completed"}
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        decisions, ratings = wh.read(FLAG_DECISIONS), wh.read(RATINGS)
    dropped = ratings.filter(pl.col("status") == "dropped").height
    assert set(decisions["decided_by"]) == {"ada"} and set(decisions["decision"]) == {"drop"} and dropped >= 2
    for r in results:  # each finished with the command's decisions, none of its own
        assert r["out"].dropped == dropped and r["out"].flags == decisions.height  # type: ignore[attr-defined]
    for run_id in (first, second):
        assert shown_in_ui(run_id, f"{decisions.height} flags dropped") == "Completed"
