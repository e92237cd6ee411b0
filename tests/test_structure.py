"""The import graph keeps its layers: settings enter at the top, SQL stays in the warehouse, the
application sits above everything, and the import names live under ``revbench``."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"flows": "revbench.flows", "tasks": "revbench.tasks", "schemas": "revbench.schemas",
          "warehouse": "revbench.warehouse", "templates": "revbench.templates"}
CODE_DIRS = ["revbench", *MAPPED]
SQL = re.compile(r"^\s*(SELECT|INSERT INTO|UPDATE|DELETE FROM|CREATE TABLE|ALTER TABLE)\s")


def modules() -> dict[str, tuple[Path, ast.Module]]:
    """Every module of the package by import name, parsed."""
    out = {}
    for top in CODE_DIRS:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT / top).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            base = MAPPED.get(top, "revbench")
            out[".".join([base, *parts])] = (path, ast.parse(path.read_text(), str(path)))
    return out


def imports(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


MODULES = modules()


def test_every_import_of_our_code_is_namespaced() -> None:
    bad = [(name, imp) for name, (_, tree) in MODULES.items() for imp in imports(tree)
           if imp.split(".")[0] in MAPPED]
    assert bad == []


def test_nothing_below_the_application_imports_it() -> None:
    bad = [(name, imp) for name, (_, tree) in MODULES.items() if not name.startswith("revbench.app")
           and name != "revbench.__main__" for imp in imports(tree) if imp.startswith("revbench.app")]
    assert bad == []


@pytest.mark.parametrize(("layer", "forbidden"), [
    ("revbench.tasks", ("revbench.flows", "revbench.warehouse")),
    ("revbench.flows", ()),
    ("revbench.schemas", ("revbench.warehouse", "revbench.tasks", "revbench.flows", "revbench.clients")),
    ("revbench.warehouse", ("revbench.tasks", "revbench.flows", "revbench.clients", "revbench.evaluation")),
    ("revbench.evaluation", ("revbench.flows", "revbench.tasks")),
    ("revbench.synth", ("revbench.flows", "revbench.tasks", "revbench.warehouse")),
])
def test_layers_do_not_import_upwards(layer: str, forbidden: tuple[str, ...]) -> None:
    bad = [(name, imp) for name, (_, tree) in MODULES.items() if name.startswith(layer)
           for imp in imports(tree) if imp.startswith(forbidden)] if forbidden else []
    assert bad == []


def test_flows_and_tasks_never_build_settings() -> None:
    calls = []
    for name, (_, tree) in MODULES.items():
        if name.startswith(("revbench.flows", "revbench.tasks", "revbench.evaluation", "revbench.synth")):
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Settings":
                    calls.append((name, node.lineno))
    assert calls == []


def test_no_module_writes_the_environment_outside_the_entry_point() -> None:
    writes = []
    for name, (_, tree) in MODULES.items():
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                target = next((t for t in targets if isinstance(t, ast.Subscript) and "environ" in ast.unparse(t.value)), None)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("setdefault", "update", "pop", "__setitem__") and "environ" in ast.unparse(node.func.value):
                target = node
            if target is not None and name != "revbench.app.entry":
                writes.append((name, node.lineno))
    assert writes == []


def test_sql_lives_in_the_warehouse() -> None:
    bad = []
    for name, (path, tree) in MODULES.items():
        if name.startswith("revbench.warehouse"):
            continue
        if "duckdb" in imports(tree):
            bad.append((name, "imports duckdb"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("_frame", "_exec", "con"):
                bad.append((name, node.lineno))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.match(node.value):
                bad.append((name, node.lineno))
    assert bad == []


def test_functions_stay_readable() -> None:
    """No function over 120 lines (the world generator was 167 before it was split)."""
    long = [(name, node.name, node.end_lineno - node.lineno) for name, (_, tree) in MODULES.items()
            for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno > 120]
    assert long == []


def test_one_off_commands_import_nothing_heavy() -> None:
    """An in-process evaluation loads neither Prefect nor the ML stack nor great-expectations."""
    code = ("import sys; import revbench.app.cli, revbench.flows.evaluate, revbench.evaluation.scorers;"
            "heavy = ('prefect', 'sklearn', 'torch', 'sentence_transformers', 'great_expectations', 'ranx', 'openai');"
            "print(','.join(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""
