"""When ``revbench labels`` finds no weak positive, its one line says why and what to change: an
empty expert pool names the most prolific author's count (not ``revbench graph``, which did run),
a warehouse without citations names ``revbench graph``; and docs/labels.md gives the demo's data
the ``--experts`` the demo itself uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from revbench.errors import InputError
from revbench.flows.labels import write_labels
from revbench.settings import Settings
from tests.graph.test_weak_labels import world  # noqa: F401 (the hand-made warehouse, a fixture)

DOC = Path(__file__).resolve().parents[2] / "docs" / "labels.md"


def test_an_empty_pool_names_the_most_prolific_author_not_the_graph(world: Settings, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(InputError) as err:
        write_labels(world, "citations", tmp_path / "weak")  # exHarmony's 15: nobody here wrote more than 3
    line = str(err.value)
    assert "no author has more than 15 corpus papers (the most prolific has 3): pass --experts 2 or lower" in line
    assert "revbench graph" not in line and "\n" not in line
    write_labels(world, "authorship", tmp_path / "weak", experts=2)  # the hint's value works


def test_a_pool_without_positives_says_so(world: Settings, tmp_path: Path) -> None:  # noqa: F811
    # Experts A and C (3 papers each): Q1 cites A's own paper and E's, Q2 cites B's; none of them counts.
    with pytest.raises(InputError, match="none of the 2 reviewers with more than 2 corpus papers wrote a paper a query "
                                         "paper cites: lower --experts"):
        write_labels(world, "citations", tmp_path / "weak", experts=2)


def test_no_citations_names_the_graph_stage(world: Settings, tmp_path: Path) -> None:  # noqa: F811
    import duckdb

    with duckdb.connect(str(world.warehouse_path)) as con:  # a warehouse whose graph stage never ran
        con.execute("DELETE FROM citations")
    with pytest.raises(InputError, match=r"holds no citation between two of its papers: run `revbench graph` first"):
        write_labels(world, "citations", tmp_path / "weak", experts=1)


def test_the_doc_gives_the_demo_its_experts() -> None:
    from revbench.app.demo import DEMO_EXPERTS

    commands = re.findall(r"^revbench labels .*$", DOC.read_text(), flags=re.M)
    assert any(f"--experts {DEMO_EXPERTS} " in c for c in commands), commands
