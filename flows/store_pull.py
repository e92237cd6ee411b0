"""Reading the survey store from where the last pull stopped: the ratings flow pulls with it, and
the refresh's ratings planner asks whether the store still holds what was pulled (a store emptied
or restored from an older backup is read whole again, under a new epoch)."""

from __future__ import annotations

from typing import Any, NamedTuple

from revbench.tasks import ratings as tasks
from revbench.warehouse.store import SurveyStore


class Snapshot(NamedTuple):
    """The store's identity, its events past ``after``, and what it lost since the last pull."""

    identity: dict[str, Any]
    rows: list[dict[str, Any]]
    after: int
    lost: dict[str, Any]


def lost_since_pull(store: SurveyStore, epoch: str, high_water: int, digest: str | None) -> bool:
    """Whether the store no longer holds, as it was pulled, the event at its epoch's high-water
    mark: it was emptied or restored from an older backup, and its ids may name new answers."""
    if not high_water:
        return False
    held = store.event(high_water)
    return held is None or (digest is not None and tasks.store_events([held], epoch)["digest"][0] != digest)


def read_store(store: SurveyStore, marks: dict[str, tuple[int, str | None]]) -> Snapshot:
    """The store's events past its epoch's high-water mark (``marks``: epoch -> (mark, digest)).
    A store that lost events gets a new epoch and is read whole (``lost`` says what was lost);
    so is one whose epoch another pull renewed meanwhile."""
    ident = store.identity()
    epoch = str(ident["epoch"])
    after, at_mark = marks.get(epoch, (0, None))
    lost: dict[str, Any] = {}
    if lost_since_pull(store, epoch, after, at_mark):
        lost = {"lost_from": epoch, "pulled_up_to": after}
        store.renew_epoch(epoch)
        after = 0
    ident, rows = store.snapshot(after)
    if ident["epoch"] != epoch and not lost:  # renewed by another pull meanwhile: all of it, by digest
        after = 0
        ident, rows = store.snapshot(0)
    return Snapshot(ident, rows, after, lost)
