"""``revbench graph --from KIND=DIR``: the bulk folders of one run, refused in one line naming the
flag before any work when the kind or the folder is wrong, and handed to the graph flow as the
settings they stand for when right."""

from __future__ import annotations

from pathlib import Path

import pytest

from revbench.errors import UsageError
from tests.support.cli import one_line_error
from tests.support.common import run_cli


@pytest.mark.parametrize(("given", "needles"), [
    (["--from", "s2={dir}"], ["--from 's2={dir}'", "KIND is s2ag or openalex", "not 's2'"]),
    (["--from", "s2ag"], ["--from 's2ag' is not KIND=DIR"]),
    (["--from", "s2ag={missing}"], ["--from 's2ag={missing}'", "is not a folder"]),
    (["--from", "s2ag={dir}", "--from", "s2ag={dir}"], ["--from s2ag= is given twice"]),
    (["--from", "openalex={dir}", "--no-openalex"], ["--from openalex=", "--no-openalex"]),
])
def test_a_bad_from_is_one_line_before_any_work(isolated_env: Path, given: list[str], needles: list[str]) -> None:
    folder = isolated_env / "bulk"
    folder.mkdir()
    where = {"dir": folder, "missing": isolated_env / "missing"}
    args, needles = [a.format(**where) for a in given], [n.format(**where) for n in needles]
    one_line_error(*run_cli("graph", *args, "--no-track"), 2, *needles)
    assert not (isolated_env / "data" / "warehouse.duckdb").exists()


def test_from_sets_the_bulk_folders_of_the_run(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import revbench.flows.graph as graph_module

    seen = []

    class Flow:
        @staticmethod
        def run(settings, track=None):  # type: ignore[no-untyped-def]
            seen.append(settings)
            raise UsageError("stopped here by the test")

    monkeypatch.setattr(graph_module, "graph_flow", Flow)
    s2ag, snap = isolated_env / "s2ag", isolated_env / "openalex"
    s2ag.mkdir()
    snap.mkdir()
    one_line_error(*run_cli("graph", "--from", f"s2ag={s2ag}", "--from", f"openalex={snap}", "--no-track"), 2, "stopped here")
    assert seen[0].s2.bulk_dir == s2ag and seen[0].openalex.snapshot_dir == snap and seen[0].openalex.enabled
    monkeypatch.setenv("REVBENCH_S2__BULK_DIR", str(snap))  # the flag wins over the setting, for this run
    one_line_error(*run_cli("graph", "--from", f"s2ag={s2ag}", "--no-track"), 2, "stopped here")
    assert seen[1].s2.bulk_dir == s2ag and seen[1].openalex.snapshot_dir is None
