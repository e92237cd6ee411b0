"""The one-off bench's comparison with the gold standard's own evaluation script
(``benchmarks/cli_bench.py --gold-script``) and how docs/gen_numbers.py renders it: the goal and
the values' agreement are said as measured, met or missed, agreeing or not."""

from __future__ import annotations

import copy

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.cli_bench import _printed
from tests.support.docs import gen_numbers

ROOT = Path(__file__).resolve().parents[2]


def gen() -> ModuleType:
    return gen_numbers()


def test_the_scripts_printed_lines_are_read() -> None:
    out = "Pointwise estimate of performance: 0.28\n95% confidence interval: [0.24; 0.34]\n"
    assert _printed(out) == {"loss": 0.28, "ci95": [0.24, 0.34]}


def test_a_missing_gold_script_is_refused(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "benchmarks.cli_bench", "--gold-script", str(tmp_path / "none.py")],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "--gold-script" in out.stderr and "no such file" in out.stderr
    (tmp_path / "evaluation_script.py").write_text("")
    out = subprocess.run([sys.executable, "-m", "benchmarks.cli_bench", "--gold-script", str(tmp_path / "evaluation_script.py")],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "scripts/scoring.py" in out.stderr


def _with(tmp_path: Path, gold: dict[str, Any] | None) -> str:
    d = json.loads((ROOT / "benchmarks" / "results" / "cli.json").read_text())
    d["cold_evaluate_gold"] = gold
    (tmp_path / "cli.json").write_text(json.dumps(d))
    return gen().cli_cold(tmp_path)


def test_the_gold_comparison_is_rendered_as_measured(tmp_path: Path) -> None:
    d = json.loads((ROOT / "benchmarks" / "results" / "cli.json").read_text())
    g = d.get("cold_evaluate_gold")
    if g is None:  # a results file from a run without --gold-script
        assert "was not timed in this run (`--gold-script PATH`" in _with(tmp_path, None)
        return
    met = copy.deepcopy(g)
    met.update(goal_met=True, values_agree=True)
    text = _with(tmp_path, met)
    assert "at least 30x faster than its script: met" in text and "the same values" in text
    assert f"{g['median_s']:.2f} s against {g['reference_script']['median_s']:.2f} s" in text
    missed = copy.deepcopy(g)
    missed.update(goal_met=False, values_agree=False)
    text = _with(tmp_path, missed)
    assert "at least 30x faster than its script: missed" in text and "the goal is missed" in text
    assert "DISAGREE" in text
    assert "was not timed in this run (`--gold-script PATH`" in _with(tmp_path, None)
