"""The import graph keeps its seams: settings enter at the top, SQL stays in the warehouse, no two
modules need each other, and the import names live under ``revbench``. The floors every package
and root module stands on, and the rule that nothing imports a higher floor, are in
``tests/test_structure_floors.py``."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"flows": "revbench.flows", "tasks": "revbench.tasks", "schemas": "revbench.schemas",
          "warehouse": "revbench.warehouse", "templates": "revbench.templates"}
CODE_DIRS = ["revbench", *MAPPED]
SQL = re.compile(r"^\s*(SELECT|INSERT INTO|UPDATE|DELETE FROM|CREATE TABLE|ALTER TABLE)\s")


def modules(root: Path = ROOT) -> dict[str, tuple[Path, ast.Module]]:
    """Every module of the package under ``root`` by import name, parsed."""
    out = {}
    for top in CODE_DIRS:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root / top).with_suffix("")
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


def our_imports(name: str, mods: dict[str, tuple[Path, ast.Module]] | None = None,
                inside_functions: bool = True, type_checking: bool = False) -> set[str]:
    """The modules of ours that ``name`` imports, resolved to the module they name (``from pkg
    import mod`` is ``pkg.mod`` when that is a module; relative imports from the module's own
    package; ``import a.b.name`` of a function is its module).

    Imports inside functions count by default: one runs later than a module-level import, but a
    circle closed by it is still two modules that need each other (four such circles hid from the
    load-time rule until the second locality pass). ``if TYPE_CHECKING:`` blocks count only when
    asked: they never run."""
    mods = MODULES if mods is None else mods
    path, tree = mods[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not inside_functions:
                continue
            if isinstance(node, ast.Import):
                named.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                named.extend(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.body if type_checking else [])
                visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    for child in getattr(node, field, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler | ast.match_case) else [child])

    visit(tree.body)
    found = set()
    for target in named:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if target and target != name and not target.startswith(name + "."):
            found.add(target)
    return found


def load_time_imports(name: str) -> set[str]:
    """What ``name`` imports while it loads: module level only, ``TYPE_CHECKING`` left out."""
    return our_imports(name, inside_functions=False)


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


TYPE_CHECKING_LOOPS: list[list[str]] = []
"""The one kind of circle that may be named here: closed only by ``if TYPE_CHECKING:`` imports,
which never run. None today: the replay server's route modules, which named the server's type in
annotations, name the ``ReplayContext`` Protocol of ``revbench.replay.context`` instead."""


def cycles_of(mods: dict[str, tuple[Path, ast.Module]], type_checking: bool = False) -> list[list[str]]:
    """The import circles among ``mods``, imports inside functions counted."""
    return import_cycles({name: our_imports(name, mods, type_checking=type_checking) for name in mods})


def test_no_import_cycles() -> None:
    """No two modules need each other, not even through an import inside a function: whichever
    loads first sees the other half-initialised, and a deferred import hides the circle from a
    reader as well as from this rule. A package's ``__init__`` importing its own modules is no
    circle; one of them importing names from the ``__init__`` back is."""
    assert cycles_of(MODULES) == []


def test_the_only_circles_through_type_checking_are_the_named_ones() -> None:
    """A named circle that no longer closes goes from the list, as a new one is named before it lands."""
    cycles = cycles_of(MODULES, type_checking=True)
    assert [c for c in cycles if c not in TYPE_CHECKING_LOOPS] == []
    assert [c for c in TYPE_CHECKING_LOOPS if c not in cycles] == []


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


def flow_modules(mods: dict[str, tuple[Path, ast.Module]]) -> dict[str, set[str]]:
    """Each module of ``revbench.flows`` that defines a flow, with the names another flow may
    import from it to run as a subflow: its flows, and its functions that run one of them
    (``evaluate_configured`` runs ``evaluate_flow.run`` with the configured scorers)."""
    out: dict[str, set[str]] = {}
    for name, (_, tree) in mods.items():
        if name.startswith("revbench.flows"):
            functions = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
            flows = {node.name for node in functions if _decorated_as_flow(node)}
            if flows:
                out[name] = flows | {node.name for node in functions if any(
                    isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "run"
                    and getattr(call.func.value, "id", None) in flows for call in ast.walk(node))}
    return out


def flow_to_flow_imports(mods: dict[str, tuple[Path, ast.Module]]) -> list[tuple[str, str, str]]:
    """Imports of one flow module by another that take anything but a flow to call as a subflow
    (module, imported module, name), imports inside functions included."""
    flows = flow_modules(mods)
    bad = []
    for name in flows:
        for node in ast.walk(mods[name][1]):
            if isinstance(node, ast.Import):
                bad += [(name, a.name, "*") for a in node.names if a.name in flows and a.name != name]
            elif isinstance(node, ast.ImportFrom) and node.module in flows and node.module != name:
                bad += [(name, node.module, a.name) for a in node.names if a.name not in flows[node.module]]
    return bad


def test_flow_modules_import_each_other_only_to_call_a_subflow() -> None:
    """A flow module is used as a flow, never as a library: what two flows share lives below them
    (``revbench.evaluation``, ``revbench.ml``, the plumbing modules of ``revbench.flows``), so a
    flow's module loads without the other flows' Prefect definitions and their stages."""
    assert flow_modules(MODULES)
    assert flow_to_flow_imports(MODULES) == []


MAX_MODULE_LINES = 500
LONG_MODULES = {
    # One declaration per warehouse table, read as one catalogue by the migrations, the docs
    # generator and the release's manifest; the warehouse's queries are split by stage instead.
    "schemas/tables.py",
    # One pydantic-settings tree: each section is a short class, and `.env.example`, the docs'
    # settings reference and the doctor's secret list are generated from it as a whole.
    "revbench/settings.py",
}
"""Modules allowed over :data:`MAX_MODULE_LINES`, each with why it is one piece."""


def oversized(mods: dict[str, tuple[Path, ast.Module]], root: Path = ROOT) -> dict[str, int]:
    """Modules over :data:`MAX_MODULE_LINES` lines that are not in :data:`LONG_MODULES`."""
    lines = {path.relative_to(root).as_posix(): len(path.read_text().splitlines()) for path, _ in mods.values()}
    return {rel: n for rel, n in lines.items() if n > MAX_MODULE_LINES and rel not in LONG_MODULES}


def test_no_module_is_longer_than_500_lines_unless_named() -> None:
    """A module over 500 lines holds more than one thing (the doctor held every service's probe
    in 1,070 lines before each probe moved beside its client)."""
    assert oversized(MODULES) == {}
    assert all((ROOT / rel).is_file() for rel in LONG_MODULES)


NEAR_CAP_LINES = MAX_MODULE_LINES - 30
NEAR_CAP = {
    "tasks/disambiguate.py": "the decision ladder's rules read as one: the LLM verification (its prompt and the "
                             "parsing of its answer) is the part that leaves first",
}
"""Modules within 30 lines of the cap, each with where it splits next (by meaning, not by size)."""


def near_cap(mods: dict[str, tuple[Path, ast.Module]], root: Path = ROOT) -> dict[str, int]:
    """Modules over :data:`NEAR_CAP_LINES` lines, outside :data:`LONG_MODULES`, without a note."""
    lines = {path.relative_to(root).as_posix(): len(path.read_text().splitlines()) for path, _ in mods.values()}
    return {rel: n for rel, n in lines.items()
            if NEAR_CAP_LINES < n and rel not in LONG_MODULES and rel not in NEAR_CAP}


def test_no_module_nears_the_cap_without_a_note_on_where_it_splits() -> None:
    """One edit from the cap a module gets split wherever the lines run out; a note says now
    where its seam is. A note outlives its need only while the module stays near the cap."""
    assert near_cap(MODULES) == {}
    lines = {rel: len((ROOT / rel).read_text().splitlines()) for rel in NEAR_CAP}
    assert {rel: n for rel, n in lines.items() if n <= NEAR_CAP_LINES} == {}, "a note left on a module no longer near the cap"


def test_the_rules_fail_on_planted_faults(tmp_path: Path) -> None:
    """On a copy of the source with a circle through a function-level import, a flow module
    importing another's helper, a 600-line and a 480-line module planted, each rule names what was planted."""
    for top in CODE_DIRS:
        for path in (ROOT / top).rglob("*.py"):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    copied = modules(tmp_path)
    before = (cycles_of(copied), flow_to_flow_imports(copied), oversized(copied, tmp_path), near_cap(copied, tmp_path))
    (tmp_path / "revbench/planted_a.py").write_text("def f():\n    from revbench.planted_b import g\n    return g\n")
    (tmp_path / "revbench/planted_b.py").write_text("from revbench.planted_a import f\n\ndef g():\n    return f\n")
    flows = flow_modules(MODULES)
    importer, imported = sorted(flows)[:2]
    helper = next(node.name for node in MODULES[imported][1].body if isinstance(node, ast.FunctionDef | ast.ClassDef)
                  and node.name not in flows[imported])
    path = tmp_path / MODULES[importer][0].relative_to(ROOT)
    path.write_text(path.read_text() + f"\n\ndef planted():\n    from {imported} import {helper}\n    return {helper}\n")
    (tmp_path / "flows/planted_long.py").write_text("x = 1\n" * 600)
    (tmp_path / "tasks/planted_near.py").write_text("x = 1\n" * 480)
    planted = modules(tmp_path)
    assert [c for c in cycles_of(planted) if c not in before[0]] == [["revbench.planted_a", "revbench.planted_b"]]
    assert [f for f in flow_to_flow_imports(planted) if f not in before[1]] == [(importer, imported, helper)]
    assert oversized(planted, tmp_path) == {**before[2], "flows/planted_long.py": 600}
    assert near_cap(planted, tmp_path) == {**before[3], "flows/planted_long.py": 600, "tasks/planted_near.py": 480}


NOT_SERVICES = {
    "revbench.clients.bounded": "reads any client's answer up to its cap",
    "revbench.clients.optional": "reads JSON answers whose every key is optional",
    "revbench.clients.openalex_graph": "parses OpenAlex's works and authors; OpenAlex's client owns the service",
    "revbench.clients.probe": "the stages' reachability check, which uses the clients",
    "revbench.clients.s2_graph": "parses S2's references and fields of study; Semantic Scholar's client owns the service",
    "revbench.clients.tei": "parses GROBID's TEI; GROBID's client owns the service",
}
"""Modules of ``revbench.clients`` that talk to no service of their own."""


def test_every_service_is_registered_with_its_probe() -> None:
    """Each client module is a service in ``revbench.services`` (or is named above as a helper),
    and each entry's probe resolves to a function of one ``ctx`` argument: the doctor's table is
    the registry, so a service added without a probe fails here, not in production."""
    import inspect

    from revbench.services import SERVICES

    homes = {s.probe.partition(":")[0] for s in SERVICES}
    clients = {name for name in MODULES if name.startswith("revbench.clients.")}
    assert sorted(c for c in clients if c not in homes and f"{c}_probe" not in homes) == sorted(NOT_SERVICES)
    assert len({s.name for s in SERVICES}) == len(SERVICES)
    for service in SERVICES:
        module = service.probe.partition(":")[0]
        assert module in MODULES, service
        probe = service.load()
        assert callable(probe) and list(inspect.signature(probe).parameters) == ["ctx"], service.name


FANS_OUT = {"map_pieces", "pieces_started", "encode_texts"}
"""Calls that submit pieces as Prefect tasks on the run's task runner."""


def _decorated_stage_tasks_that_fan_out(mods: dict[str, tuple[Path, ast.Module]]) -> list[tuple[str, str]]:
    out = []
    for name, (_, tree) in mods.items():
        if not name.startswith("revbench.flows"):
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            decorated = any(isinstance(d, ast.Call) and getattr(d.func, "id", None) == "stage_task" for d in fn.decorator_list)
            calls = {getattr(c.func, "id", None) or getattr(c.func, "attr", None) for c in ast.walk(fn) if isinstance(c, ast.Call)}
            if decorated and calls & FANS_OUT:
                out.append((name, fn.name))
    return out


def test_a_stage_that_fans_out_pieces_is_not_a_prefect_task() -> None:
    """Pieces submitted from inside a Prefect task carry that task's parameters (the run and its
    warehouse connection) to a Dask worker, which cannot unpickle a DuckDB connection: the graph
    stage failed so on Dask at 160k. A stage that fans out is a plain step of its flow."""
    assert _decorated_stage_tasks_that_fan_out(MODULES) == []
    planted = ast.parse("@stage_task('x')\ndef s(run):\n    return list(map_pieces(f, [], 'x'))\n")
    assert _decorated_stage_tasks_that_fan_out({"revbench.flows.planted": (Path("p.py"), planted)}) == [("revbench.flows.planted", "s")]
