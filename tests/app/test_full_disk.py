"""A full disk ends a writing command in one line naming the folder, with exit code 7, and leaves
no half-written output: the backup's partial snapshot and the results page's folder are removed.
The disk is "full" through a real limit, not a mock: the command runs in its own process under
RLIMIT_FSIZE (SIGXFSZ ignored), so a write past the limit fails with the kernel's EFBIG, which
revbench treats as it treats ENOSPC and EDQUOT."""

from __future__ import annotations

from pathlib import Path

from revbench.backup.manifest import snapshots
from revbench.backup.take import LOCK
from revbench.flows.evaluate import evaluate_flow
from revbench.settings import Settings
from tests.support.answers import one_answer
from tests.support.cli import cli, error_line, file_size_limit
from tests.support.evaluation import write_openreview

BACKUP_KEY = "backup-key-of-these-tests-0123456789"


def test_a_backup_onto_a_full_disk_is_one_line_and_leaves_no_snapshot(settings: Settings, tmp_path: Path) -> None:
    s = settings.with_overrides(backup={"key": BACKUP_KEY})
    one_answer(s, 5)
    # Room for the live store's own files, not for a copy of the warehouse.
    limit = s.warehouse_path.stat().st_size // 2
    assert limit > 64 * 1024
    folder = tmp_path / "backups"
    full = cli(s, "backup", "--to", str(folder), preexec=file_size_limit(limit))
    line = error_line(full)
    assert full.returncode == 7, full.stderr
    assert f"no space left to write the backup into {folder} (File too large)" in line
    assert [p.name for p in folder.iterdir()] == [LOCK]  # no snapshot, no partial one

    done = cli(s, "backup", "--to", str(folder))  # with room again
    assert done.returncode == 0, done.stderr
    assert len(snapshots(folder)) == 1


def test_a_results_page_onto_a_full_disk_is_one_line_and_leaves_no_folder(settings: Settings, tmp_path: Path) -> None:
    evaluate_flow.fn(settings, benchmarks=[f"openreview={write_openreview(tmp_path / 'bench')}"], scorers=["trivial"],
                     bootstrap=20, plot=False)
    out = tmp_path / "share" / "page"
    full = cli(settings, "report", "--html", str(out), preexec=file_size_limit(4096))
    line = error_line(full)
    assert full.returncode == 7, full.stderr
    assert f"no space left to write the results page into {out} (File too large)" in line
    assert not (tmp_path / "share").exists()  # neither the folder nor the one made above it for it

    done = cli(settings, "report", "--html", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "index.html").stat().st_size > 4096 and sorted(p.name for p in out.parent.iterdir()) == ["page"]

    # Into a folder that exists: the page it holds stays whole.
    before = (out / "index.html").read_bytes()
    full = cli(settings, "report", "--html", str(out), preexec=file_size_limit(4096))
    assert full.returncode == 7 and str(out) in error_line(full)
    assert (out / "index.html").read_bytes() == before and sorted(p.name for p in out.iterdir()) == ["index.html"]
