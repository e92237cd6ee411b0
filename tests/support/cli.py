"""The command line in its own process, as a user runs it, and the evaluation inputs the
command-line tests write."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from revbench.settings import Settings
from tests.support.common import run_cli, settings_env
from tests.support.evaluation import bench, write_openreview


def cli(s: Settings, *args: str, extra: dict[str, str] | None = None, wait: bool = True,  # type: ignore[no-untyped-def]
        preexec: Callable[[], None] | None = None):
    """``revbench ARGS`` in its own process, configured through the environment like a user's;
    ``preexec`` runs in the child before revbench starts (e.g. :func:`file_size_limit`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
    env.update(settings_env(s), **(extra or {}))
    cmd = [sys.executable, "-m", "revbench", *args]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=preexec)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, preexec_fn=preexec)


def file_size_limit(limit: int) -> Callable[[], None]:
    """A ``preexec`` for :func:`cli` that caps each file the process writes at ``limit`` bytes: a
    write past it fails with the kernel's own EFBIG (SIGXFSZ ignored, so the process is not
    killed), as a write onto a full disk fails, with no mount rights, root or mock needed."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and "| INFO" not in ln and "| WARNING" not in ln]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


RATED = {"ir": {"s1": 0.9, "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}}


def write_gold(d: Path, rows: list[str] | None = None, sep: str = "\t", name: str = "evaluations.tsv") -> Path:
    """A gold-standard slice (one draw) of the hand-made benchmark."""
    b = bench()
    write_openreview(d / "d_20_1")
    (d / "d_20_1" / "ratings.csv").unlink()
    header = ["ParticipantID", *[f"Paper{i}" for i in range(1, 11)], *[f"Expertise{i}" for i in range(1, 11)]]
    if rows is None:
        rows = [gold_row(r, g["paper_id"].to_list(), [f"{x:g}" for x in g["rating"].to_list()]).replace("\t", sep)
                for (r,), g in b.splits[0].ratings.group_by("reviewer_id", maintain_order=True)]
    (d / name).write_text(sep.join(header) + "\n" + "\n".join(rows) + "\n")
    return d


def one_line_error(code: int, out: str, err: str, expected_code: int, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == expected_code, out + err
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def nothing_written(data_dir: Path, tmp_path: Path) -> None:
    assert not (data_dir / "warehouse.duckdb").exists()
    assert not (tmp_path / "rows.json").exists() and not (tmp_path / "report").exists()


def evaluate_cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    return run_cli("evaluate", *args, "--json-out", str(tmp_path / "rows.json"), "--report", str(tmp_path / "report"))


def gold_row(who: str, papers: list[str], ratings: list[str]) -> str:
    return "\t".join([who, *papers, *[""] * (10 - len(papers)), *ratings, *[""] * (10 - len(ratings))])
