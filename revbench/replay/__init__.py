"""Local replay of every external service (see ``revbench.replay.server``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from revbench.settings import ReplaySettings


@contextmanager
def spawn_replay(
    world_dir: Path | None,
    settings: ReplaySettings | None = None,
    fixtures_dir: Path | None = None,
    as_of: str | None = None,
) -> Iterator[str]:
    """Run the replay server as its own process on loopback; yields its base URL."""
    settings = settings or ReplaySettings()
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        cmd = [
            sys.executable, "-m", "revbench.replay",
            "--host", settings.host, "--port", str(settings.port), "--port-file", str(port_file),
            "--fault-rate", str(settings.fault_rate), "--fault-seed", str(settings.fault_seed),
            "--max-consecutive-faults", str(settings.max_consecutive_faults),
            "--timeout-delay", str(settings.timeout_delay_seconds),
            "--retry-after", str(settings.retry_after_seconds),
        ]
        if world_dir:
            cmd += ["--world", str(world_dir)]
        if fixtures_dir:
            cmd += ["--fixtures", str(fixtures_dir)]
        if as_of:
            cmd += ["--as-of", as_of]
        proc = subprocess.Popen(cmd, env={**os.environ})
        try:
            deadline = time.monotonic() + 60
            while not port_file.exists() or not port_file.read_text().strip():
                if proc.poll() is not None:
                    raise RuntimeError(f"replay server exited with {proc.returncode}")
                if time.monotonic() > deadline:
                    raise RuntimeError("replay server did not start within 60 s")
                time.sleep(0.05)
            yield f"http://{settings.host}:{int(port_file.read_text())}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
