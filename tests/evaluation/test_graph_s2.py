"""The gold standard's graph from Semantic Scholar (``--graph-from s2``): citations among its papers
and their fields of study, through the S2 client against recorded answers; a rerun asks nothing;
S2 down is one line; without the option there is no graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from revbench.errors import ServiceUnavailable, UsageError
from revbench.evaluation.importers.graph_s2 import cache_dir, s2_graph_of
from revbench.evaluation.importers.registry import load_benchmark
from revbench.evaluation.plan import plan_evaluation
from revbench.flows.evaluate import evaluate_flow
from tests.support.common import on_replay, run_cli, settings_env
from tests.support.evaluation import write_openreview

DEAD = "http://127.0.0.1:9/s2/graph/v1"  # the discard port: nothing listens there
BASE = "/s2/graph/v1/paper"
REFERENCES = {  # paper -> its recorded references answer (None: S2 does not know it, HTTP 404)
    "sub1": [{"citedPaper": {"paperId": "pro1", "title": "P1"}, "isInfluential": True},
             {"citedPaper": {"paperId": "elsewhere", "title": "Not in the benchmark"}, "isInfluential": True},
             {"citedPaper": {"paperId": None, "title": "No S2 id"}}],
    "sub2": [],
    "pro1": None,
    "pro2": [{"citedPaper": {"paperId": "sub2", "title": "S2"}, "isInfluential": False},
             {"citedPaper": {"paperId": "sub2", "title": "S2"}, "isInfluential": True}],
}
BATCH = [  # in the order asked: the benchmark's paper ids, sorted
    {"paperId": "pro1", "s2FieldsOfStudy": [{"category": "Computer Science", "source": "external"},
                                            {"category": "Mathematics", "source": "s2-fos-model"}]},
    None,
    {"paperId": "sub1", "fieldsOfStudy": ["Computer Science"]},
    {"paperId": "sub2", "s2FieldsOfStudy": None},
]


def _gold(d: Path) -> Path:
    """A gold standard slice: participant R1 rated sub1 5.0 and sub2 1.0; R1's profile is pro1, pro2."""
    draw = d / "d_20_1"
    (draw / "archives").mkdir(parents=True)
    head = ["ParticipantID", *[f"Paper{i}" for i in range(1, 11)], *[f"Expertise{i}" for i in range(1, 11)]]
    row = ["R1", "sub1", "sub2", *[""] * 8, "5.0", "1.0", *[""] * 8]
    (d / "evaluations.tsv").write_text("\t".join(head) + "\n" + "\t".join(row) + "\n")
    (draw / "submissions.json").write_text(json.dumps(
        {p: {"id": p, "content": {"title": f"Submission {p}", "abstract": "graphs", "year": 2021}} for p in ("sub1", "sub2")}))
    (draw / "archives" / "~R1.jsonl").write_text("".join(
        json.dumps({"id": p, "content": {"title": f"Profile {p}", "abstract": "graphs", "year": 2020}}) + "\n"
        for p in ("pro1", "pro2")))
    return d


def _recorded(d: Path) -> Path:
    """routes.json of S2's answers for the slice's four papers."""
    d.mkdir()
    routes = [{"method": "POST", "path": f"{BASE}/batch", "body_file": "batch.json",
               "headers": {"content-type": "application/json"}}]
    (d / "batch.json").write_text(json.dumps(BATCH))
    for pid, refs in REFERENCES.items():
        body = {"error": f"Paper with id {pid} not found"} if refs is None else {"offset": 0, "data": refs}
        (d / f"{pid}.json").write_text(json.dumps(body))
        routes.append({"method": "GET", "path": f"{BASE}/{pid}/references", "status": 404 if refs is None else 200,
                       "headers": {"content-type": "application/json"}, "body_file": f"{pid}.json"})
    (d / "routes.json").write_text(json.dumps(routes))
    return d


def _edges(graph) -> set[tuple[str, str, bool | None]]:
    return {(a, b, f) for a, b, f, _ in graph.citations.iter_rows()}


def test_the_gold_standard_gets_its_graph_from_s2_and_a_rerun_asks_nothing(tmp_path: Path, replay, settings) -> None:
    bench = load_benchmark("goldstandard", _gold(tmp_path / "gold"))
    assert bench.graph is None  # never without asking
    app = replay(fixtures=_recorded(tmp_path / "s2"))
    graph = s2_graph_of(bench, on_replay(settings, app))
    # Only edges among the benchmark's papers; a paper cited twice is one edge, influential when any answer says so.
    assert _edges(graph) == {("sub1", "pro1", True), ("pro2", "sub2", True)}
    assert set(graph.citations["source"]) == {"s2"}
    # Reference lists to any work S2 has an id for: a benchmark paper by its id, another as s2:<id>.
    assert graph.references is not None
    assert sorted(graph.references.iter_rows()) == [("pro2", "sub2"), ("sub1", "pro1"), ("sub1", "s2:elsewhere")]
    assert sorted(graph.topics.select("paper_id", "scheme", "topic").iter_rows()) == [
        ("pro1", "s2-fos", "Computer Science"), ("pro1", "s2-fos", "Mathematics"), ("sub1", "s2-fos", "Computer Science")]
    assert sorted(p.name for p in cache_dir(settings).iterdir()) == ["pro1.json", "pro2.json", "sub1.json", "sub2.json"]
    # The rerun reads the cache: S2 could not have answered it.
    again = s2_graph_of(bench, settings.with_overrides(s2={"base_url": DEAD}))
    assert again.citations.equals(graph.citations) and again.topics.equals(graph.topics)


def test_evaluate_with_graph_from_s2_scores_citation(tmp_path: Path, replay, settings) -> None:
    gold = _gold(tmp_path / "gold")
    s = on_replay(settings, replay(fixtures=_recorded(tmp_path / "s2")))
    out = evaluate_flow.fn(s, benchmarks=[f"goldstandard={gold}"], scorers=["citation:direction=forward", "citation"],
                           graph_from="s2", bootstrap=0, plot=False, report_dir=str(tmp_path / "report"))
    loss = {r["scorer"]: r["value"] for r in out.rows if r["scorer"].startswith("citation") and r["metric"] == "loss"}
    # sub1 cites R1's pro1, sub2 none of R1's work: R1 rated sub1 above sub2. Both ways, R1's pro2
    # citing sub2 weighs as much (influential, as old): a tie, half the loss.
    assert loss == {"citation:direction=forward": 0.0, "citation": 0.5}
    with pytest.raises(UsageError, match="goldstandard carries no citation graph.*--graph-from s2"):
        evaluate_flow.fn(s, benchmarks=[f"goldstandard={gold}"], scorers=["citation"], bootstrap=0, plot=False,
                         report_dir=str(tmp_path / "r2"))


def test_s2_down_is_one_line(tmp_path: Path, settings, monkeypatch) -> None:
    gold = _gold(tmp_path / "gold")
    down = settings.with_overrides(s2={"base_url": DEAD, "delay_seconds": 0, "keyless_delay_seconds": 0})
    with pytest.raises(ServiceUnavailable) as err:
        s2_graph_of(load_benchmark("goldstandard", gold), down)
    assert "\n" not in str(err.value) and f"Semantic Scholar at {DEAD} is unreachable" in str(err.value)
    for key, value in settings_env(down).items():
        monkeypatch.setenv(key, value)
    code, out, errs = run_cli("evaluate", "-b", f"goldstandard={gold}", "-s", "citation", "--graph-from", "s2",
                              "--bootstrap", "0", "--no-plot")
    errors = [line for line in (out + errs).splitlines() if line.startswith("error:")]
    assert code == 3 and "Traceback" not in out + errs  # beside the line saying it asks S2, one line of error
    assert len(errors) == 1 and f"Semantic Scholar at {DEAD} is unreachable" in errors[0]


def test_graph_from_is_checked_before_any_work(tmp_path: Path, settings) -> None:
    gold = _gold(tmp_path / "gold")
    assert plan_evaluation(settings, [f"goldstandard={gold}"], ["citation"], [], graph_from="s2").graph_from == "s2"
    with pytest.raises(UsageError, match="--graph-from 'openalex': expected one of s2"):
        plan_evaluation(settings, [f"goldstandard={gold}"], ["citation"], [], graph_from="openalex")
    with pytest.raises(UsageError, match="--graph-from s2: no benchmark of this run has Semantic Scholar paper ids"):
        plan_evaluation(settings, [f"openreview={write_openreview(tmp_path / 'or')}"], ["citation"], [], graph_from="s2")
