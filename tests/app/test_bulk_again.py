"""The bulk benchmark measured again (``benchmarks.bulk_again``) puts the day-later files aside
for the first run and back for the day later, whatever happened in between: a snapshot written
again for the first run is replaced by the day later's, and a run killed while they were aside
finds them there next time."""

from __future__ import annotations

from pathlib import Path

from benchmarks.bulk_again import put_back, set_aside
from benchmarks.bulk_bench import FIRST_RELEASE, NEXT_RELEASE


def _work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    for d in (f"s2ag/{FIRST_RELEASE}/papers", f"s2ag/{NEXT_RELEASE}/papers", "s2ag/diffs/x", "openalex/data/works"):
        (work / d).mkdir(parents=True)
    (work / "openalex" / "data" / "works" / "manifest").write_text("day later")
    return work


def test_the_day_later_files_go_aside_and_come_back(tmp_path: Path) -> None:
    work = _work(tmp_path)
    set_aside(work)
    assert sorted(p.name for p in (work / "s2ag").iterdir()) == [FIRST_RELEASE] and not (work / "openalex").exists()
    # the first run's snapshot, written again while the day later's is aside
    (work / "openalex" / "data" / "works").mkdir(parents=True)
    (work / "openalex" / "data" / "works" / "manifest").write_text("first run")
    set_aside(work)  # again (a run killed, then started again): the day later's stays aside, untouched
    assert (work / "again-aside" / "openalex" / "data" / "works" / "manifest").read_text() == "day later"
    put_back(work)
    assert sorted(p.name for p in (work / "s2ag").iterdir()) == [FIRST_RELEASE, NEXT_RELEASE, "diffs"]
    assert (work / "openalex" / "data" / "works" / "manifest").read_text() == "day later"
    assert not (work / "again-aside").exists()
    put_back(work)  # nothing aside: nothing changes
    assert (work / "openalex" / "data" / "works" / "manifest").read_text() == "day later"
