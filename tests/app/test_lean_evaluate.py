"""The lean lane of ``revbench evaluate`` (``revbench.app.lean_evaluate``) against the full path:
the same lines printed and the same files written, byte for byte but the run id and the time, on
LR-bench's public samples and on randomized files of RATE's format; a command line it must not
take goes to the full path, which gives its one-line error. That it loads none of the full path's
libraries is watched in ``tests/app/test_cold_imports.py``."""

from __future__ import annotations

import io
import json
import os
import random
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from revbench.app import cli
from revbench.app.lean_evaluate import plain_table, print_tables, run_lean
from revbench.evaluation import lean
from tests.support.cli import one_line_error

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = ROOT.parent / "shared" / "external" / "lrbench-sample"
DEAD_API = "http://127.0.0.1:9/api"
"""A Prefect API nothing answers at: with ``--no-track`` neither path asks it anything."""
RUN_ID = re.compile(r"run ([0-9a-f-]{36})$", re.M)
STAMP = re.compile(r'"evaluated_at": "[^"]+"')


def run_here(where: Path, args: list[str], full: bool) -> tuple[int | None, str, str]:
    """``revbench ARGS`` in this process from the folder ``where``: the lean lane alone (None: it
    did not take the command), or the full path. The environment is put back after it (the full
    path sets Prefect's defaults in it, as its own process would)."""
    where.mkdir(parents=True, exist_ok=True)
    saved, cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.chdir(where)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.run(list(args)) if full else run_lean(list(args))
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root``: a file's bytes, None for a folder."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def unstamped(text: str, run_id: str) -> str:
    return STAMP.sub('"evaluated_at": "T"', text.replace(run_id, "RUN"))


def assert_same(tmp_path: Path, args: list[str], setup: dict[str, str] | None = None) -> str:
    """Run ``args`` in the lane (which must take it) and in the full path, each in a folder of its
    own holding ``setup`` (relative path -> text) first; the screens and every file must be equal
    but the run ids and the times. Returns the lane's screen."""
    outs = {}
    for side in ("lean", "full"):
        for rel, text in (setup or {}).items():
            (tmp_path / side / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / side / rel).write_text(text)
        code, out, err = run_here(tmp_path / side, args, full=side == "full")
        assert (code, err) == (0, ""), (side, code, out, err)
        run_id = RUN_ID.search(out)
        assert run_id, out
        files = {k: None if v is None else unstamped(v.decode(), run_id[1]) for k, v in tree(tmp_path / side).items()}
        outs[side] = (unstamped(out, run_id[1]), files)
    assert outs["lean"][0] == outs["full"][0]
    assert sorted(outs["lean"][1]) == sorted(outs["full"][1])
    for name, text in outs["full"][1].items():
        assert outs["lean"][1][name] == text, name
    return outs["lean"][0]


@pytest.fixture
def lane_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings the lane reads as a user's defaults: no REVBENCH_ variable, the data folder
    ``data`` of the working directory, a Prefect API nothing answers (``--no-track`` skips it)."""
    for k in [k for k in os.environ if k.upper().startswith(("REVBENCH_", "PREFECT_"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PREFECT_API_URL", DEAD_API)


def rate_args(*files: tuple[str, Path], extra: tuple[str, ...] = ()) -> list[str]:
    return ["evaluate", *[a for name, path in files for a in ("-p", f"{name}={path}")], "--bootstrap", "0",
            "--no-track", *extra]


@pytest.mark.skipif(not EXTERNAL.exists(), reason="../shared/external is not beside the project")
def test_the_lane_writes_and_prints_what_the_full_path_does_on_the_public_samples(tmp_path: Path, lane_env: None) -> None:
    files = (("rate_pc", EXTERNAL / "RATE_pc.sample.json"), ("rate_rc", EXTERNAL / "RATE_rc.sample.json"))
    screen = assert_same(tmp_path / "a", rate_args(*files))
    assert "│ rate_pc │ 0.500 │    0.438 │" in screen and "│ rate_rc │ 0.113 │    0.825 │" in screen
    assert "Report: data/reports/evaluate (" in screen
    assert_same(tmp_path / "b", rate_args(*files, extra=("--seed", "7", "--report", "rep", "--no-plot",
                                                          "--json-out", "rows.json")))
    rows = json.loads((tmp_path / "b" / "lean" / "rows.json").read_text())
    assert round(next(r["value"] for r in rows if r["scorer"] == "rate_rc" and r["metric"] == "loss"), 6) == 0.112676


def write_rate(rng: random.Random, path: Path, kinds: tuple[str, ...], n: int, anchors: int, int_papers: bool) -> None:
    """SYNTHETIC predictions in RATE's flat format: ``n`` tuples of ``kinds`` over ``anchors`` anchors,
    with tied scores, zero-weight and reversed pairs, ratings between levels and pairs shared by tuples."""
    def paper(i: int) -> int | str:
        return 1000 + i if int_papers else f"P{i}"

    score: dict[tuple[str, str], float | int] = {}
    items, seen = [], set()
    n = min(n, anchors * 15 * 15 * len(kinds) // 2)  # tuples there are room for
    while len(items) < n:
        kind = rng.choice(kinds)
        anchor = rng.randrange(anchors)
        pos, neg = rng.randrange(15), rng.randrange(15)
        if (kind, anchor, pos, neg) in seen:
            continue
        seen.add((kind, anchor, pos, neg))
        if kind == "paper_centric":
            ids = (paper(anchor), f"R{pos}", f"R{neg}")
            pairs = [(f"R{pos}", str(paper(anchor))), (f"R{neg}", str(paper(anchor)))]
        else:
            ids = (f"R{anchor}", paper(pos), paper(neg))
            pairs = [(f"R{anchor}", str(paper(pos))), (f"R{anchor}", str(paper(neg)))]
        for pair in pairs:
            score.setdefault(pair, rng.choice([rng.random(), rng.random() * 1e-3, 0.5, 0.25, 1, 0, 2]))
        levels = [1, 2, 3, 4, 5, 1.5, 2.25, 3.7, 4.1, 1.1, 4.9]
        items.append({"anchor_id": ids[0], "positive_id": ids[1], "negative_id": ids[2], "type": kind,
                      "positive_score": score[pairs[0]], "negative_score": score[pairs[1]],
                      "positive_ref_score": rng.choice(levels), "negative_ref_score": rng.choice(levels)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(items, indent=rng.choice([None, 1])))


NAMES = ("rate_pc", "mine", "trivial", "a.b-c_d", "scores_of_a_model_with_a_rather_long_name_that_does_not_fit_in_80_columns",
         "modèle", "x[1]", "with:colon", "s**b**")
"""Scorer names: short and long (a table too wide for the line), ``trivial`` (never marked best),
and names rich prints its own way (markup, an emoji's colons, bold marks, not ASCII)."""


@pytest.mark.parametrize("seed", range(24))
def test_the_lane_writes_and_prints_what_the_full_path_does_on_randomized_rate_files(
        tmp_path: Path, lane_env: None, seed: int) -> None:
    rng = random.Random(seed)
    kinds = [("paper_centric",), ("reviewer_centric",), ("paper_centric", "reviewer_centric")]
    files = []
    for k in range(rng.randint(1, 3)):
        path = tmp_path / "in" / f"{rng.choice(['RATE_', 'my preds ', 'p.'])}{seed}_{k}.json"
        path.parent.mkdir(exist_ok=True)
        # Up to 300 anchors: more clusters than numpy adds in one block of 128.
        write_rate(rng, path, rng.choice(kinds), rng.choice([1, 5, 40, 400]), rng.choice([1, 3, 30, 300]), rng.random() < 0.3)
        files.append((f"{rng.choice(NAMES)}{k}" if k else rng.choice(NAMES), path))
    extra = rng.choice([(), ("--report", "rep", "--no-plot"), ("--json-out", "rows.json", "--seed", "3")])
    report = "rep" if extra[:1] == ("--report",) else "data/reports/evaluate"
    earlier = rng.choice([None, "{", '{"a": 1}', json.dumps([{"benchmark": "lrbench:other", "path": "x"},
                                                             {"benchmark": f"lrbench:{files[0][1].stem}", "path": "y"}])])
    assert_same(tmp_path / "run", rate_args(*files, extra=extra), {f"{report}/exports.json": earlier} if earlier else None)


def test_both_lanes_mark_every_row_of_results_json_as_a_scorers_own(tmp_path: Path, lane_env: None) -> None:
    write_rate(random.Random(6), tmp_path / "r.json", ("paper_centric",), 8, 2, False)
    assert_same(tmp_path / "run", rate_args(("r", tmp_path / "r.json"), extra=("--json-out", "rows.json")))
    for side in ("lean", "full"):
        for name in ("data/reports/evaluate/results.json", "rows.json"):
            rows = json.loads((tmp_path / "run" / side / name).read_text())
            # The key present and null: a reader takes the row as the scorer's own, not by its name.
            assert rows and all("baseline" in r and r["baseline"] is None for r in rows), (side, name)
            assert list(rows[0])[-1] == "baseline"  # eval_results' order, in both


def test_ties_and_zero_weight_pairs_count_as_the_full_path_counts_them(tmp_path: Path, lane_env: None) -> None:
    items = [{"anchor_id": "a", "positive_id": f"r{i}", "negative_id": "r9", "type": "paper_centric",
              "positive_score": 0.5, "negative_score": 0.5, "positive_ref_score": 4, "negative_ref_score": 2 + (i == 0) * 2}
             for i in range(3)]
    (tmp_path / "ties.json").write_text(json.dumps(items))
    screen = assert_same(tmp_path / "run", rate_args(("tied", tmp_path / "ties.json")))
    assert "ties" in screen and "tied 100% of these pairs" in screen
    # Every pair of equal ratings: no pair to compare, no value, and still the same files.
    (tmp_path / "flat.json").write_text(json.dumps([{**items[0], "positive_score": 0.7}]))
    assert "│ flat   │    – │" in assert_same(tmp_path / "run2", rate_args(("flat", tmp_path / "flat.json")))


DECLINED = {
    "a NaN score": lambda t: t.update(positive_score=float("nan")),
    "a missing score": lambda t: t.pop("negative_score"),
    "a rating off the scale": lambda t: t.update(positive_ref_score=7),
    "a boolean score": lambda t: t.update(negative_score=True),
    "an id with a space": lambda t: t.update(anchor_id="a b"),
    "a score of -0.0": lambda t: t.update(positive_score=-0.0),
    "a float id": lambda t: t.update(positive_id=1.5),
    "an unknown type": lambda t: t.update(type="pointwise"),
}


@pytest.mark.parametrize("what", list(DECLINED))
def test_a_file_the_lane_does_not_mirror_is_left_to_the_full_path(tmp_path: Path, lane_env: None, what: str) -> None:
    items = [{"anchor_id": f"a{i}", "positive_id": f"p{i}", "negative_id": f"n{i}", "type": "paper_centric",
              "positive_score": 0.7, "negative_score": 0.2, "positive_ref_score": 4, "negative_ref_score": 2} for i in range(3)]
    DECLINED[what](items[1])
    (tmp_path / "rate.json").write_text(json.dumps(items))
    args = rate_args(("rate", tmp_path / "rate.json"))
    assert run_here(tmp_path / "lean", args, full=False) == (None, "", "")
    assert tree(tmp_path / "lean") == {}  # nothing written before it stepped aside
    code, out, err = run_here(tmp_path / "full", args, full=True)
    assert code == 0 or len([ln for ln in err.splitlines() if ln.strip()]) == 1, (code, out, err)


def test_an_exports_index_the_full_path_stops_on_is_left_to_it(tmp_path: Path, lane_env: None) -> None:
    (tmp_path / "data" / "reports" / "evaluate").mkdir(parents=True)
    (tmp_path / "data" / "reports" / "evaluate" / "exports.json").write_text("5")
    write_rate(random.Random(1), tmp_path / "r.json", ("paper_centric",), 5, 2, False)
    assert run_here(tmp_path, rate_args(("r", tmp_path / "r.json")), full=False)[0] is None
    one_line_error(*run_here(tmp_path, rate_args(("r", tmp_path / "r.json")), full=True), 1, "TypeError")


@pytest.mark.parametrize("change", [
    ["-b", "lrbench=."], ["-s", "tpms"], ["--bootstrap", "100"], ["--record"], ["--track"], ["-v"], ["--debug"],
    ["--report", "r"], ["--allow-partial"], ["--baseline", "x"], ["--seed", "x"], ["--json-out", "~/rows.json"],
    ["-p", "x@lrbench=f.json"], ["-p", "y"], ["-p"], ["--", "x"], ["-prate=f.json"],
])
def test_a_command_line_the_lane_does_not_take_is_left_to_the_full_path(tmp_path: Path, lane_env: None,
                                                                        change: list[str]) -> None:
    write_rate(random.Random(2), tmp_path / "r.json", ("paper_centric",), 5, 2, False)
    assert run_here(tmp_path / "lean", rate_args(("r", tmp_path / "r.json"), extra=tuple(change)), full=False)[0] is None
    assert tree(tmp_path / "lean") == {}


@pytest.mark.parametrize("where", ["REVBENCH_LOG_LEVEL", ".env", "demo", "profile", "api", "ui", "same stem", "same name"])
def test_settings_or_prefect_the_lane_does_not_read_leave_it_to_the_full_path(
        tmp_path: Path, lane_env: None, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    write_rate(random.Random(3), tmp_path / "in" / "r.json", ("paper_centric",), 5, 2, False)
    files = [("r", tmp_path / "in" / "r.json")]
    extra: tuple[str, ...] = ("--no-track",)
    if where == "REVBENCH_LOG_LEVEL":
        monkeypatch.setenv(where, "DEBUG")
    elif where == ".env":
        (tmp_path / "lean" / ".env").parent.mkdir()
        (tmp_path / "lean" / ".env").write_text("PREFECT_API_URL=http://127.0.0.1:9/api\n")
    elif where == "demo":
        (tmp_path / "lean" / "data").mkdir(parents=True)
        (tmp_path / "lean" / "data" / ".demo-settings.json").write_text("{}")
    elif where == "profile":
        monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
        (tmp_path / "home").mkdir()
        (tmp_path / "home" / "profiles.toml").write_text('active = "local"\n')
    elif where == "api":
        extra = ()  # a configured API makes the run tracked
    elif where == "ui":
        monkeypatch.delenv("PREFECT_API_URL")
        monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
        (tmp_path / "home").mkdir()
        (tmp_path / "home" / "revbench-ui.json").write_text('{"api_url": "http://127.0.0.1:9/api", "pid": 1}')
    elif where == "same stem":
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "R.json").write_bytes((tmp_path / "in" / "r.json").read_bytes())
        files.append(("s", tmp_path / "other" / "R.json"))
    else:
        files.append(("R", tmp_path / "in" / "r.json"))
    args = ["evaluate", *[a for n, p in files for a in ("-p", f"{n}={p}")], "--bootstrap", "0", *extra]
    before = tree(tmp_path / "lean") if (tmp_path / "lean").exists() else {}
    assert run_here(tmp_path / "lean", args, full=False)[0] is None
    assert tree(tmp_path / "lean") == before


def test_the_console_script_gives_the_full_paths_one_line_error_for_what_the_lane_leaves(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('[{"anchor_id": "a", "positive_ref_score": 4,')
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("REVBENCH_", "PREFECT_"))}
    env["PREFECT_HOME"] = str(tmp_path / "home")
    for item, needles in ((f"x={tmp_path / 'missing.json'}", ("--predictions", "missing.json", "does not exist")),
                          (f"x={tmp_path / 'bad.json'}", ("bad.json", "not valid JSON"))):
        out = subprocess.run([sys.executable, "-m", "revbench", "evaluate", "-p", item, "--bootstrap", "0", "--no-track"],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        one_line_error(out.returncode, out.stdout, out.stderr, 2, *needles)


@pytest.mark.parametrize("width", [40, 61, 80, 200])
def test_the_lanes_plain_tables_are_richs_in_a_log(width: int) -> None:
    from revbench.app.narrow import FittingConsole

    rng = random.Random(width)
    for _ in range(30):
        name = "".join(rng.choice("abcdefghij_-.0123") for _ in range(rng.choice([1, 5, 20, 45])))
        ties = rng.choice([None, 0.0, 0.005, 0.01, 0.333, 0.5, 0.999, 1.0])
        rows = [dict(benchmark=f"lrbench:{name}", split="lr_mixed", scorer=name, metric=m, ties=ties,
                     value=rng.choice([None, rng.random()])) for m in lean.METRICS]
        table = lean.report_table(rows)
        out = io.StringIO()
        print_tables([table], FittingConsole(file=out, width=width))
        assert out.getvalue() == "".join(f"{line}\n" for line in plain_table(table, width))


def test_numpy_sum_is_numpys_to_the_last_bit() -> None:
    rng = random.Random(0)
    for n in [*range(20), 127, 128, 129, 136, 255, 256, 257, 1000, 1025]:
        values = [rng.random() * rng.choice([1.0, 1e-9, 1e9]) for _ in range(n)]
        assert lean.numpy_sum(values) == float(np.array(values).sum())


def test_a_name_that_looks_like_a_paired_difference_is_refused(tmp_path: Path, lane_env: None) -> None:
    write_rate(random.Random(3), tmp_path / "r.json", ("paper_centric",), 5, 2, False)
    args = rate_args(("a - b", tmp_path / "r.json"))
    assert run_here(tmp_path / "lean", args, full=False)[0] is None  # the full path's to refuse
    one_line_error(*run_here(tmp_path / "full", args, full=True), 2, "'a - b", "paired difference", "-p a-b=")
    assert not (tmp_path / "full" / "data" / "reports").exists()  # refused before anything is written
    from revbench.app import lean_evaluate
    from revbench.evaluation.plan import DIFFERENCE

    assert lean_evaluate.DIFFERENCE == DIFFERENCE  # the lane's copy (it does not load the plan)


def test_a_write_the_system_refuses_ends_in_the_full_paths_one_line(tmp_path: Path, lane_env: None) -> None:
    write_rate(random.Random(4), tmp_path / "r.json", ("paper_centric",), 5, 2, False)
    args = rate_args(("r", tmp_path / "r.json"), extra=("--report", "rep", "--no-plot"))
    lines = []
    for side in ("lean", "full"):
        (tmp_path / side / "rep" / "report.md").mkdir(parents=True)  # something in the way under the report folder
        code, out, err = run_here(tmp_path / side, args, full=side == "full")
        lines.append(one_line_error(code, out, err, 1, "IsADirectoryError", "report.md", "(add --debug for the traceback)"))
    assert lines[0] == lines[1]
