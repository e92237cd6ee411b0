"""Killing a training at its first checkpoint, as ``kill -9`` would."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path


def kill_at_first_checkpoint(proc: subprocess.Popen, folder: Path, done: Path, timeout: float = 240) -> None:  # type: ignore[type-arg]
    """SIGKILL ``proc`` as soon as ``folder/checkpoints`` holds a checkpoint; fails when the run
    ended first, found no checkpoint in ``timeout`` seconds, or finished (``done`` exists)."""
    deadline = time.monotonic() + timeout
    while not list((folder / "checkpoints").glob("step-*")):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, f"no checkpoint within {timeout:.0f} s"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not done.exists(), "the run finished before it could be killed"
