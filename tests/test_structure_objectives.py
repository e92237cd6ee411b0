"""The training objectives are one table and train through one loop: every objective the command
line accepts is an entry of ``revbench.objectives`` whose flow and loss resolve, and no module but
``revbench/ml/loop.py`` steps an optimizer (each rule also shown failing on a planted fault)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import typer

from revbench import objectives
from revbench.app.commands import models as model_commands
from revbench.errors import UsageError
from revbench.objectives import OBJECTIVE_NAMES, OBJECTIVES, Objective
from revbench.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("revbench", "flows", "tasks", "schemas", "warehouse", "templates")
LOOP = "revbench/ml/loop.py"
"""The one module allowed to step an optimizer."""


def test_the_table_names_each_objective_once_with_everything_an_entry_needs() -> None:
    assert len(set(OBJECTIVE_NAMES)) == len(OBJECTIVES) > 0
    sections = Settings.model_fields
    for o in OBJECTIVES:
        assert o.name.isidentifier() and o.doc and o.data and o.rows.endswith(".parquet"), o
        assert o.section in sections, o
        fields = sections[o.section].annotation.model_fields  # type: ignore[union-attr]
        assert o.settings is None or (set(o.settings) <= set(fields) and len(set(o.settings)) == len(o.settings)), o


@pytest.mark.parametrize("entry", OBJECTIVES, ids=OBJECTIVE_NAMES)
def test_every_entrys_flow_and_loss_resolve(entry: Objective) -> None:
    flow = entry.runner()
    assert callable(getattr(flow, "run", None)) and callable(getattr(flow, "fn", None)), entry.flow
    assert callable(entry.loss_fn()), entry.loss


def _option(command: str, name: str) -> Any:
    from revbench.app.cli import app

    click_app = typer.main.get_command(app)
    cmd = click_app.commands[command]  # type: ignore[attr-defined]
    return next(p for p in cmd.params if p.name == name)


def test_the_command_lines_choices_and_help_are_the_table() -> None:
    opt = _option("train", "objective")
    assert opt.default == OBJECTIVES[0].name
    assert opt.help == objectives.help_text()
    assert all(f"{o.name}: {o.doc}" in opt.help for o in OBJECTIVES)
    with pytest.raises(UsageError) as err:
        model_commands.train(objective="nope")
    assert str(err.value) == "--objective 'nope': expected rate, attention, augment or factors"
    assert objectives.choices() == "rate, attention, augment or factors"


@pytest.mark.parametrize("name", OBJECTIVE_NAMES)
def test_every_objective_the_command_accepts_runs_its_entrys_flow(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []

    class Flow:
        def __init__(self, ref: str):
            self.ref = ref

        def run(self, settings: object, **kw: Any) -> str:
            ran.append((self.ref, kw))
            return "done"

    printed: list[object] = []
    monkeypatch.setattr(model_commands, "setup", lambda **_: "settings")
    monkeypatch.setattr(model_commands, "resolve_track", lambda track, long_flow: False)
    monkeypatch.setattr(Objective, "runner", lambda self: Flow(self.flow))
    monkeypatch.setattr(model_commands, "print_train", printed.append)
    model_commands.train(name=None, objective=name, base_model=None, max_steps=None, replace=False, track=None)
    assert ran == [(objectives.objective(name).flow, {"name": name, "replace": False, "track": False})]
    assert printed == ["done"]


def test_the_train_command_names_no_objective_itself() -> None:
    """The if-chain over objective names is gone: the command reads them from the table."""
    tree = ast.parse((ROOT / "revbench/app/commands/models.py").read_text())
    train = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "train")
    named = [(n.lineno, n.value) for n in ast.walk(train) if isinstance(n, ast.Constant) and n.value in OBJECTIVE_NAMES]
    assert named == []


def _receiver(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def optimizer_steps(tree: ast.Module) -> list[tuple[int, str]]:
    """The calls in ``tree`` that only a training loop makes: ``x.backward()``, ``x.zero_grad()``
    and ``opt.step()`` on a receiver named like an optimizer (``opt``, ``optim``, ``optimizer``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, receiver = node.func.attr, _receiver(node.func.value).lower()
            if attr in ("backward", "zero_grad") or (attr == "step" and "opt" in receiver):
                found.append((node.lineno, f"{receiver}.{attr}()"))
    return found


def second_loops(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Every module under ``root``'s code folders but :data:`LOOP` that steps an optimizer."""
    bad = {}
    for top in CODE_DIRS:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel != LOOP and (calls := optimizer_steps(ast.parse(path.read_text(), rel))):
                bad[rel] = calls
    return bad


def test_only_the_one_loop_steps_an_optimizer() -> None:
    """``revbench.ml.loop.run_loop`` is every objective's loop: a second one would drift from it
    (the finite-loss check, the checkpoint cadence, the progress) as the two copies did before."""
    assert second_loops(ROOT) == {}
    assert {c for _, c in optimizer_steps(ast.parse((ROOT / LOOP).read_text()))} == {
        "optimizer.zero_grad()", "loss.backward()", "optimizer.step()"}


def test_the_loop_rule_fails_on_a_planted_second_loop(tmp_path: Path) -> None:
    (tmp_path / "revbench" / "ml").mkdir(parents=True)
    (tmp_path / "revbench" / "ml" / "loop.py").write_text((ROOT / LOOP).read_text())
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "quick.py").write_text(
        "def fit(model, opt, batches):\n"
        "    for batch in batches:\n"
        "        loss = model(batch)\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n"
        "        opt.step()\n")
    (tmp_path / "revbench" / "ml" / "bare.py").write_text("def nudge(loss, self):\n    loss.backward()\n"
                                                         "    self.optimizer.step()\n")
    assert second_loops(tmp_path) == {
        "flows/quick.py": [(4, "opt.zero_grad()"), (5, "loss.backward()"), (6, "opt.step()")],
        "revbench/ml/bare.py": [(2, "loss.backward()"), (3, "optimizer.step()")],
    }
