"""Checks on a tracked run paused for a curator: the block it printed, and ``revbench status``'s
account of it (read while the run waits, the warehouse let go)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from revbench.settings import Settings
from revbench.warehouse.holder import describe_waiting
from revbench.warehouse.status import read_status


@contextmanager
def flow_messages() -> Iterator[list[str]]:
    """The messages the flows log meanwhile (the waiting block among them)."""
    seen: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("revbench.flows")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def assert_waiting(s: Settings, run_id: object, messages: list[str], what: str, command: str) -> None:
    """One block says what the run waits for, its page in the UI, the command and the timeout;
    ``revbench status`` lists the run, waiting, with the same block."""
    blocks = [m for m in messages if f"run {run_id} waits for" in m]
    assert len(blocks) == 1, messages
    block = blocks[0]
    assert what in block and command in block and f"/runs/flow-run/{run_id}" in block and "paused-expired" in block
    st = read_status(s.warehouse_path)
    assert not st.busy and [r["status"] for r in st.runs if r["run_id"] == str(run_id)] == ["waiting"]
    assert [describe_waiting(w) for w in st.waiting] == [block]


def form_of(run_id: object) -> tuple[str, dict]:
    """The paused run's form as the UI gets it: its description (markdown) and JSON schema."""
    from prefect.client.orchestration import get_client
    from prefect.input.actions import read_flow_run_input
    from prefect.input.run_input import keyset_from_paused_state

    with get_client(sync_client=True) as client:
        keys = keyset_from_paused_state(client.read_flow_run(run_id).state)  # type: ignore[arg-type]
    return read_flow_run_input(keys["description"], flow_run_id=run_id), read_flow_run_input(keys["schema"], flow_run_id=run_id)


def shown_in_ui(run_id: object, label: str, timeout: float = 60) -> str:
    """Checks that the Prefect UI shows ``label`` on a finished run: its name ends with
    ``(label)``, its log holds a line with it and its ``outcome`` artifact names it; returns the
    name of the run's final state."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
        LogFilter,
        LogFilterFlowRunId,
    )

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:  # logs reach the API in batches, a moment after the run ends
            run = client.read_flow_run(run_id)  # type: ignore[arg-type]
            lines = [r.message for r in client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))]
            artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["outcome"]), flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])))
            if run.state is not None and run.state.is_final() and any(label in m for m in lines):
                break
            assert time.monotonic() < deadline, (run.name, run.state, lines)
            time.sleep(0.5)
    assert run.name.endswith(f"({label})"), run.name
    assert [a for a in artifacts if label in str(a.data) or label in str(a.description)], artifacts
    return run.state.name
