"""Helpers the tests share (functions and constants; fixtures live in the conftest.py at the level
that shares them): settings on a replay server, the command line in this process, and the world's dates."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from revbench.replay.server import ReplayApp, replay_overrides
from revbench.settings import Settings

# The recorded answers the client tests replay.
FIXTURES = Path(__file__).resolve().parents[1] / "clients" / "fixtures"

# The small SYNTHETIC world's days.
WORLD_SINCE = date(2026, 9, 1)
WORLD_UNTIL = date(2026, 9, 20)
# Fast timeouts and back-offs: the replay server answers at once.
FAST = {
    "http": {"timeout_seconds": 0.5, "backoff_initial_seconds": 0.01, "backoff_max_seconds": 0.05, "max_attempts": 6},
    "grobid": {"timeout_seconds": 0.5},
    "arxiv": {"categories": ["cs.AI", "cs.CL", "cs.CV", "cs.IR", "cs.LG"]},
}


def on_replay(settings: Settings, app: ReplayApp) -> Settings:
    """``settings`` with every client pointed at the replay server ``app`` (fast timeouts)."""
    overrides = replay_overrides(app.base)  # type: ignore[attr-defined]
    for section, values in FAST.items():
        overrides[section] = {**overrides.get(section, {}), **values}
    return settings.with_overrides(**overrides)


def run_cli(*args: str) -> tuple[int, str, str]:
    """The command line in this process: (exit code, stdout, stderr), as a user sees them."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from revbench.app.cli import run

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = run(list(args))
    return code, out.getvalue(), err.getvalue()


def settings_env(settings: Settings) -> dict[str, str]:
    """``settings`` as the REVBENCH_ variables a command-line process would read them from."""
    import json

    from pydantic import SecretStr

    out: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in items:
            key = f"REVBENCH_{name.upper()}" + (f"__{sub.upper()}" if sub else "")
            if v is None:
                continue
            if isinstance(v, SecretStr):
                v = v.get_secret_value()
            out[key] = json.dumps(v) if isinstance(v, (list, dict, bool)) else str(v)
    return out


def record_stage_ran(wh: Any, stage: str, plan: Any, refresh_id: str = "r1") -> None:
    """What a refresh records after it ran ``stage`` on ``plan`` (its reason and fingerprint), so the
    stage's planner sees that work as done."""
    import polars as pl

    from revbench.schemas.tables import REFRESH_STAGES
    from revbench.warehouse import utcnow

    wh.upsert(REFRESH_STAGES, pl.DataFrame([{"refresh_id": refresh_id, "position": 1, "stage": stage, "status": "ran",
                                             "reason": plan.reason, "fingerprint": plan.fingerprint, "seconds": 1.0,
                                             "finished_at": utcnow()}], schema=REFRESH_STAGES.polars_schema))
