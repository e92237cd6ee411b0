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


def test_the_day_later_and_a_fresh_run_are_compared_on_s2s_rows_alone(tmp_path: Path) -> None:
    import polars as pl

    from benchmarks.bulk_again import compare_s2
    from revbench.schemas.graph import CITATIONS
    from revbench.warehouse import Warehouse

    def refs(title: str, source: str = "s2") -> pl.DataFrame:
        return CITATIONS.conform(pl.DataFrame([dict(citing_arxiv_id="2609.00001", source=source, ordinal=i,
                                                    cited_title=f"{title} {i}", cited_year=2024) for i in range(3)]))

    paths = []
    for name, title, other in (("later", "A work", "One"), ("fresh", "A work", "Another")):
        with Warehouse.open(tmp_path / f"{name}.duckdb") as wh:
            wh.graph.save_graph(citations=pl.concat([refs(title), refs(other, "openalex")]))
        paths.append(tmp_path / f"{name}.duckdb")
    same = compare_s2(*paths)
    assert same["citations"]["same"] and same["citations"]["day_later_rows"] == 3  # OpenAlex's rows differ, unread
    with Warehouse.open(paths[1]) as wh:
        wh.graph.save_graph(citations=refs("A retitled work"))
    cites = compare_s2(*paths)["citations"]
    assert not cites["same"] and cites["columns_differing"] == {"cited_title": 3} and cites["only_fresh"] == 0


def test_a_folder_or_size_without_a_finished_run_is_refused_before_anything_moves(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import sys

    import pytest

    from benchmarks import bulk_again

    work = _work(tmp_path)
    monkeypatch.setattr(bulk_again, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    for argv, says in ((["--papers", "12345"], "no "), (["--papers", "20000"], "no ")):
        monkeypatch.setattr(sys, "argv", ["bulk_again", *argv, "--work", str(work)])
        with pytest.raises(SystemExit) as stop:
            bulk_again.main()
        assert stop.value.code == 2 and says in capsys.readouterr().err
        (tmp_path / "results" / "bulk-20k.json").write_text("{}")  # the second: results, but no world in the folder
    assert sorted(p.name for p in (work / "s2ag").iterdir()) == [FIRST_RELEASE, NEXT_RELEASE, "diffs"]  # nothing set aside


def test_a_second_benchmark_on_one_folder_is_refused_and_a_killed_one_leaves_no_lock(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    import pytest

    from benchmarks.bulk_bench import work_lock

    work = _work(tmp_path)
    root = Path(__file__).resolve().parents[2]
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from benchmarks.bulk_bench import work_lock\n"
                               "with work_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)", str(work)],
                              cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit) as refused, work_lock(work):
            pass
        assert f"pid {holder.pid}" in str(refused.value) and str(work) in str(refused.value)
        assert (work / "s2ag" / NEXT_RELEASE).is_dir()  # nothing moved
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    with work_lock(work):  # the system let go of the killed holder's lock
        assert str(os.getpid()) in work.with_name("work.lock").read_text()


def test_a_run_without_fresh_prints_its_ratios_and_a_fresh_one_its_comparison(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import json
    import sys

    from benchmarks import bulk_again

    work = _work(tmp_path)
    for need in ("world-base-20k", "world", "template"):
        (work / need).mkdir()
    (work / "template" / "warehouse.duckdb").write_text("")
    monkeypatch.setattr(bulk_again, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "bulk-20k.json").write_text("{}")
    ratios = {"bulk_over_api": 0.08, "day_later_over_bulk": 0.15}
    compared = {**ratios, "day_later": {"fresh_run": {"s2_tables": {"citations": {"same": True}}}}}
    monkeypatch.setattr(bulk_again, "again", lambda papers, w, repeat, api: dict(ratios))
    monkeypatch.setattr(bulk_again, "fresh_run", lambda papers, w: compared)
    for flags, first in (([], ratios), (["--fresh"], {"citations": True})):
        monkeypatch.setattr(sys, "argv", ["bulk_again", "--papers", "20000", "--work", str(work), *flags])
        bulk_again.main()
        out = capsys.readouterr().out
        assert json.loads(out[:out.index("}") + 1] if flags else out) == first
        assert '"day_later_over_bulk": 0.15' in out


def test_a_benchmark_lock_that_is_a_link_is_refused_in_one_line_and_its_target_kept(tmp_path: Path) -> None:
    import pytest

    from benchmarks.bulk_bench import work_lock

    work = tmp_path / "work"
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    work.with_name("work.lock").symlink_to(target)
    with pytest.raises(SystemExit) as refused, work_lock(work):
        pass
    assert "is a link" in str(refused.value) and "\n" not in str(refused.value)
    assert target.read_text() == "keep me"  # the holder's pid never written through the link


def test_a_repeated_phase_keeps_the_run_of_median_time_and_records_every_one() -> None:
    from benchmarks.bulk_again import median_run

    times = iter([9.0, 7.5, 12.0])
    calls: list[float] = []

    def run() -> dict[str, float]:
        calls.append(next(times))
        return {"seconds": calls[-1], "run": len(calls)}

    got = median_run(run, 3)
    assert got["run"] == 1 and got["seconds"] == 9.0 and got["seconds_each"] == [9.0, 7.5, 12.0]
    assert median_run(lambda: {"seconds": 3.0}, 1) == {"seconds": 3.0}  # once: as before, no list
    stopped = iter([{"seconds": 2.0}, {"seconds": 1.0, "exit_code": -9}, {"seconds": 5.0}])
    assert median_run(lambda: next(stopped), 3) == {"seconds": 1.0, "exit_code": -9}  # a killed run is the result


def test_the_report_says_how_many_runs_each_phase_had_and_their_times() -> None:
    from benchmarks.bulk_report import _bulk_one

    phase = {"seconds": 10.0, "peak_rss_mb": 1024, "papers_asked": 1, "code": "c", "measured_again": "2026-11-30T00:00:00"}
    d = {"when": "2026-11-30T00:00:00", "machine": "2 cores", "command": "python -m benchmarks.bulk_bench --papers 20000",
         "world": {"papers": 10, "references": 20}, "corpus_papers": 5,
         "bulk": {**phase, "seconds_each": [10.0, 9.0, 11.0]}, "day_later": {**phase, "seconds": 1.0, "seconds_each": [1.0, 1.2, 0.9]}}
    text = "\n".join(_bulk_one(d))
    assert "Each phase ran 3 times" in text and "the first bulk run: 10.0, 9.0, 11.0 s" in text
    assert "the day later: 1.0, 1.2, 0.9 s" in text and "--papers 20000 --repeat 3`" in text
    d["bulk"].pop("seconds_each"), d["day_later"].pop("seconds_each")
    assert "Each phase ran" not in "\n".join(_bulk_one(d))


def test_a_repeat_out_of_range_is_refused_before_anything_runs(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import sys

    import pytest

    from benchmarks import bulk_again

    monkeypatch.setattr(bulk_again, "again", lambda *a: pytest.fail("ran"))
    for bad in ("0", "10"):
        monkeypatch.setattr(sys, "argv", ["bulk_again", "--work", str(tmp_path), "--repeat", bad])
        with pytest.raises(SystemExit) as refused:
            bulk_again.main()
        assert refused.value.code == 2 and f"--repeat {bad}: must be 1 to 9" in capsys.readouterr().err


def test_the_api_phase_measured_again_replaces_the_last_api_warehouse_only_once_it_finished(tmp_path: Path,
                                                                                             monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import contextlib

    import pytest

    from benchmarks import bulk_again

    work = tmp_path / "work"
    (work / "template").mkdir(parents=True)
    (work / "template" / "warehouse.duckdb").write_text("template")
    (work / "api").mkdir()
    (work / "api" / "warehouse.duckdb").write_text("the last API run")
    monkeypatch.setattr("revbench.replay.spawn_replay", lambda *a: contextlib.nullcontext("http://replay"))
    monkeypatch.setattr(bulk_again, "run_child", lambda data, *a: {"exit_code": -9, "seconds": 1.0})
    with pytest.raises(SystemExit, match="the last API warehouse kept"):
        bulk_again.api_again(work, work / "world-base", None)
    assert (work / "api" / "warehouse.duckdb").read_text() == "the last API run"
    monkeypatch.setattr(bulk_again, "run_child", lambda data, *a: {"seconds": 2.0, "data": data.name})
    got = bulk_again.api_again(work, work / "world-base", None)
    assert got["seconds"] == 2.0 and got["data"] == "api.partial" and "measured_again" in got
    assert (work / "api" / "warehouse.duckdb").read_text() == "template" and not (work / "api.partial").exists()
