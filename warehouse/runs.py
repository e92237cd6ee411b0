"""Run bookkeeping: every flow's run, its stages' row counts, and what a refresh last ran.

Owns ``runs``, ``run_stages`` and the reads of ``refresh_stages``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import polars as pl

from revbench.schemas.tables import RUN_STAGES, RUNS
from revbench.warehouse.core import utcnow
from revbench.warehouse.slice import Slice


class RunsSlice(Slice):
    """Starting, recording and finishing runs; the refresh's fingerprints."""

    stage = "runs"

    def mark_crashed_runs(self, alive_waiting: frozenset[str] = frozenset()) -> int:
        """Runs still 'running' when a new run starts died without finishing (DuckDB's lock
        means no other writer can be alive); so did runs 'waiting' for a curator whose process is
        gone (``alive_waiting``: the waiting runs whose process still lives)."""
        keep = sorted(alive_waiting) or [""]
        dead = "status = 'running' OR (status = 'waiting' AND run_id NOT IN (SELECT unnest(?::VARCHAR[])))"
        with self.transaction():
            n = self._exec(f"SELECT count(*) FROM runs WHERE {dead}", [keep])[0][0]
            self._exec(f"UPDATE runs SET status = 'crashed', finished_at = ? WHERE {dead}", [utcnow(), keep])
        return int(n)

    def start_run(self, run_id: str, flow: str, parameters: dict[str, Any], code_version: str) -> None:
        row = {
            "run_id": run_id,
            "flow": flow,
            "status": "running",
            "started_at": utcnow(),
            "parameters": json.dumps(parameters, default=str, sort_keys=True),
            "code_version": code_version,
        }
        self.upsert(RUNS, pl.DataFrame([row]))

    def record_run(self, run_id: str, flow: str, parameters: dict[str, Any], code_version: str, started_at: datetime,
                   status: str, error: str | None = None) -> None:
        """A finished run in one write (a run that holds no warehouse session while it works)."""
        row = {"run_id": run_id, "flow": flow, "status": status, "started_at": started_at, "finished_at": utcnow(),
               "parameters": json.dumps(parameters, default=str, sort_keys=True), "code_version": code_version,
               "error": error}
        self.upsert(RUNS, pl.DataFrame([row], schema=RUNS.polars_schema))

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        with self.transaction():
            self._exec(
                "UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE run_id = ?",
                [status, utcnow(), error, run_id],
            )

    def add_run_parameters(self, run_id: str, extra: dict[str, Any]) -> None:
        """Merge ``extra`` into a run's recorded parameters (what the run found out as it went:
        the next run compares them with its own)."""
        with self.transaction():
            rows = self._exec("SELECT parameters FROM runs WHERE run_id = ?", [run_id])
            params = {**json.loads(rows[0][0] or "{}"), **extra} if rows else dict(extra)
            self._exec("UPDATE runs SET parameters = ? WHERE run_id = ?",
                       [json.dumps(params, default=str, sort_keys=True), run_id])

    def last_completed_parameter(self, flow: str, key: str) -> Any:
        """``key`` of the parameters of the latest completed run of ``flow`` that recorded it
        (None: none did): what a run found out, for the next run to start from."""
        rows = self._exec(
            "SELECT json_extract(parameters, ?)::VARCHAR FROM runs WHERE flow = ? AND status = 'completed' "
            "AND json_extract(parameters, ?) IS NOT NULL ORDER BY started_at DESC LIMIT 1",
            [f"$.{key}", flow, f"$.{key}"])
        return json.loads(rows[0][0]) if rows and rows[0][0] is not None else None

    def set_run_status(self, run_id: str, status: str) -> None:
        """A live run's state changes: ``waiting`` for a curator (it lets go of the warehouse
        meanwhile, and a new run must not take it for crashed), ``running`` again once answered."""
        with self.transaction():
            self._exec("UPDATE runs SET status = ? WHERE run_id = ?", [status, run_id])

    def record_stage(
        self, run_id: str, stage: str, rows_in: int, rows_out: int, rejected: int, seconds: float
    ) -> None:
        row = dict(run_id=run_id, stage=stage, rows_in=rows_in, rows_out=rows_out, rejected=rejected, seconds=seconds)
        self.upsert(RUN_STAGES, pl.DataFrame([row]))

    def run_stages(self, run_id: str) -> pl.DataFrame:
        return self._frame(
            "SELECT stage, rows_in, rows_out, rejected, seconds FROM run_stages WHERE run_id = ? ORDER BY rowid",
            [run_id],
        )

    def latest_runs(self, n: int = 5) -> pl.DataFrame:
        """The ``n`` most recently started runs: ``run_id, flow, status, started_at, finished_at``."""
        return self._frame(
            "SELECT run_id, flow, status, started_at, finished_at FROM runs ORDER BY started_at DESC LIMIT ?", [n]
        )

    def last_refresh_fingerprint(self, stage: str) -> tuple[str, str, datetime] | None:
        """``(fingerprint, refresh_id, finished_at)`` of the last refresh that ran ``stage``."""
        rows = self._exec(
            "SELECT fingerprint, refresh_id, finished_at FROM refresh_stages WHERE stage = ? AND status = 'ran' "
            "ORDER BY finished_at DESC LIMIT 1", [stage])
        return tuple(rows[0]) if rows else None  # type: ignore[return-value]

    def papers_loaded_since(self, when: datetime) -> int:
        """Corpus papers (new, or a new version) loaded by runs that started after ``when``."""
        return int(self._exec("SELECT count(*) FROM papers p JOIN runs r USING (run_id) WHERE r.started_at > ?",
                              [when])[0][0])
