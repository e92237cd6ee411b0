"""The numbers the pages quote are rendered from the benchmarks' results files (docs/gen_numbers.py):
a hand-typed number, or a results file updated without its pages, fails here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.docs import gen_numbers

ROOT = Path(__file__).resolve().parents[2]


def gen() -> ModuleType:
    return gen_numbers()


def test_every_block_is_what_its_results_file_renders() -> None:
    g = gen()
    blocks = [m["name"] for page in g.PAGES for m in g.BLOCK.finditer((ROOT / page).read_text())]
    # the README's and Getting started's demo numbers, and the realism and graph tables, are generated
    assert {"demo-readme", "demo-story", "demo-timing", "world-realism", "graph-worth"} <= set(blocks)
    assert g.stale() == [], "run: .venv/bin/python docs/gen_numbers.py"


def test_a_hand_edited_number_is_caught(tmp_path: Path) -> None:
    g = gen()
    for page in g.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    readme = tmp_path / "README.md"
    text = readme.read_text()
    m = next(m for m in g.BLOCK.finditer(text) if m["name"] == "demo-readme")
    body = m["body"]
    facts = json.loads((g.RESULTS / "demo.json").read_text())["facts"]
    typed = body.replace(f"{facts['ratings']['counts']['kept']:,} kept ratings", "999 kept ratings")
    assert typed != body
    readme.write_text(text.replace(body, typed))
    assert g.stale(tmp_path) == ["README.md: demo-readme"]
    readme.write_text(g.refresh(readme.read_text()))
    assert g.stale(tmp_path) == []


def test_the_numbers_follow_the_results_file(tmp_path: Path) -> None:
    g = gen()
    for name in ("demo.json", "world_realism.json", "graph_worth.json"):
        shutil.copy(g.RESULTS / name, tmp_path / name)
    demo = json.loads((tmp_path / "demo.json").read_text())
    before = g.demo_story(tmp_path)
    demo["facts"]["ratings"]["counts"]["paper_centric_tuples"] = 12345
    (tmp_path / "demo.json").write_text(json.dumps(demo))
    after = g.demo_story(tmp_path)
    assert "12345 paper-centric" in after and "12345" not in before


def test_an_unknown_block_or_a_missing_results_file_is_named(tmp_path: Path) -> None:
    g = gen()
    with pytest.raises(KeyError, match="README.md: unknown numbers block 'losses'"):
        g.refresh("<!-- numbers:losses -->\nx\n<!-- /numbers -->", g.RESULTS, "README.md")
    with pytest.raises(FileNotFoundError, match="demo.json: no results file"):
        g.demo_readme(tmp_path)


def test_the_demo_writes_the_numbers_the_pages_quote(tmp_path: Path) -> None:
    """``reports/demo.json`` carries the average loss of each scorer from the warehouse evaluation
    and the smallest coverage a loss rests on (the pages' "each on the N% of pairs")."""
    from revbench.app.demo import write_demo_facts
    from revbench.settings import Settings

    report = tmp_path / "reports" / "warehouse"
    report.mkdir(parents=True)
    rows = [{"split": "average", "metric": "loss", "scorer": "tpms", "value": 0.25123, "coverage": None},
            {"split": "average", "metric": "loss", "scorer": "trivial", "value": 0.5, "coverage": None},
            {"split": "pointwise", "metric": "loss", "scorer": "tpms", "value": 0.2, "coverage": 0.989},
            {"split": "paper_centric", "metric": "loss", "scorer": "tpms", "value": 0.3, "coverage": 0.97},
            {"split": "paper_centric", "metric": "accuracy", "scorer": "tpms", "value": 0.7, "coverage": 0.5},
            {"split": "average", "metric": "loss", "scorer": "cof", "value": None, "coverage": None}]
    (report / "results.json").write_text(json.dumps(rows))
    out = write_demo_facts(Settings(data_dir=tmp_path), {"papers": 30})
    facts = json.loads(out.read_text())
    assert facts == {"papers": 30, "losses": {"tpms": 0.2512, "trivial": 0.5}, "coverage": 0.97}
