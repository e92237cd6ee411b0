"""Verified, immutable releases: one byte changed in any file of a release is refused by name
when it is published, loaded (``-b release=``, its JSON as ``-b lrbench=``), reported (``report
--releases``, the results page of ``report --html``), reused (the parent and
``--only-if-changed``) and verified (``release verify``), with the warehouse and the
release folder left as they were; a published version is never replaced, a new one supersedes
it, the parent chain never loops, ``LATEST`` only moves forward, and results stay attached to the
exact manifest they were computed on."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from revbench.errors import ReleaseTampered, UsageError
from revbench.evaluation.importers.release import load_release
from revbench.files import file_sha256 as sha256_file
from revbench.flows.release import release_flow
from revbench.settings import Settings
from revbench.tasks.release import verify_release
from revbench.warehouse import Warehouse
from tests.support.survey import run_cli_env

LISTED = ["CHANGES.md", "README.md", "croissant.json", "data/paper_centric.parquet", "data/papers.parquet",
          "data/pointwise.parquet", "data/reviewer_centric.parquet", "data/reviewers.parquet", "evaluations_pc.json",
          "evaluations_rc.json", "figures/distributions.png"]
"""Every file a release's manifest lists (a test below holds this list to the manifest)."""

_TEMPLATE: dict[str, Settings] = {}


@pytest.fixture
def releases(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """A fresh copy of one data folder: v1 published (and evaluated: its results are in the
    warehouse), v2 built from the same ratings (forced: it equals v1) and waiting for a curator's
    go. The folder is made once per module (a survey round answered over HTTP costs seconds) and
    copied per test."""
    if not _TEMPLATE:
        s, _ = request.getfixturevalue("rated")
        assert release_flow.fn(s, approve="yes", approver="ada").status == "published"
        assert release_flow.fn(s, force=True).status == "built"
        _TEMPLATE["s"] = s
    s = _TEMPLATE["s"]
    data = tmp_path / "copy" / "data"  # the first test's own data folder is the template
    shutil.copytree(s.data_dir, data, ignore=shutil.ignore_patterns("*.run.json", "prefect"))
    return s.with_overrides(data_dir=data)


def state(s: Settings) -> dict[str, Any]:
    """What must not change when a command refuses: the releases recorded, the results, the
    runs, LATEST, and every byte under the releases folder."""
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        recorded = wh._frame("SELECT * FROM releases ORDER BY version").to_dicts()
        results = wh._exec("SELECT count(*), count(DISTINCT run_id) FROM eval_results")[0]
        runs = wh._exec("SELECT count(*) FROM runs")[0][0]
    files = {p.relative_to(s.releases_dir).as_posix(): p.read_bytes() for p in sorted(s.releases_dir.rglob("*")) if p.is_file()}
    return {"releases": recorded, "results": results, "runs": runs, "files": files}


def change_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_the_listed_files_are_every_file_a_release_has(releases) -> None:
    s = releases
    manifest = json.loads((s.releases_dir / "v1" / "manifest.json").read_text())
    assert sorted(f["path"] for f in manifest["files"]) == LISTED
    on_disk = sorted(p.relative_to(s.releases_dir / "v1").as_posix() for p in (s.releases_dir / "v1").rglob("*") if p.is_file())
    assert on_disk == sorted([*LISTED, "manifest.json"])


@pytest.mark.parametrize("name", [*LISTED, "manifest.json"])
def test_one_byte_changed_in_any_file_is_refused_everywhere_by_name(releases, name: str) -> None:
    s = releases
    v1, v2 = s.releases_dir / "v1", s.releases_dir / "v2"
    change_one_byte(v1 / name)
    change_one_byte(v2 / name)
    before = state(s)
    commands = {
        "verify": ["release", "verify", str(v1)],
        "load": ["evaluate", "-b", f"release={v1}", "-s", "trivial", "--bootstrap", "0"],
        "report": ["report", "--releases"],
        "publish": ["release", "--version", "v2", "--approve", "yes", "--no-track"],
        "page": ["report", "--html", str(s.data_dir / "page")],
        "lrbench": ["evaluate", "-b", f"lrbench={v1}", "-s", "trivial", "--bootstrap", "0"],
    }
    for what, args in commands.items():
        code, out, err = run_cli_env(s, *args)
        assert code == 2, (what, out, err)
        assert len(err.strip().splitlines()) == 1 and f"/{name}:" in err and "not as it was built" in err, (what, err)
        if name == "manifest.json":  # its own list still matches its files: the warehouse's record does not
            assert "recorded in the warehouse" in err, (what, err)
    assert not (s.data_dir / "page").exists()
    after = state(s)
    assert after["releases"] == before["releases"] and after["results"] == before["results"]
    assert after["files"] == before["files"]
    assert after["runs"] - before["runs"] <= 1  # the refused go is itself recorded as a failed run, nothing else
    # The reuse checks read the same files: the parent of a new build and --only-if-changed.
    code, _out, err = run_cli_env(s, "release", "--no-track")
    assert code == 2 and f"/{name}:" in err, err
    code, _out, err = run_cli_env(s, "release", "--only-if-changed", "--no-track")
    assert code == 2 and f"/{name}:" in err, err
    assert state(s)["files"] == before["files"] and not (s.releases_dir / "v3").exists()


def test_release_verify_names_each_kind_of_damage(releases, tmp_path: Path) -> None:
    s = releases
    code, out, err = run_cli_env(s, "release", "verify", str(s.releases_dir / "v1"))
    assert code == 0, err
    assert f"release v1 verified: {len(LISTED)} files match its manifest, as recorded in the warehouse" in out

    def copy() -> Path:
        d = tmp_path / f"copy{len(list(tmp_path.glob('copy*')))}" / "v1"
        shutil.copytree(s.releases_dir / "v1", d)
        return d

    d = copy()  # elsewhere, a copy answers to its own manifest
    code, out, _err = run_cli_env(s, "release", "verify", str(d))
    assert code == 0 and "its own manifest" in out

    def manifest(d: Path, edit: Any) -> None:
        m = json.loads((d / "manifest.json").read_text())
        edit(m)
        (d / "manifest.json").write_text(json.dumps(m))

    damage = {
        "manifest.json: missing": lambda d: (d / "manifest.json").unlink(),
        "manifest.json: not valid JSON": lambda d: (d / "manifest.json").write_text('{"files": ['),
        "manifest.json: no list of files": lambda d: manifest(d, lambda m: m.pop("files")),
        "manifest.json: files[0] names '../../warehouse.duckdb'": lambda d: manifest(
            d, lambda m: m["files"][0].update(path="../../warehouse.duckdb")),
        "data/pointwise.parquet: missing": lambda d: (d / "data" / "pointwise.parquet").unlink(),
        "README.md: ": lambda d: (d / "README.md").write_text((d / "README.md").read_text() + " "),
        "data/extra.parquet: not listed in manifest.json": lambda d: shutil.copy(d / "data" / "papers.parquet",
                                                                                  d / "data" / "extra.parquet"),
        "v1: no release folder there": lambda d: shutil.rmtree(d),
    }
    for expected, do in damage.items():
        d = copy()
        do(d)
        code, out, err = run_cli_env(s, "release", "verify", str(d))
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, (expected, err)
    d = copy()  # a copy elsewhere is loaded only when its files match its own manifest
    change_one_byte(d / "data" / "pointwise.parquet")
    code, _out, err = run_cli_env(s, "evaluate", "-b", f"release={d}", "-s", "trivial", "--bootstrap", "0")
    assert code == 2 and "data/pointwise.parquet: sha256" in err, err
    code, _out, err = run_cli_env(s, "release", "verify", str(copy()), "--replace")
    assert code == 2, err
    code, _out, err = run_cli_env(s, "release", "--replace", "verify", str(copy()))
    assert code == 2 and "--replace belongs to `revbench release`" in err
    # A size change is named as one (the bytes differ before the hash is computed).
    d = copy()
    (d / "README.md").write_text((d / "README.md").read_text() + " ")
    with pytest.raises(ReleaseTampered, match=r"README\.md: \d+ bytes where manifest\.json lists \d+"):
        verify_release(d)


def test_a_published_release_is_never_replaced_and_a_refusal_changes_nothing(releases) -> None:
    s = releases
    before = state(s)
    code, _out, err = run_cli_env(s, "release", "--version", "v1", "--replace", "--no-track")
    assert code == 2
    assert err.strip().endswith("v1 is published and cannot be replaced; make a new version, e.g. --version v3, "
                                "which supersedes it")
    with pytest.raises(UsageError, match="v1 is published and cannot be replaced"):
        release_flow.fn(s, version="v1", replace=True)
    assert state(s) == before  # refused before the run: no run row either
    assert (s.releases_dir / "LATEST").read_text() == "v1\n"
    # Even with its folder gone, a published version is not built again under the same name.
    shutil.move(s.releases_dir / "v1", s.data_dir / "v1-aside")
    with pytest.raises(UsageError, match="v1 is published and cannot be replaced"):
        release_flow.fn(s, version="v1")
    shutil.move(s.data_dir / "v1-aside", s.releases_dir / "v1")
    # An unpublished one is rebuilt as before: the old one kept aside, still built, same parent.
    rebuilt = release_flow.fn(s, version="v2", replace=True, force=True)
    assert rebuilt.status == "built" and rebuilt.parent == "v1"
    assert (s.releases_dir / ".replaced" / "v2-1" / "manifest.json").is_file()
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.release.release_state("v1")["status"] == "published" and wh.release.release_state("v2")["status"] == "built"


def parents(s: Settings) -> dict[str, str | None]:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return dict(wh.release.releases().select("version", "parent").iter_rows())


def assert_no_cycle(chain: dict[str, str | None]) -> None:
    for start in chain:
        seen, v = set(), start
        while v is not None:
            assert v not in seen, f"parent cycle through {v}: {chain}"
            seen.add(v)
            v = chain.get(v)


def test_a_new_version_supersedes_the_published_one_which_stays_published_and_readable(releases) -> None:
    s = releases
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        v1_digest = wh.release.release_state("v1")["manifest_sha256"]
        rows = wh._frame("SELECT DISTINCT benchmark_version, benchmark_digest FROM eval_results WHERE benchmark = 'release'")
    assert rows.rows() == [("v1", v1_digest)] and v1_digest == sha256_file(s.releases_dir / "v1" / "manifest.json")
    code, _out, err = run_cli_env(s, "release", "--version", "v2", "--approve", "yes", "--no-track")
    assert code == 0, err
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        v1, v2 = wh.release.release_state("v1"), wh.release.release_state("v2")
        results = wh.evaluate.release_results("loss", "average")
    assert v1["status"] == "published" and v1["superseded_by"] == "v2"
    assert v2["status"] == "published" and v2["superseded_by"] is None and v2["parent"] == "v1"
    assert (s.releases_dir / "LATEST").read_text() == "v2\n"
    assert load_release(s.releases_dir / "v1").digest == v1["manifest_sha256"]  # still readable, as published
    assert run_cli_env(s, "release", "verify", str(s.releases_dir / "v1"))[0] == 0
    assert dict(results.select("version", "manifest_sha256").unique().iter_rows()) == {
        "v1": v1["manifest_sha256"], "v2": v2["manifest_sha256"]}
    code, out, err = run_cli_env(s, "report", "--releases")
    assert code == 0 and "v1" in out and "v2" in out, err
    # LATEST only moves forward: two more builds (forced: the ratings did not change), the newer
    # published first, then the older.
    quiet = s.with_overrides(release={"evaluate_after": False})
    for v in ("v3", "v4"):
        assert release_flow.fn(quiet, version=v, force=True).parent == "v2"
    release_flow.fn(quiet, version="v4", approve="yes")
    release_flow.fn(quiet, version="v3", approve="yes")
    assert (s.releases_dir / "LATEST").read_text() == "v4\n"
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        by = {r["version"]: r for r in wh.release.releases().to_dicts()}
    assert {v: r["superseded_by"] for v, r in by.items()} == {"v1": "v2", "v2": "v4", "v3": "v4", "v4": None}
    assert all(r["status"] == "published" for r in by.values())
    assert release_flow.fn(quiet, force=True).parent == "v4"  # v5: the newest published by build
    assert_no_cycle(parents(s))


def test_results_stay_with_the_manifest_they_were_computed_on(releases, tmp_path: Path) -> None:
    """A different release that calls itself v1 (a copy, re-checksummed after its ratings were
    changed) is evaluated: its rows carry its own manifest's sha256, and report --releases keeps
    showing the genuine v1's numbers."""
    s = releases
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        genuine = wh.evaluate.release_results("loss", "pointwise").filter(pl.col("scorer") == "tpms")
    forged = tmp_path / "elsewhere" / "v1"
    shutil.copytree(s.releases_dir / "v1", forged)
    pw = pl.read_parquet(forged / "data" / "pointwise.parquet")
    pw.with_columns((6 - pl.col("rating")).alias("rating")).write_parquet(forged / "data" / "pointwise.parquet")
    m = json.loads((forged / "manifest.json").read_text())
    for f in m["files"]:
        f["bytes"], f["sha256"] = (forged / f["path"]).stat().st_size, sha256_file(forged / f["path"])
    (forged / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    code, _out, err = run_cli_env(s, "evaluate", "-b", f"release={forged}", "-s", "tpms", "--bootstrap", "0")
    assert code == 0, err
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        digests = set(wh._frame("SELECT DISTINCT benchmark_digest FROM eval_results WHERE benchmark_version = 'v1' "
                                "AND benchmark = 'release'")["benchmark_digest"])
        row = ("SELECT value, n FROM eval_results WHERE benchmark_digest = ? AND scorer = 'tpms' AND metric = 'loss' "
               "AND split = 'pointwise' ORDER BY evaluated_at DESC LIMIT 1")
        other = wh._exec(row, [sha256_file(forged / "manifest.json")])[0]
        first = wh._exec(row, [genuine["manifest_sha256"][0]])[0]
        now = wh.evaluate.release_results("loss", "pointwise").filter(pl.col("scorer") == "tpms")
    assert digests == {genuine["manifest_sha256"][0], sha256_file(forged / "manifest.json")}
    # The forged copy's rows are its own (its manifest's digest), beside the genuine ones, whatever
    # its numbers happen to be (a loss of exactly 0.5 stays 0.5 when every rating is inverted).
    assert first[0] == pytest.approx(genuine["value"][0]) and other[1] > 0
    assert now.equals(genuine)


def test_a_warehouse_of_schema_11_keeps_results_of_the_current_build_and_learns_supersession(tmp_path: Path) -> None:
    """Rows evaluated since a release's current build are attached to its recorded manifest; rows
    evaluated before it (of a build moved aside) are not; published releases get their successor."""
    from tests.support.migrations import warehouse_at

    path = tmp_path / "old.duckdb"
    con = warehouse_at(path, 11)
    con.execute("SET TimeZone = 'UTC'")
    for v, built in (("v1", "2026-02-01"), ("v2", "2026-04-01")):
        con.execute("INSERT INTO releases (version, status, manifest_sha256, counts, built_at) "
                    "VALUES (?, 'published', ?, '{}', ?)", [v, f"sha-{v}", built])
    for run, when in (("before-the-build", "2026-01-15"), ("after-the-build", "2026-03-01")):
        con.execute("INSERT INTO eval_results (benchmark, benchmark_version, split, scorer, metric, value, n, run_id, "
                    "evaluated_at) VALUES ('release', 'v1', 'average', 'trivial', 'loss', 0.5, 3, ?, ?)", [run, when])
    con.close()
    with Warehouse.open(path) as wh:
        digests = dict(wh._exec("SELECT run_id, benchmark_digest FROM eval_results"))
        superseded = dict(wh.release.releases().select("version", "superseded_by").iter_rows())
    assert digests == {"before-the-build": None, "after-the-build": "sha-v1"}
    assert superseded == {"v1": "v2", "v2": None}


def test_a_file_changed_while_the_release_waits_for_its_go_is_refused_at_the_go(prefect_server, rated) -> None:
    import threading

    from prefect.flow_runs import resume_flow_run

    from tests.support.survey import paused_run_id

    s, _ = rated
    s = s.with_overrides(release={"evaluate_after": False})
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["out"] = release_flow(s)
        except Exception as exc:  # the flow's failure, as the caller of a tracked run gets it
            result["error"] = exc

    runner = threading.Thread(target=run)
    runner.start()
    run_id = paused_run_id(runner, result)
    change_one_byte(s.releases_dir / "v1" / "data" / "pointwise.parquet")
    resume_flow_run(run_id, run_input={"publish": True, "approver": "curator bo", "reason": ""})
    runner.join(timeout=120)
    assert isinstance(result.get("error"), ReleaseTampered), result
    assert "data/pointwise.parquet: sha256" in str(result["error"])
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.release.release_state("v1")["status"] == "built"
    assert not (s.releases_dir / "LATEST").exists()


def test_the_results_page_and_the_lrbench_reader_take_a_release_as_built(releases, tmp_path: Path) -> None:
    """Untouched, a release is shown and read as LR-bench; a copy elsewhere answers to its own
    manifest (one byte of its JSON changed: refused by name), and LR-bench files without a
    manifest are read as they are."""
    s = releases
    v1 = s.releases_dir / "v1"
    code, out, err = run_cli_env(s, "report", "--html", str(tmp_path / "page"))
    assert code == 0 and (tmp_path / "page" / "index.html").is_file(), err
    # The release is of a SYNTHETIC world: the page, its sections and its charts say so; an
    # average row counts the pairs of its splits, not the splits.
    page = (tmp_path / "page" / "index.html").read_text()
    assert 'class="synthetic-banner"' in page and '<text class="stamp"' in page, page[:2000]
    assert ">average<" not in page or re.search(r">[\d,]+ in \d splits?<", page)
    code, out, err = run_cli_env(s, "evaluate", "-b", f"lrbench={v1}", "-s", "trivial", "--bootstrap", "0")
    assert code == 0, err
    copy = tmp_path / "elsewhere" / "v1"
    shutil.copytree(v1, copy)
    change_one_byte(copy / "evaluations_rc.json")
    code, out, err = run_cli_env(s, "evaluate", "-b", f"lrbench={copy}", "-s", "trivial", "--bootstrap", "0")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{copy}/evaluations_rc.json: sha256" in err and "not as it was built" in err, err
    plain = tmp_path / "plain"
    plain.mkdir()
    for f in ("evaluations_pc.json", "evaluations_rc.json"):
        shutil.copy(v1 / f, plain / f)
    code, out, err = run_cli_env(s, "evaluate", "-b", f"lrbench={plain}", "-s", "trivial", "--bootstrap", "0")
    assert code == 0, err
