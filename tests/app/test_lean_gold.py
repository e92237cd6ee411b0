"""The lean lane of ``revbench evaluate -b goldstandard=DIR -p ...`` (``revbench.evaluation.lean_gold``)
against the full path: the same lines printed and the same files written, byte for byte but the
run id and the time, on the REAL gold standard (``../shared/external/goldstandard-full``, its one
draw ``d_20_1`` standing in for each draw, as ``benchmarks/cli_bench.py`` lays it out) with
randomized prediction files, perturbed ratings and profiles, bootstrap 0 and more, several seeds;
what it must not take goes to the full path, which answers it."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from revbench.evaluation import lean_gold
from revbench.evaluation.metrics import bootstrap
from tests.app.test_cold_imports import LEAN_NEVER, MODULES_AT_EXIT, loaded_of
from tests.app.test_lean_evaluate import assert_same, lane_env, run_here, tree  # noqa: F401  # lane_env: a fixture
from tests.support.cli import RATED, one_line_error, write_gold

GOLD = Path(__file__).resolve().parents[2].parent / "shared" / "external" / "goldstandard-full"
needs_gold = pytest.mark.skipif(not (GOLD / "data" / "evaluations.csv").is_file(),
                                reason="../shared/external/goldstandard-full is not beside the project")


def read_table() -> list[list[str]]:
    """The real evaluations.csv as rows of cells, the header first."""
    return [line.split("\t") for line in (GOLD / "data" / "evaluations.csv").read_text().splitlines()]


def layout(root: Path, draws: int = 10, table: list[list[str]] | None = None, flat: bool = False,
           first: Path | None = None, copied: bool = False) -> Path:
    """A gold-standard folder: the ratings (``table``, the real ones by default) and ``draws``
    draws, each the real ``d_20_1`` (linked; the last ``copied``) but the first where ``first`` is
    given; ``flat`` lays it out as a slice (``evaluations.tsv`` and the draws beside it)."""
    rows = table or read_table()
    (root / ("" if flat else "data")).mkdir(parents=True, exist_ok=True)
    (root / ("evaluations.tsv" if flat else "data/evaluations.csv")).write_text("".join("\t".join(r) + "\n" for r in rows))
    base = root if flat else root / "evaluation_datasets"
    base.mkdir(exist_ok=True)
    for x in range(1, draws + 1):
        if copied and x == draws:
            shutil.copytree(GOLD / "evaluation_datasets" / "d_20_1", base / f"d_20_{x}")
        else:
            (base / f"d_20_{x}").symlink_to(first if first is not None and x == 1 else GOLD / "evaluation_datasets" / "d_20_1")
    return root


def rated(table: list[list[str]]) -> dict[str, list[str]]:
    """Each participant's rated papers."""
    return {r[0]: [p for p in r[1:11] if p.strip()] for r in table[1:]}


def scores(rng: random.Random, papers: dict[str, list[str]], style: str) -> dict[str, dict[str, float | int]]:
    """SYNTHETIC scores of every rated pair (and some unrated ones) in OpenReview's format: random,
    with ties, a constant, integers or tiny values."""
    out: dict[str, dict[str, float | int]] = {}
    for who, ps in papers.items():
        extra = [f"x{rng.randrange(1000)}" for _ in range(rng.randrange(3))]
        out[who] = {p: {"random": rng.random(), "tied": rng.choice([0.5, 0.25, rng.random()]), "constant": 0.5,
                        "int": rng.choice([0, 1, 2]), "tiny": rng.random() * 1e-9}[style] for p in [*ps, *extra]}
    if rng.random() < 0.3:
        out["someone-else"] = {"p": 1.0}
    return out


def write_predictions(rng: random.Random, where: Path, name: str, draws: int, papers: dict[str, list[str]]) -> Path:
    """One scorer's predictions: one file for every draw, or a folder in one of the gold
    standard's layouts (``<name>_d_20_<x>_ta.json``, ``<name>_d_20_<x>.json``, ``d_20_<x>/predictions_<name>.json``)."""
    style = rng.choice(["random", "random", "tied", "constant", "int", "tiny"])
    # A name that is a pattern is searched for as one in a folder: the lane leaves that to the full path.
    kind = rng.choice(["file", "ta", "plain", "nested"]) if name.isidentifier() or "." in name else "file"
    if kind == "file":
        path = where / f"{name}-all.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(scores(rng, papers, style)))
        return path
    folder = where / f"{name}-preds"
    for x in range(1, draws + 1):
        path = {"ta": folder / f"{name}_d_20_{x}_ta.json", "plain": folder / f"{name}_d_20_{x}.json",
                "nested": folder / f"d_20_{x}" / f"predictions_{name}.json"}[kind]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(scores(rng, papers, style), indent=rng.choice([None, 1])))
    return folder


def gold_args(bench: Path, preds: list[tuple[str, Path]], *extra: str) -> list[str]:
    return ["evaluate", "-b", f"goldstandard={bench}", *[a for n, p in preds for a in ("-p", f"{n}={p}")], "--no-track",
            *extra]


@needs_gold
def test_the_lane_answers_the_benchmarks_command_as_the_full_path_does(tmp_path: Path, lane_env: None) -> None:
    rng = random.Random(0)
    bench = layout(tmp_path / "gold")
    preds = [("tpms", write_predictions(rng, tmp_path / "in", "tpms", 10, rated(read_table())))]
    screen = assert_same(tmp_path / "run", gold_args(bench, preds, "--bootstrap", "1000"))
    assert "goldstandard · goldstandard" in screen and "scorer: tpms" in screen and "  loss: 0." in screen
    rows = json.loads((tmp_path / "run" / "lean" / "data" / "reports" / "evaluate" / "results.json").read_text())
    # 58 participants' pairs of differently rated papers, as the gold standard's own script counts them.
    assert [(r["metric"], r["n"]) for r in rows][:2] == [("loss", 1653), ("accuracy", 1653)]
    assert all(r["ci_low"] is not None and r["benchmark_version"] == rows[0]["benchmark_version"] for r in rows)
    assert all("baseline" in r and r["baseline"] is None for r in rows)  # every row a scorer's own
    assert not (tmp_path / "run" / "full" / "data" / "warehouse.duckdb").exists()  # nothing stored, by either


def perturbed_table(rng: random.Random) -> list[list[str]]:
    """The real ratings with some changed to other levels on the scale (ties among a participant's
    papers, 1/64 steps), some papers left out and the columns shuffled."""
    table = read_table()
    for row in table[1:]:
        for i in range(1, 11):
            if row[i].strip() and rng.random() < 0.15:
                row[10 + i] = rng.choice(["1", "3.0", "5", "2.25", "4.015625", " 4.5 ", "1.5e0"])
            elif row[i].strip() and rng.random() < 0.03:
                row[i] = row[10 + i] = ""
    order = list(range(len(table[0])))
    rng.shuffle(order)
    return [[row[i] for i in order] + (["extra"] if k == 0 else ["x"]) for k, row in enumerate(table)]


def first_draw(rng: random.Random, where: Path) -> Path:
    """A copy of ``d_20_1`` with some participants' profiles gone or left without a titled paper
    (they leave the evaluation), and a blank line and CRLF line ends in others."""
    d = where / "d_20_1"
    shutil.copytree(GOLD / "evaluation_datasets" / "d_20_1", d)
    files = sorted((d / "archives").glob("*.jsonl"))
    for f in rng.sample(files, 4):
        f.unlink()
    for f in rng.sample([f for f in files if f.exists()], 3):
        notes = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        for n in notes:
            n["content"]["title"] = rng.choice(["", "  "])
        f.write_text("\n".join(json.dumps(n) for n in notes) + "\n")
    f = next(f for f in files if f.exists())
    f.write_text("\n" + f.read_text().replace("\n", "\r\n"))
    return d


NAMES = ("tpms", "specter", "trivial", "a.b-c_d", "modèle", "x[1]", "scores_of_a_model_with_a_rather_long_name_for_its_table")
"""Scorer names: ``trivial`` (never marked best), a long one, and names rich prints its own way."""


@needs_gold
@pytest.mark.parametrize("seed", range(12))
def test_the_lane_answers_as_the_full_path_on_randomized_predictions_and_perturbed_gold(
        tmp_path: Path, lane_env: None, seed: int) -> None:
    rng = random.Random(seed)
    table = perturbed_table(rng) if seed % 3 else read_table()
    draws = rng.choice([1, 2, 3, 10])
    first = first_draw(rng, tmp_path / "copy") if seed % 4 == 1 else None
    bench = layout(tmp_path / "gold", draws, table, flat=seed % 5 == 2, first=first, copied=seed % 6 == 3)
    header = table[0]
    papers = {r[header.index("ParticipantID")]: [r[header.index(f"Paper{i}")] for i in range(1, 11)
                                                  if r[header.index(f"Paper{i}")].strip()] for r in table[1:]}
    names = rng.sample(NAMES, rng.choice([1, 2, 2, 3]))
    preds = [(n, write_predictions(rng, tmp_path / "in" / str(i), n, draws, papers)) for i, n in enumerate(names)]
    extra = ["--bootstrap", str(rng.choice([0, 1, 50, 1000])), *rng.choice([[], ["--seed", str(rng.choice([0, 3, 12345]))]]),
             *rng.choice([[], ["--report", "rep", "--no-plot"], ["--json-out", "rows.json", "--no-plot"]])]
    report = "rep" if "--report" in extra else "data/reports/evaluate"
    earlier = rng.choice([None, "[", json.dumps([{"benchmark": "lrbench:x", "path": "a"}, {"benchmark": "goldstandard"}])])
    assert_same(tmp_path / "run", gold_args(bench, preds, *extra), {f"{report}/exports.json": earlier} if earlier else None)


def test_the_lane_answers_on_a_slice_laid_out_flat(tmp_path: Path, lane_env: None) -> None:
    """SYNTHETIC: the hand-made slice (one draw beside ``evaluations.tsv``), needing no shared folder."""
    bench = write_gold(tmp_path / "gold")
    (tmp_path / "p.json").write_text(json.dumps(RATED))
    screen = assert_same(tmp_path / "run", gold_args(bench, [("p", tmp_path / "p.json")], "--bootstrap", "30"))
    assert "loss: 0.000" in screen


@needs_gold
def test_two_scorers_are_told_apart_as_the_full_path_tells_them(tmp_path: Path, lane_env: None) -> None:
    rng = random.Random(5)
    bench = layout(tmp_path / "gold", 2)
    papers = rated(read_table())
    preds = [(n, write_predictions(rng, tmp_path / "in" / n, n, 2, papers)) for n in ("tpms", "trivial", "specter")]
    screen = assert_same(tmp_path / "run", gold_args(bench, preds, "--bootstrap", "200", "--seed", "9"))
    assert "Can the benchmark tell the scorers apart?" in screen
    seps = json.loads((tmp_path / "run" / "lean" / "data" / "reports" / "evaluate" / "separation.json").read_text())
    assert len(seps) == 3 and all(s["n"] == 1653 and s["n_clusters"] == 58 for s in seps)


@needs_gold
def test_a_scorer_that_ties_half_the_pairs_is_noted_as_the_full_path_notes_it(tmp_path: Path, lane_env: None) -> None:
    """Ties are averaged over the draws: none in the first, all in the second, exactly half."""
    bench = layout(tmp_path / "gold", 2)
    papers, rng = rated(read_table()), random.Random(4)
    (tmp_path / "in").mkdir()
    for x, style in ((1, "random"), (2, "constant")):
        (tmp_path / "in" / f"half_d_20_{x}_ta.json").write_text(json.dumps(scores(rng, papers, style)))
    screen = assert_same(tmp_path / "run", gold_args(bench, [("half", tmp_path / "in")], "--bootstrap", "20"))
    assert "half tied 50% of these pairs" in screen


@needs_gold
def test_a_broken_lane_is_caught(tmp_path: Path, lane_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: a lane whose bootstrap drew with another seed is told apart."""
    bench = layout(tmp_path / "gold", 1)
    preds = [("tpms", write_predictions(random.Random(1), tmp_path / "in", "tpms", 1, rated(read_table())))]
    args = gold_args(bench, preds, "--bootstrap", "100")
    assert_same(tmp_path / "good", args)
    monkeypatch.setattr(lean_gold, "bootstrap", SimpleNamespace(
        **{k: getattr(bootstrap, k) for k in ("cluster_sums", "interval")},
        replicate_counts=lambda k, n, seed: bootstrap.replicate_counts(k, n, seed + 1)))
    assert run_here(tmp_path / "taken", args, full=False)[0] == 0  # it still answers, with other intervals
    with pytest.raises(AssertionError, match=r"\[0\.\d+, 0\.\d+\]"):  # the screen: another interval
        assert_same(tmp_path / "broken", args)


def _missing_pair(bench: Path, preds: Path) -> None:
    f = next(preds.glob("*_d_20_1_*.json"))
    d = json.loads(f.read_text())
    who = next(iter(d))
    d[who].pop(next(iter(d[who])))
    f.write_text(json.dumps(d))


def _edit(preds: Path, old: str, new: str) -> None:
    f = next(preds.glob("*_d_20_2_*.json"))
    f.write_text(f.read_text().replace(old, new, 1))


def _archive_line(bench: Path, preds: Path) -> None:
    # A draw whose profile the full path cannot read (it reads every draw, whatever it evaluates).
    d = bench / "evaluation_datasets" / "d_20_2"
    d.unlink()
    shutil.copytree(GOLD / "evaluation_datasets" / "d_20_1", d)
    f = sorted((d / "archives").glob("*.jsonl"))[3]
    f.write_text(f.read_text() + '{"content": {"title": "cut\n')


def _retitled(bench: Path, preds: Path) -> None:
    # The same paper titled otherwise in another draw: the full path refuses one id with two titles.
    d = bench / "evaluation_datasets" / "d_20_2"
    d.unlink()
    shutil.copytree(GOLD / "evaluation_datasets" / "d_20_1", d)
    subs = json.loads((d / "submissions.json").read_text())
    next(iter(subs.values()))["content"]["title"] = "Another title"
    (d / "submissions.json").write_text(json.dumps(subs))


def _rating(value: str) -> object:
    def change(bench: Path, preds: Path) -> None:
        ev = bench / "data" / "evaluations.csv"
        lines = ev.read_text().splitlines()
        cells = lines[1].split("\t")
        cells[11] = value
        ev.write_text("\n".join([lines[0], "\t".join(cells), *lines[2:]]) + "\n")
    return change


DECLINED = {
    # what: (the change, whether the full path refuses it in one line or answers it)
    "a file missing a pair": (_missing_pair, "refuses"),
    "a NaN score": (lambda bench, preds: _edit(preds, ": 0.", ": NaN, \"z\": 0."), "refuses"),
    "a truncated file": (lambda bench, preds: _edit(preds, "}}", "}"), "refuses"),
    "a score of -0.0": (lambda bench, preds: _edit(preds, ": 0.", ": -0.0, \"z\": 0."), "answers"),
    "a repeated key": (lambda bench, preds: _edit(preds, "{\"", "{\"k\": {}, \"k\": {}, \""), "refuses"),
    "a surrogate": (lambda bench, preds: _edit(preds, "{\"", "{\"\\ud800\": {}, \""), "answers"),  # with a warning
    "an unreadable profile": (_archive_line, "refuses"),
    "a paper titled twice": (_retitled, "refuses"),
    "a rating between the steps": (_rating("3.3"), "answers"),
    "a rating off the scale": (_rating("7"), "refuses"),
    "a quoted rating": (_rating('"4"'), "answers"),
}


@needs_gold
@pytest.mark.parametrize("what", list(DECLINED))
def test_input_the_lane_does_not_mirror_is_left_to_the_full_path(tmp_path: Path, lane_env: None, what: str) -> None:
    bench = layout(tmp_path / "gold", 2)
    preds = tmp_path / "in"
    for x in (1, 2):
        (preds / f"tpms_d_20_{x}_ta.json").parent.mkdir(parents=True, exist_ok=True)
        (preds / f"tpms_d_20_{x}_ta.json").write_text(json.dumps(scores(random.Random(x), rated(read_table()), "random")))
    args = gold_args(bench, [("tpms", preds)], "--bootstrap", "10")
    assert run_here(tmp_path / "before", args, full=False)[0] == 0  # the lane takes it as it was
    change, full = DECLINED[what]
    change(bench, preds)
    assert run_here(tmp_path / "lean", args, full=False) == (None, "", "")
    assert tree(tmp_path / "lean") == {}  # nothing written before it stepped aside
    code, out, err = run_here(tmp_path / "full", args, full=True)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert (code == 0 and "Report: " in out) if full == "answers" else (code != 0 and len(lines) == 1), (code, out, err)


@needs_gold
@pytest.mark.parametrize("change", [
    ["-s", "tpms"], ["--baseline", "tpms"], ["--allow-partial"], ["--plot"], ["--report", "r"], ["--graph-from", "s2"],
    ["--record"], ["--track"], ["--assignment"], ["-b", "lrbench=."], ["--bootstrap", "-1"], ["--bootstrap", "01"],
    ["--seed", "-3"], ["-p", "t*=x"], ["-v"],
])
def test_a_command_line_the_gold_lane_does_not_take_is_left_to_the_full_path(tmp_path: Path, lane_env: None,
                                                                             change: list[str]) -> None:
    bench = layout(tmp_path / "gold", 1)
    preds = [("tpms", write_predictions(random.Random(2), tmp_path / "in", "tpms", 1, rated(read_table())))]
    assert run_here(tmp_path / "before", gold_args(bench, preds), full=False)[0] == 0
    assert run_here(tmp_path / "lean", gold_args(bench, preds, *change), full=False)[0] is None
    assert tree(tmp_path / "lean") == {}


@needs_gold
def test_the_gold_lane_loads_numpy_and_none_of_the_full_paths_libraries(tmp_path: Path) -> None:
    from revbench.app.lean_evaluate import RICH_ENVIRON

    bench = layout(tmp_path / "gold", 2)
    preds = [("tpms", write_predictions(random.Random(3), tmp_path / "in", "tpms", 2, rated(read_table())))]
    dump = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_")) and k not in RICH_ENVIRON}
    env.update(MODULES_OUT=str(dump), PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_API_URL="http://127.0.0.1:9/api")
    out = subprocess.run([sys.executable, "-c", MODULES_AT_EXIT, *gold_args(bench, preds, "--bootstrap", "100")], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stderr == "", out.stderr[-3000:]
    loaded = set(json.loads(dump.read_text()))
    assert {"revbench.evaluation.lean_gold", "numpy"} <= loaded
    assert loaded_of(loaded, tuple(m for m in LEAN_NEVER if m != "numpy")) == []
    assert not (tmp_path / "data" / "warehouse.duckdb").exists()


def test_the_pairs_sums_do_not_depend_on_their_order() -> None:
    """Why the lane need not build the pairs in polars' order: at ratings in steps of 1/64 every
    per-cluster sum, and every replicate's, is exact."""
    rng = np.random.default_rng(0)
    levels = rng.integers(64, 5 * 64 + 1, size=(2, 45 * 200)) / 64
    ra, rb = levels.max(axis=0), levels.min(axis=0)
    codes = rng.integers(0, 200, size=ra.size)
    diff = rng.normal(size=ra.size)
    order = rng.permutation(ra.size)
    counts = bootstrap.replicate_counts(200, 100, 1)
    sums = []
    for num in ((ra - rb) * ((diff < 0) + 0.5 * (diff == 0)), (ra - rb), ((diff > 0) & (rb >= 4)).astype(float)):
        a = bootstrap.cluster_sums(num, codes, 200)
        b = bootstrap.cluster_sums(num[order], codes[order], 200)
        assert (a == b).all() and a.sum() == b[::-1].sum()
        sums.append(a)
    nums, dens = np.vstack(sums[::2]), np.vstack(sums[1:2] * 2)
    # The lane's replicates (einsum) are the full path's (BLAS), to the last bit.
    assert (lean_gold.replicates(nums, dens, counts) == bootstrap.replicates(nums, dens, counts)).all()


@needs_gold
def test_a_gold_name_read_as_a_paired_difference_or_a_refused_write_ends_as_in_the_full_path(tmp_path: Path,
                                                                                          lane_env: None) -> None:
    bench = layout(tmp_path / "gold", 1)
    preds = write_predictions(random.Random(5), tmp_path / "in", "tpms", 1, rated(read_table()))
    differs = gold_args(bench, [("a - b", preds)], "--bootstrap", "10")
    assert run_here(tmp_path / "lean", differs, full=False)[0] is None and tree(tmp_path / "lean") == {}
    one_line_error(*run_here(tmp_path / "full", differs, full=True), 2, "paired difference")
    args = gold_args(bench, [("tpms", preds)], "--bootstrap", "10", "--report", "rep", "--no-plot")
    lines = []
    for side in ("lean-w", "full-w"):
        (tmp_path / side / "rep" / "report.md").mkdir(parents=True)
        code, out, err = run_here(tmp_path / side, args, full=side == "full-w")
        lines.append(one_line_error(code, out, err, 1, "IsADirectoryError", "report.md"))
    assert lines[0] == lines[1]
