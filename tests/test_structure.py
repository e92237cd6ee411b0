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


def test_warehouse_modules_stay_small() -> None:
    """No warehouse module over 250 lines: each stage's queries live in their own module (db.py
    held all of them in 885 lines before it was split)."""
    lines = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
             for path in sorted((ROOT / "warehouse").rglob("*.py"))}
    assert {name: n for name, n in lines.items() if n > 250} == {}


def load_time_imports(name: str) -> set[str]:
    """The modules of ours that ``name`` imports while it loads: statements at module level,
    including those inside ``if``/``try``/``with`` blocks and class bodies, resolved to the
    module they name (``from pkg import mod`` is ``pkg.mod`` when that is a module, relative
    imports from the module's own package). Imports inside functions are left out: a
    function-level import runs only when the function is called, after every module has loaded,
    and is the standard way to defer a heavy or upward dependency. ``if TYPE_CHECKING:`` blocks
    are left out too: they never run."""
    path, tree = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if isinstance(node, ast.Import):
                named.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                named.extend(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child])

    visit(tree.body)
    found = set()
    for target in named:
        while target and target not in MODULES:  # ``import a.b.name`` of a function: its module
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_import_cycle_finder_sees_a_cycle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    """No two modules need each other to load (see :func:`load_time_imports` for what counts):
    in a cycle, whichever loads first sees the other half-initialised. A package's
    ``__init__`` importing its own modules is no cycle; one of them importing names from the
    ``__init__`` back is."""
    graph = {name: load_time_imports(name) for name in MODULES}
    assert import_cycles(graph) == []


def test_the_ml_package_imports_nothing_above_it() -> None:
    """Models, embeddings, keywords and training serve the flows, tasks and scorers: they import
    none of them, nor the application, not even inside a function."""
    above = ("revbench.flows", "revbench.tasks", "revbench.app", "revbench.evaluation", "revbench.warehouse")
    bad = [(name, imp) for name, (_, tree) in MODULES.items() if name.startswith("revbench.ml")
           for imp in imports(tree) if imp.startswith(above)]
    assert bad == []


def _flow_functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    return [(name, node) for name, (_, tree) in MODULES.items() if name.startswith("revbench.flows")
            for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_flow_functions_stay_short() -> None:
    """No function of a flow module over 50 lines: a flow reads as its stages, and the data work
    lives in ``revbench.tasks`` as pure functions over frames, each tested on its own."""
    long = [(name, node.name, node.end_lineno - node.lineno) for name, node in _flow_functions()
            if node.end_lineno - node.lineno > 50]
    assert long == []


def _decorated_as_flow(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", None)) == "revbench_flow"
               for d in node.decorator_list)


def _returned_types(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The members of a function's return annotation (``A | B`` gives both), as source text."""
    members: list[ast.expr] = [node.returns] if node.returns else []
    while any(isinstance(m, ast.BinOp) for m in members):
        members = [x for m in members for x in ((m.left, m.right) if isinstance(m, ast.BinOp) else (m,))]
    return [ast.unparse(m) for m in members]


def test_no_flow_returns_a_dict() -> None:
    """Flows return typed results (``revbench.flows.results.FlowResult``), read by attribute: a flow
    is never annotated to return a dict (or ``Any``), and no function of a flow module returns an
    untyped ``dict[str, Any]`` (rows inside a list, as artifacts take them, are rows, not results)."""
    bad = []
    for name, node in _flow_functions():
        returned = _returned_types(node)
        untyped = [t for t in returned if re.fullmatch(r"(dict|Dict)\[str, *Any\]", t)]
        loose = _decorated_as_flow(node) and (not returned or any(re.match(r"(dict|Dict|Mapping|Any)\b", t) for t in returned))
        if untyped or loose:
            bad.append((name, node.name, " | ".join(returned)))
    assert bad == []
