"""The survey and replay servers' routes are module-level: no handler is a closure over the
function that builds the app (``@app.get`` inside ``create_app``, ``Route(path, handler)`` of a
nested ``handler``, a lambda, or a factory's product). A handler reads what it shares from
``request.app.state`` (through a FastAPI dependency in the survey server), so each route can be
read, imported and tested on its own. The rule reads the source (``ast``); a second check builds
both apps and looks at every route's endpoint."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVER_PACKAGES = ("revbench/survey", "revbench/replay")
ROUTE_METHODS = {"get", "post", "put", "patch", "delete", "head", "options", "trace", "route", "api_route",
                 "websocket", "websocket_route"}
"""Methods of a FastAPI/Starlette app or router that register a route: ``@x.get("/path")`` or
``x.get("/path")(handler)``."""
ROUTE_CLASSES = {"Route", "APIRoute", "WebSocketRoute", "APIWebSocketRoute"}
"""Classes whose second argument (or ``endpoint=``) is a route's handler."""
ADD_ROUTE = {"add_route", "add_api_route", "add_websocket_route", "add_api_websocket_route"}
"""Methods that register a handler given as their second argument (or ``endpoint=``)."""


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_path(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("/")


def _route_decorator(node: ast.expr) -> bool:
    """``@x.get("/path")``, ``@x.route("/path", ...)`` and the like."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ROUTE_METHODS
            and bool(node.args) and _is_path(node.args[0]))


def _endpoint(call: ast.Call) -> ast.expr | None:
    """The handler a call registers as a route, or None when the call registers none."""
    func = call.func
    if isinstance(func, ast.Call) and _route_decorator(func):  # x.get("/path")(handler)
        return call.args[0] if call.args else None
    if _name(func) in ROUTE_CLASSES or (isinstance(func, ast.Attribute) and func.attr in ADD_ROUTE):
        given = [kw.value for kw in call.keywords if kw.arg == "endpoint"]
        return given[0] if given else call.args[1] if len(call.args) > 1 else None
    return None


def _bound_in(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Every name ``func`` binds: its parameters, what it assigns and what it defines."""
    a = func.args
    names = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    names |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node is not func:
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _closure(endpoint: ast.expr, local: set[str]) -> str | None:
    """Why ``endpoint`` is not a module-level handler, given the names the enclosing functions
    bind; None when it is one."""
    if isinstance(endpoint, ast.Lambda):
        return "a lambda"
    if isinstance(endpoint, ast.Call):
        return f"what {ast.unparse(endpoint.func)}() makes (a closure)"
    if isinstance(endpoint, ast.Name) and endpoint.id in local:
        return f"{endpoint.id}, defined inside a function"
    if isinstance(endpoint, ast.Attribute):
        base: ast.expr = endpoint
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name) and base.id in local:
            return f"{ast.unparse(endpoint)}, bound to a local of the function"
    return None


def closure_routes(source: str, filename: str = "<module>") -> list[tuple[int, str]]:
    """The routes of a module whose handler is a closure: (line, what is wrong)."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, local: set[str], nested: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if nested and any(_route_decorator(d) for d in node.decorator_list):
                found.append((node.lineno, f"{node.name} is registered as a route inside a function"))
            for d in node.decorator_list:
                visit(d, local, nested)
            inner = local | _bound_in(node)
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    visit(default, local, nested)
            for statement in node.body:
                visit(statement, inner, True)
            return
        if isinstance(node, ast.Lambda):
            inner = local | _bound_in(node)
            visit(node.body, inner, True)
            return
        if isinstance(node, ast.Call):
            endpoint = _endpoint(node)
            why = _closure(endpoint, local) if endpoint is not None else None
            if why:
                found.append((node.lineno, f"a route's handler is {why}"))
        for child in ast.iter_child_nodes(node):
            visit(child, local, nested)

    visit(ast.parse(source, filename), set(), False)
    return sorted(found)


def scan(root: Path = ROOT, packages: tuple[str, ...] = SERVER_PACKAGES) -> dict[str, list[tuple[int, str]]]:
    """Each module of ``packages`` under ``root`` that has a closure route, with what it has."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            bad = closure_routes(path.read_text(), str(path))
            if bad:
                out[path.relative_to(root).as_posix()] = bad
    return out


def test_no_server_route_is_a_closure() -> None:
    assert scan() == {}


def test_the_rule_reads_some_routes() -> None:
    """The rule sees the servers' route registrations (else it would pass on nothing)."""
    calls = decorated = 0
    for package in SERVER_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                calls += isinstance(node, ast.Call) and _endpoint(node) is not None
                decorated += isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                    _route_decorator(d) for d in node.decorator_list)
    assert calls >= 15 and decorated >= 10


PLANTED = '''
from fastapi import FastAPI
from starlette.routing import Route, Router


def create_app(settings):
    app = FastAPI()

    @app.get("/healthz")
    async def healthz():
        return {"ok": True}

    app.get("/probe/{token}")(probe_link(settings))
    return app


def probe_link(signer):
    async def check(token: str):
        return signer
    return check


def routes(replay):
    async def query(request):
        return replay

    return [Route("/arxiv/api/query", query, methods=["GET"]),
            Route("/arxiv/pdf/{name}", endpoint=lambda request: replay)]


class Replay:
    def __init__(self):
        self.router = Router([Route("/_replay/stats", self.stats)])
        self.router.add_route("/other", make_handler(self))

    async def stats(self, request):
        return self


async def fine(request):
    return request


router = Router([Route("/fine", fine, methods=["GET"])])
'''


def test_the_rule_fails_on_planted_closure_routes(tmp_path: Path) -> None:
    """A temp server package with every kind of closure route is named line by line; its one
    module-level route is not; and a real service module with a closure route planted in it
    fails the scan that the untouched copy passes."""
    assert [line for line, _why in closure_routes(PLANTED)] == [10, 13, 27, 28, 33, 34]
    assert "healthz is registered as a route inside a function" in dict(closure_routes(PLANTED)).values()

    for package in SERVER_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    assert scan(tmp_path) == {}
    arxiv = tmp_path / "revbench/replay/arxiv.py"
    lines = len(arxiv.read_text().splitlines())
    arxiv.write_text(arxiv.read_text() + "\n\ndef routes(replay):\n    async def q(request):\n        return replay\n\n"
                                         "    return [Route('/arxiv/again', q)]\n")
    (tmp_path / "revbench/survey/planted.py").write_text(PLANTED)
    found = scan(tmp_path)
    assert found["revbench/replay/arxiv.py"] == [(lines + 7, "a route's handler is q, defined inside a function")]
    assert found["revbench/survey/planted.py"] == closure_routes(PLANTED)
    assert set(found) == {"revbench/replay/arxiv.py", "revbench/survey/planted.py"}


def _module_level(endpoint: object) -> bool:
    """Whether ``endpoint`` is a function defined at the top of its module (no closure)."""
    module = inspect.getmodule(endpoint)
    name = getattr(endpoint, "__name__", "")
    return (inspect.isfunction(endpoint) and endpoint.__closure__ is None and "<locals>" not in endpoint.__qualname__
            and module is not None and getattr(module, name, None) is endpoint)


def _all_routes(routes: list[Any]) -> Iterator[Any]:
    """Every route under ``routes``, through included routers (FastAPI keeps an included
    router as one entry holding the router) and mounts."""
    for route in routes:
        inner = getattr(getattr(route, "original_router", None), "routes", None) or getattr(route, "routes", None)
        if inner:
            yield from _all_routes(inner)
        else:
            yield route


def test_both_apps_route_to_module_level_handlers(tmp_path: Path) -> None:
    from revbench.replay.context import ReplayContext
    from revbench.replay.server import ReplayApp
    from revbench.settings import ReplaySettings, Settings
    from revbench.survey.server import create_app

    survey = create_app(Settings(data_dir=tmp_path / "data").with_overrides(survey={"signing_key": "k" * 40}))
    server = ReplayApp(ReplaySettings())
    # The route modules read the server as a ReplayContext (never importing it): it is one, on its app's state.
    assert isinstance(server.app.state.replay, ReplayContext) and server.app.state.replay is server
    replay = server.app
    for app, least in ((survey, 10), (replay, 17)):
        endpoints = [getattr(route, "endpoint", None) for route in _all_routes(app.routes)]
        handlers = [e for e in endpoints if e is not None and e.__module__.startswith("revbench.")]
        assert len(handlers) >= least
        assert [e.__qualname__ for e in handlers if not _module_level(e)] == []


@pytest.mark.parametrize("source", [
    "from starlette.routing import Route\n\nasync def h(request):\n    return 1\n\nR = [Route('/h', h)]\n",
    "def f(app):\n    app.add_middleware(object)\n    x = {}.get('k')\n    return x\n",
    "from fastapi import APIRouter\n\nr = APIRouter()\n\n@r.get('/x')\nasync def x():\n    return 1\n",
])
def test_the_rule_passes_module_level_routes(source: str) -> None:
    assert closure_routes(source) == []
