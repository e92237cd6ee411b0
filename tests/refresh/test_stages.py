"""The stage table: every entry names a flow, a plan, tables and a command that exist, in the
shapes the refresh calls them, and reading it loads neither Prefect nor a flow."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from revbench.app.cli import app
from revbench.flows.common import RevbenchFlow
from revbench.schemas.tables import TABLES
from revbench.stages import STAGES, StageSpec, resolve

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spec", STAGES, ids=[s.name for s in STAGES])
def test_each_entry_names_a_flow_and_a_plan_the_refresh_can_call(spec: StageSpec) -> None:
    flow, planner = resolve(spec.flow), resolve(spec.planner)
    planned = ("settings", "wh", "since", "until") if spec.window else ("settings", "wh")
    inspect.signature(planner).bind(*planned)
    fn = flow.fn if isinstance(flow, RevbenchFlow) else flow
    given = {**spec.flow_args, **({"synthetic": True} if spec.window else {})}
    assert set(given) <= set(inspect.signature(fn).parameters), f"{spec.flow} takes no {sorted(given)}"


@pytest.mark.parametrize("spec", STAGES, ids=[s.name for s in STAGES])
def test_each_entry_watches_real_inputs_and_names_a_real_command(spec: StageSpec) -> None:
    assert spec.inputs
    assert [i for i in spec.inputs if i not in TABLES and i != "survey store"] == []
    words = spec.command.split()
    assert words[0] == "revbench"
    cmd = typer.main.get_command(app)
    for word in words[1:]:
        if word.startswith("-"):
            assert any(word in p.opts for p in cmd.params), f"{spec.command}: no option {word}"
        elif hasattr(cmd, "commands"):
            assert word in cmd.commands, f"{spec.command}: no command {word}"
            cmd = cmd.commands[word]


def test_reading_the_table_loads_neither_prefect_nor_a_flow() -> None:
    """The settings read the table for every command."""
    code = ("import sys, revbench.settings, revbench.stages;"
            "print(','.join(m for m in sys.modules if m == 'prefect' or m.startswith('revbench.flows')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""
