"""Identity keys are minted in one low module, the clients never import upwards, and the service
table is the one place a service's reachability URL lives.

- The key functions (block keys, affiliation and institution keys, person links, ...) are defined
  in ``revbench/keys.py`` alone: warehouses store their values, and two copies of a rule drift.
- ``revbench.clients`` imports nothing of the tasks, flows, application or warehouse, not even
  inside a function: the clients sit below all of them (``openalex_graph`` once reached up into
  ``tasks.normalize`` for the name fallback of an institution key).
- Every entry of ``revbench.services.SERVICES`` states its ``reach`` (the URL a stage's
  reachability check asks), and ``revbench/clients/probe.py`` reads it there: no chain over service
  names of its own.

Each rule is a function over a source tree, run on this one and on a planted fault.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from revbench.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("revbench", "tasks", "flows", "warehouse", "schemas")
MAPPED = {"tasks": "revbench.tasks", "flows": "revbench.flows", "warehouse": "revbench.warehouse",
          "schemas": "revbench.schemas", "templates": "revbench.templates"}

KEYS_MODULE = "revbench/keys.py"
KEY_FUNCTIONS = frozenset({"fold", "name_tokens", "block_key", "given_name", "normalize_email", "institution_part",
                           "normalize_affiliation", "institution_key", "openalex_person_key", "person_links"})
"""What mints an identity key (or the text a key is made of), defined in :data:`KEYS_MODULE` only."""
SAME_NAME_OTHER_RULE = {
    ("tasks/privacy_fold.py", "fold"): "the privacy audit's look-alike folding: keeps case, maps confusables; no key",
    ("revbench/evaluation/scorers/tpms.py", "fold"): "the TPMS analyser's accent folding, with the gold standard's quirks",
}
"""Functions that share a key function's name but are another rule, each with what it is."""

CLIENTS = "revbench/clients"
ABOVE_CLIENTS = ("revbench.tasks", "revbench.flows", "revbench.app", "revbench.warehouse")
PROBE_MODULE = "revbench/clients/probe.py"
SERVICES_MODULE = "revbench/services.py"


def _sources(root: Path, tops: tuple[str, ...] = SCANNED) -> list[tuple[str, ast.Module]]:
    out = []
    for top in tops:
        for path in sorted((root / top).rglob("*.py")) if (root / top).is_dir() else []:
            out.append((path.relative_to(root).as_posix(), ast.parse(path.read_text(), str(path))))
    return out


def key_definitions_elsewhere(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """``(file, line, name)`` of each definition of a key function outside :data:`KEYS_MODULE`: a
    ``def`` at any depth (methods and nested functions too), or a module-level assignment of the
    name (``block_key = lambda ...``), unless it is named in :data:`SAME_NAME_OTHER_RULE`."""
    found = []
    for rel, tree in _sources(root):
        if rel == KEYS_MODULE:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in KEY_FUNCTIONS:
                found.append((rel, node.lineno, node.name))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            found += [(rel, node.lineno, t.id) for t in targets if isinstance(t, ast.Name) and t.id in KEY_FUNCTIONS]
    return [f for f in found if (f[0], f[2]) not in SAME_NAME_OTHER_RULE]


def _module_name(rel: str) -> str:
    parts = list(Path(rel).with_suffix("").parts)
    parts[0] = MAPPED.get(parts[0], parts[0])
    return ".".join(p for p in parts if p != "__init__")


def _imported(rel: str, tree: ast.Module) -> list[tuple[int, str]]:
    """Every module ``tree`` names in an import, at any depth (functions, ``TYPE_CHECKING``
    blocks, ``try``), relative ones resolved, and every constant passed to ``import_module`` or
    ``__import__``; top-level names of the mapped folders read as their ``revbench.`` names."""
    package = _module_name(rel) if rel.endswith("__init__.py") else _module_name(rel).rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in \
                ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            out.append((node.lineno, node.args[0].value))
    mapped = []
    for line, name in out:
        head, _, rest = name.partition(".")
        mapped.append((line, f"{MAPPED[head]}.{rest}".rstrip(".") if head in MAPPED else name))
    return mapped


def clients_importing_upwards(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """``(file, line, module)`` of each import by a module of ``revbench.clients`` of anything in
    :data:`ABOVE_CLIENTS`."""
    return [(rel, line, name) for rel, tree in _sources(root, (CLIENTS,)) for line, name in _imported(rel, tree)
            if any(name == above or name.startswith(above + ".") for above in ABOVE_CLIENTS)]


def _service_calls(tree: ast.Module) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Service"]


def services_without_reach(root: Path = ROOT) -> list[str]:
    """The entries of the service table that do not state ``reach=`` (by their name, or line)."""
    tree = ast.parse((root / SERVICES_MODULE).read_text())
    out = []
    for call in _service_calls(tree):
        if not any(k.arg == "reach" for k in call.keywords):
            first = call.args[0] if call.args else None
            out.append(str(first.value) if isinstance(first, ast.Constant) else f"line {call.lineno}")
    return out


def service_names(root: Path = ROOT) -> set[str]:
    """The names of the service table's entries, as its source writes them."""
    tree = ast.parse((root / SERVICES_MODULE).read_text())
    return {c.args[0].value for c in _service_calls(tree)
            if c.args and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)}


def probe_service_literals(root: Path = ROOT, names: set[str] | None = None) -> list[tuple[int, str]]:
    """``(line, name)`` of each service name the probe module writes as a literal: an if-chain
    (``service == "arxiv"``), a ``match``, a tuple of names or a dict keyed by them all need one,
    and the table is where each service's URL lives."""
    names = service_names(root) if names is None else names
    tree = ast.parse((root / PROBE_MODULE).read_text())
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names]


def required_without_reach(root: Path = ROOT) -> list[tuple[str, str]]:
    """``(flow module, service)`` of each ``run.require("<service>")`` in the flows whose service
    has no ``reach=`` in the table (the probe could not ask it)."""
    tree = ast.parse((root / SERVICES_MODULE).read_text())
    reachable = {c.args[0].value for c in _service_calls(tree) if c.args and isinstance(c.args[0], ast.Constant)
                 and any(k.arg == "reach" and not (isinstance(k.value, ast.Constant) and k.value.value is None)
                         for k in c.keywords)}
    out = []
    for rel, flow in _sources(root, ("flows",)):
        for node in ast.walk(flow):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "require":
                out += [(rel, a.value) for a in node.args
                        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value not in reachable]
    return out


# -- the rules on this tree ------------------------------------------------------------------------


def test_key_functions_are_defined_in_the_keys_module_only() -> None:
    assert key_definitions_elsewhere() == []
    keys = {n.name for n in ast.parse((ROOT / KEYS_MODULE).read_text()).body if isinstance(n, ast.FunctionDef)}
    assert KEY_FUNCTIONS <= keys, KEY_FUNCTIONS - keys
    assert all((ROOT / rel).is_file() for rel, _ in SAME_NAME_OTHER_RULE)


def test_the_keys_module_imports_nothing_of_revbench() -> None:
    """The bottom of the import graph: the standard library and third-party packages only."""
    tree = ast.parse((ROOT / KEYS_MODULE).read_text())
    ours = [name for _, name in _imported(KEYS_MODULE, tree) if name.split(".")[0] in ("revbench", *MAPPED)]
    assert ours == []


def test_clients_import_nothing_above_them() -> None:
    assert clients_importing_upwards() == []


def test_every_service_states_its_reachability_url(settings: Settings) -> None:
    from revbench.clients.probe import probe_target
    from revbench.services import REACHABLE, SERVICES, Service

    reach = next(f for f in dataclasses.fields(Service) if f.name == "reach")
    assert reach.default is dataclasses.MISSING and reach.default_factory is dataclasses.MISSING
    assert services_without_reach() == []
    assert service_names() == {s.name for s in SERVICES}
    assert all(s.reach is None or callable(s.reach) for s in SERVICES)
    assert REACHABLE == tuple(s.name for s in SERVICES if s.reach is not None)
    settings = settings.with_overrides(llm={"base_url": "http://127.0.0.1:9/v1"})
    for s in SERVICES:
        if s.reach is not None:
            assert probe_target(settings, s.name) == (s.label, s.reach(settings))
    assert required_without_reach() == []


def test_the_probe_has_no_chain_over_service_names() -> None:
    assert probe_service_literals() == []


# -- each rule fails on a planted fault ------------------------------------------------------------


def _plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_key_function_defined_elsewhere_is_found(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        KEYS_MODULE: "def block_key(name):\n    return name\n",
        "tasks/privacy_fold.py": "def fold(text):\n    return text\n",  # named: another rule
        "tasks/planted.py": "def block_key(name):\n    return name.lower()\n\n\ndef fold(text):\n    return text\n",
        "revbench/clients/planted.py": "class C:\n    def institution_key(self, ror, name):\n        return ror\n",
        "warehouse/planted.py": "person_links = lambda m, a: m\n",
        "flows/planted.py": "def run():\n    def given_name(n):\n        return n\n    return given_name\n",
    })
    assert sorted(key_definitions_elsewhere(root)) == [
        ("flows/planted.py", 2, "given_name"), ("revbench/clients/planted.py", 2, "institution_key"),
        ("tasks/planted.py", 1, "block_key"), ("tasks/planted.py", 5, "fold"), ("warehouse/planted.py", 1, "person_links")]


def test_a_client_importing_upwards_is_found(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "revbench/clients/fine.py": "from revbench.keys import institution_key\nfrom revbench.clients.optional import as_text\n",
        "revbench/clients/planted.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from revbench.warehouse import Warehouse\n"
            "def f():\n    from revbench.tasks.normalize import canonical_institution\n    return canonical_institution\n"
            "def g():\n    from ..flows import common\n    import importlib\n"
            "    return importlib.import_module('revbench.app.doctor'), common\n"
            "import tasks.text\n"),
    })
    assert sorted(clients_importing_upwards(root)) == [
        ("revbench/clients/planted.py", 3, "revbench.warehouse.Warehouse"),
        ("revbench/clients/planted.py", 5, "revbench.tasks.normalize.canonical_institution"),
        ("revbench/clients/planted.py", 8, "revbench.flows.common"),
        ("revbench/clients/planted.py", 10, "revbench.app.doctor"),
        ("revbench/clients/planted.py", 11, "revbench.tasks.text")]


def test_a_service_without_reach_and_a_probe_with_its_own_chain_are_found(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        SERVICES_MODULE: (
            "SERVICES = (\n"
            "    Service('grobid', 'GROBID', 'm:f', lambda s, p: '', reach=lambda s: s.grobid.base_url),\n"
            "    Service('arxiv', 'arXiv API', 'm:f', lambda s, p: ''),\n"
            "    Service('smtp', 'SMTP', 'm:f', lambda s, p: '', reach=None),\n"
            ")\n"),
        PROBE_MODULE: (
            "def probe_target(settings, service):\n"
            "    if service == 'arxiv':\n        return 'arXiv API', settings.arxiv.base_url\n"
            "    match service:\n        case 'grobid':\n            return 'GROBID', ''\n"
            "    return {'smtp': 'x'}[service]\n"),
        "flows/planted.py": "def flow(run):\n    run.require('grobid')\n    run.require('smtp', 'arxiv')\n",
    })
    assert services_without_reach(root) == ["arxiv"]
    assert sorted(probe_service_literals(root)) == [(2, "arxiv"), (5, "grobid"), (7, "smtp")]
    assert sorted(required_without_reach(root)) == [("flows/planted.py", "arxiv"), ("flows/planted.py", "smtp")]
