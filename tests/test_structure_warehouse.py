"""A stage owns its tables, and that is enforced, not said: the warehouse is one session with one
slice per stage (``wh.pools``, ``wh.survey``, ...), no slice inherits another stage's, a slice's
writes refuse a table its stage does not own (:mod:`revbench.warehouse.owners`), a slice's own SQL
writes only its tables, and a flow writes only through the slice of its own stage, except where
named below with the reason. Each rule is also shown failing on a planted fault."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import polars as pl
import pytest

from revbench.schemas.tables import RELEASES, SURVEY_MESSAGES, SURVEY_OPT_OUTS, TABLES
from revbench.warehouse.db import SLICES, Warehouse
from revbench.warehouse.owners import OWNER, ForeignTableWrite
from revbench.warehouse.pools import PoolsSlice
from revbench.warehouse.slice import Slice

ROOT = Path(__file__).resolve().parents[1]

GENERIC_WRITES = frozenset({"upsert", "insert", "delete_where_in", "replace_all"})
_WRITE_SQL = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\"?(\w+)\"?", re.IGNORECASE)

MODULE_STAGE: dict[str, str] = {
    # A flow module named after a slice is that stage's; these are named here.
    "flows/common.py": "runs",        # the run's own record: start, finish, each stage's row
    "flows/curator.py": "runs",       # a run waiting on a curator, and resumed
    "flows/refresh.py": "runs",       # the refresh's record and fingerprints (refresh_stages)
    "flows/opt_outs.py": "survey",    # who asked not to be written to again
    "flows/graph_bulk.py": "graph",   # the graph stage's bulk path
    "flows/train.py": "training",
    "flows/train_attention.py": "training",
    "flows/train_contrastive.py": "training",
}
"""The stage of a flow or app module not named after a slice. A module with no stage (the app's
commands, backup and restore) writes through no slice."""

EXCEPTIONS: dict[tuple[str, str, str], str] = {
    ("flows/disambiguate.py", "runs", "add_run_parameters"):
        "the disambiguation run adds what it decided (its blocks, the full rebuild) to its own run record",
    ("flows/graph_bulk.py", "runs", "add_run_parameters"):
        "the graph run adds the newest snapshot partition it read to its own run record, for the next run to start after",
}
"""A cross-stage write from a flow, by (module, slice, method), with why it is allowed."""


def foreign_bases(classes: list[type[Slice]]) -> list[str]:
    """Each slice class that inherits a slice of another stage."""
    return [f"{cls.__name__}({base.__name__}: {base.stage})" for cls in classes for base in cls.__mro__[1:]
            if issubclass(base, Slice) and base is not Slice and base.stage != cls.stage]


def writers(cls: type[Slice]) -> set[str]:
    """The methods of a slice that write: the generic writes, and each method whose body calls one
    or carries an INSERT, UPDATE or DELETE (its own, or another module-level statement it names)."""
    found = set(GENERIC_WRITES)
    for klass in cls.__mro__:
        if not issubclass(klass, Slice) or klass is Slice:
            continue
        module = ast.parse(inspect.getsource(inspect.getmodule(klass)))
        statements = {t.id for n in module.body if isinstance(n, ast.Assign) for t in n.targets
                      if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                      and _WRITE_SQL.search(n.value.value)}
        for node in ast.walk(ast.parse(inspect.getsource(klass))):
            if not isinstance(node, ast.FunctionDef):
                continue
            body = list(ast.walk(node))
            if (any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in GENERIC_WRITES
                    for n in body)
                    or any(isinstance(n, ast.Constant) and isinstance(n.value, str) and _WRITE_SQL.search(n.value)
                           for n in body)
                    or any(isinstance(n, ast.Name) and n.id in statements for n in body)):
                found.add(node.name)
    return found


WRITERS: dict[str, set[str]] = {stage: writers(cls) for stage, cls in SLICES.items()}


def _is_wh(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "wh") or (isinstance(node, ast.Attribute) and node.attr == "wh")


def foreign_writes(rel: str, source: str) -> list[str]:
    """The writes in module ``rel`` (a path from the root) that are not its stage's: a slice's
    writing method called through a warehouse (``st.wh.pools.save_round(...)``) of another stage
    than the module's, or a generic write past every slice (``wh.upsert(...)``)."""
    stage = MODULE_STAGE.get(rel, Path(rel).stem if Path(rel).stem in SLICES and rel.startswith("flows/") else None)
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, owner = node.func.attr, node.func.value
        if method in GENERIC_WRITES and _is_wh(owner):
            bad.append(f"{rel}:{node.lineno}: wh.{method} past the slices")
        elif (isinstance(owner, ast.Attribute) and owner.attr in SLICES and _is_wh(owner.value)
              and method in WRITERS[owner.attr] and owner.attr != stage
              and (rel, owner.attr, method) not in EXCEPTIONS):
            bad.append(f"{rel}:{node.lineno}: wh.{owner.attr}.{method} from a module of stage {stage}")
    return bad


def _modules() -> list[Path]:
    return sorted([*(ROOT / "flows").rglob("*.py"), *(ROOT / "revbench" / "app").rglob("*.py")])


def foreign_sql(stage: str, source: str) -> list[str]:
    """The tables the SQL in ``source`` writes that ``stage`` does not own."""
    return [f"{name} ({OWNER[name]}'s)" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            for name in _WRITE_SQL.findall(node.value) if name in OWNER and OWNER[name] != stage]


def own_sql(cls: type[Slice]) -> list[str]:
    """The tables the SQL of a slice class's modules writes that its stage does not own."""
    return [f"{klass.__name__}: {bad}" for klass in cls.__mro__ if issubclass(klass, Slice) and klass is not Slice
            for bad in foreign_sql(cls.stage, inspect.getsource(inspect.getmodule(klass)))]


def test_every_table_has_one_owner_and_every_owner_but_the_lifecycle_a_slice() -> None:
    assert set(OWNER) == set(TABLES)
    assert set(OWNER.values()) - {"lifecycle"} <= set(SLICES)
    assert all(cls.stage == stage for stage, cls in SLICES.items())


def test_no_slice_inherits_another_stages_slice() -> None:
    assert foreign_bases(list(SLICES.values())) == []


def test_a_slice_inheriting_another_stages_slice_is_found() -> None:
    class Planted(PoolsSlice):
        stage = "survey"
    assert foreign_bases([Planted]) == ["Planted(PoolsSlice: pools)"]


def test_the_writing_methods_are_found() -> None:
    assert {"save_round"} <= WRITERS["pools"] and {"set_message_state", "mark_unconfirmed"} <= WRITERS["survey"]
    assert {"rebuild_authors", "save_blocks"} <= WRITERS["disambiguate"] and "pool_inputs" not in WRITERS["pools"]


def test_a_slices_own_sql_writes_only_its_stages_tables() -> None:
    assert [bad for cls in SLICES.values() for bad in own_sql(cls)] == []


def test_a_slices_sql_writing_a_foreign_table_is_found() -> None:
    source = 'Q = """UPDATE survey_messages SET state = ?"""\nR = "DELETE FROM pool_rounds WHERE round = ?"\n'
    assert foreign_sql("pools", source) == ["survey_messages (survey's)"]
    assert foreign_sql("survey", source) == ["pool_rounds (pools's)"]


def test_flows_and_the_app_write_only_through_their_own_stages_slice() -> None:
    bad = [b for path in _modules() for b in foreign_writes(path.relative_to(ROOT).as_posix(), path.read_text())]
    assert bad == []


def test_the_named_exceptions_are_still_needed() -> None:
    """An exception whose call is gone goes too."""
    for (rel, stage, method) in EXCEPTIONS:
        assert f".{stage}.{method}(" in (ROOT / rel).read_text(), (rel, stage, method)


@pytest.mark.parametrize(("rel", "source", "found"), [
    ("flows/survey.py", "def f(st):\n    st.wh.pools.save_round(1, {}, 'h', {}, 'r')\n",
     "flows/survey.py:2: wh.pools.save_round from a module of stage survey"),
    ("flows/survey.py", "def f(run, df):\n    run.wh.ratings.upsert(T, df)\n",
     "flows/survey.py:2: wh.ratings.upsert from a module of stage survey"),
    ("flows/pools.py", "def f(wh, df):\n    wh.upsert(T, df)\n", "flows/pools.py:2: wh.upsert past the slices"),
    ("revbench/app/cli.py", "def f(wh):\n    wh.release.set_release_status('v', 's', 'me', 'r', 'x')\n",
     "revbench/app/cli.py:2: wh.release.set_release_status from a module of stage None"),
])
def test_a_foreign_write_from_a_flow_is_found(rel: str, source: str, found: str) -> None:
    assert foreign_writes(rel, source) == [found]


def test_an_own_write_or_a_foreign_read_from_a_flow_passes() -> None:
    source = "def f(st, df):\n    st.wh.survey.upsert(T, df)\n    st.wh.pools.round_state(1)\n    st.wh.read(T)\n"
    assert foreign_writes("flows/survey.py", source) == []


def test_a_slice_refuses_to_write_a_table_its_stage_does_not_own(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        row = pl.DataFrame([{"email": "a@example.org", "source": "reply", "received_at": None}])
        with pytest.raises(ForeignTableWrite) as err:
            wh.pools.upsert(SURVEY_OPT_OUTS, row)
        assert str(err.value) == ("the pools slice (wh.pools) may not write survey_opt_outs: survey owns it; "
                                  "write it through wh.survey")
        with pytest.raises(ForeignTableWrite, match="ratings slice .* releases: release owns it"):
            wh.ratings.replace_all(RELEASES, RELEASES.empty())
        with pytest.raises(ForeignTableWrite, match="survey_messages: survey owns it"):
            wh.release.delete_where_in(SURVEY_MESSAGES, "message_id", ["m"])
        with pytest.raises(ForeignTableWrite, match="releases: release owns it"):
            wh.evaluate.insert(RELEASES, RELEASES.empty())
        assert wh.count(SURVEY_OPT_OUTS) == 0
        assert wh.survey.replace_all(SURVEY_MESSAGES, SURVEY_MESSAGES.empty()) == 0


def test_the_slices_share_one_session_and_one_transaction(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        assert {id(getattr(wh, stage).con) for stage in SLICES} == {id(wh.con)}
        with pytest.raises(RuntimeError, match="planted"), wh.transaction():
            wh.runs.start_run("r1", "test", {}, "v")
            assert wh.runs.latest_runs().height == 1
            raise RuntimeError("planted")
        assert wh.runs.latest_runs().height == 0
