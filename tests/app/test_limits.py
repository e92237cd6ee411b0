"""Service limits on the Prefect server: created from the settings, and freed again after a run
was killed while holding slots (Prefect would otherwise keep them taken until a lease
repossessor notices, which temporary and test servers never run)."""

from __future__ import annotations

from prefect.client.orchestration import get_client

from revbench.flows.pieces import SERVICE_TAGS, ensure_limits
from revbench.settings import LimitsSettings


def _grobid() -> tuple[int, int]:
    with get_client(sync_client=True) as client:
        gcl = client.read_global_concurrency_limit_by_name(f"tag:{SERVICE_TAGS['grobid']}")
    return gcl.limit, gcl.active_slots


def test_limits_follow_the_settings_and_a_crash_frees_their_slots(prefect_server) -> None:
    in_force = ensure_limits(LimitsSettings(grobid=1, embed=0))
    assert in_force[SERVICE_TAGS["grobid"]] == 1 and SERVICE_TAGS["embed"] not in in_force
    assert _grobid() == (1, 0)
    # A holder that dies without releasing: its slot stays taken.
    with get_client(sync_client=True) as client:
        client.increment_concurrency_slots_with_lease(
            names=[f"tag:{SERVICE_TAGS['grobid']}"], slots=1, mode="concurrency", lease_duration=600)
    assert _grobid() == (1, 1)
    ensure_limits(LimitsSettings(grobid=3, embed=0))
    assert _grobid() == (3, 1), "an ordinary start must not take slots from live holders"
    ensure_limits(LimitsSettings(grobid=3, embed=0), fresh=True)
    assert _grobid() == (3, 0)
    ensure_limits(LimitsSettings(grobid=0))
    with get_client(sync_client=True) as client:
        names = {c.name for c in client.read_global_concurrency_limits()}
    assert f"tag:{SERVICE_TAGS['grobid']}" not in names
