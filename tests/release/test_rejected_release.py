"""A rejected release says so on disk and to every reader: its folder keeps a ``REJECTED`` file
(who, when, why) outside the manifest, which stays as built; ``release verify`` says REJECTED and
exits 8; ``evaluate -b release=`` refuses it (and a copy of it) unless --allow-rejected; ``LATEST``
never names it, and the refresh counts new ratings from the last release that was not rejected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from revbench.flows.refresh import plan_release
from revbench.flows.release import release_flow
from revbench.release_files import REJECTED, verify_release
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.support.cli import one_line_error
from tests.support.survey import run_cli_env

_TEMPLATE: dict[str, Settings] = {}


@pytest.fixture
def rejected(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """A fresh copy of one data folder: v1 published, v2 built from the same ratings (forced) and
    rejected by bo. Made once per module (a survey round answered over HTTP costs seconds)."""
    if not _TEMPLATE:
        s, _ = request.getfixturevalue("rated")
        s = s.with_overrides(release={"evaluate_after": False})
        assert release_flow.fn(s, approve="yes", approver="ada").status == "published"
        assert release_flow.fn(s, force=True, approve="no", approver="bo").status == "rejected"
        _TEMPLATE["s"] = s
    s = _TEMPLATE["s"]
    data = tmp_path / "copy" / "data"
    shutil.copytree(s.data_dir, data, ignore=shutil.ignore_patterns("*.run.json", "prefect"))
    return s.with_overrides(data_dir=data)


def test_a_rejected_release_is_marked_beside_a_manifest_that_stays_as_built(rejected: Settings) -> None:
    v1, v2 = rejected.releases_dir / "v1", rejected.releases_dir / "v2"
    marker = json.loads((v2 / REJECTED).read_text())
    assert marker["status"] == "rejected" and marker["version"] == "v2" and marker["decided_by"] == "bo"
    assert marker["decided_at"][:4] >= "2026" and "never published" in marker["note"]
    assert not (v1 / REJECTED).exists()
    manifest = json.loads((v2 / "manifest.json").read_text())
    assert REJECTED not in {f["path"] for f in manifest["files"]}
    release = verify_release(v2)  # every file as built: the marker is no unlisted file
    assert release.rejected is not None and release.rejected.decided_by == "bo"
    assert verify_release(v1).rejected is None
    assert (rejected.releases_dir / "LATEST").read_text() == "v1\n"


def test_release_verify_says_rejected_and_exits_8(rejected: Settings, tmp_path: Path) -> None:
    v2 = rejected.releases_dir / "v2"
    code, out, err = run_cli_env(rejected, "release", "verify", str(v2))
    line = one_line_error(code, out, err, 8, "v2: REJECTED by bo on 20", "no reason given", "files match its manifest",
                          "never published", "LATEST")
    assert "verified" not in out, line
    code, out, err = run_cli_env(rejected, "release", "verify", str(rejected.releases_dir / "v1"))
    assert code == 0 and "release v1 verified" in out, err
    # A copy takes its marker along: still rejected, by its own word.
    copy = tmp_path / "elsewhere" / "v2"
    shutil.copytree(v2, copy)
    one_line_error(*run_cli_env(rejected, "release", "verify", str(copy)), 8, "v2: REJECTED by bo")
    # Without its marker (rejected before markers were written, or the file lost), the warehouse says it.
    (v2 / REJECTED).unlink()
    one_line_error(*run_cli_env(rejected, "release", "verify", str(v2)), 8, "v2: REJECTED by bo")
    # A marker on a release the warehouse records as published was not its curator's: refused as such.
    shutil.copy(copy / REJECTED, rejected.releases_dir / "v1" / REJECTED)
    one_line_error(*run_cli_env(rejected, "release", "verify", str(rejected.releases_dir / "v1")), 2,
                   "v1/REJECTED: the warehouse records v1 as published")


def test_evaluate_refuses_a_rejected_release_unless_allowed(rejected: Settings, tmp_path: Path) -> None:
    v2 = rejected.releases_dir / "v2"
    args = ["evaluate", "-s", "trivial", "--bootstrap", "0", "--report", str(tmp_path / "report")]
    one_line_error(*run_cli_env(rejected, *args, "-b", f"release={v2}"), 8, "v2: REJECTED by bo",
                   "--allow-rejected")
    one_line_error(*run_cli_env(rejected, *args, "-b", f"lrbench={v2}"), 8, "v2: REJECTED by bo")
    copy = tmp_path / "elsewhere" / "v2"
    shutil.copytree(v2, copy)
    one_line_error(*run_cli_env(rejected, *args, "-b", f"release={copy}"), 8, "v2: REJECTED by bo")
    assert not (tmp_path / "report").exists()
    code, out, err = run_cli_env(rejected, *args, "-b", f"release={v2}", "--allow-rejected")
    assert code == 0 and "trivial" in out, err
    code, out, err = run_cli_env(rejected, *args, "-b", f"release={rejected.releases_dir / 'v1'}")
    assert code == 0, err


def test_the_refresh_counts_new_ratings_from_the_last_release_not_rejected(rejected: Settings) -> None:
    with Warehouse.open(rejected.warehouse_path, read_only=True) as wh:
        assert wh.release.latest_release()["version"] == "v1"  # type: ignore[index]
        plan = plan_release(rejected, wh)
    assert "since release v1" in plan.reason and "v2" not in plan.reason, plan.reason
