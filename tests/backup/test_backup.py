"""Backups that restore: `revbench backup` writes a snapshot of the warehouse and the survey store
with a manifest of checksums authenticated with REVBENCH_BACKUP__KEY (consistent while the survey
server answers, never half-written, one writer per folder); `revbench restore` checks it (an edited
backup with its sha256s recomputed, another key's, no key: refused), refuses live data it lacks without --force,
sets the live files aside, and keeps every acknowledged answer: the next ratings pull has each
exactly once."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import httpx
import pytest

from revbench.backup.manifest import MANIFEST, PARTIAL, manifest_hmac, snapshots
from revbench.backup.take import LOCK
from revbench.flows.backup import backup_flow
from revbench.errors import UsageError
from revbench.files import file_sha256
from revbench.flows.ratings import ratings_flow
from revbench.flows.survey import survey_flow
from revbench.replay.mailsink import MailSink
from revbench.schemas.tables import SURVEY_EVENTS, SURVEY_INVITATIONS, SURVEY_MESSAGES, SURVEY_OPT_OUTS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.warehouse.holder import write_waiting
from revbench.warehouse.store import SurveyStore
from tests.support.answers import (Answer, acknowledged, answer, latest, one_answer, pulled, ratings_of, same,
                                   store_logs_open)
from tests.support.cli import cli, one_line_error
from tests.support.common import run_cli, settings_env
from tests.support.survey import RULES, survey_server_process

RATE = re.compile(r"http://127\.0\.0\.1:9(/r/[A-Za-z0-9_.\-]+)")
BACKUP_KEY = "backup-key-of-these-tests-0123456789"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The shared settings with a backup key: no backup is written without one."""
    return settings.with_overrides(backup={"key": BACKUP_KEY})


@pytest.fixture
def survey_settings(survey_settings: Settings) -> Settings:
    """The shared survey settings with a backup key."""
    return survey_settings.with_overrides(backup={"key": BACKUP_KEY})


def every_answer_once(s: Settings, acked: list[Answer]) -> None:
    out = ratings_flow.fn(s, decide="keep")
    assert same(pulled(s), acked), out.survey_store
    assert ratings_of(s) == latest(acked)
    assert ratings_flow.fn(s, decide="keep").events_pulled == 0  # nothing counted twice on the next pull


def use_env(s: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)


def take_backup(folder: Path) -> Path:
    code, out, err = run_cli("backup", "--to", str(folder))
    assert code == 0, out + err
    return snapshots(folder)[-1]


def aside_folders(s: Settings) -> list[Path]:
    root = s.data_dir / "restore-set-aside"
    return sorted(root.iterdir()) if root.is_dir() else []


@pytest.fixture
def sent(survey_settings: Settings) -> tuple[Settings, list[tuple[str, list[str]]]]:
    """Round 1 sent; returns the settings and each invitation with its papers."""
    s = survey_settings.with_overrides(ratings=RULES, survey={"rate_limit_per_minute": 100_000})
    survey_flow.fn(s, round=1, approve="all", approver="tester")
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        invs = wh.survey.survey_invitations().sort("invitation_id")
    return s, [(i, list(p)) for i, p in invs.select("invitation_id", "paper_ids").iter_rows()]


def test_backup_more_answers_restore_pull_every_acknowledged_answer_once(sent, sink: MailSink, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    s, invs = sent
    use_env(s, monkeypatch)
    (i1, p1), (i2, p2) = invs[0], invs[1]
    store = SurveyStore(s.survey_store_path)
    epoch = store.epoch()
    acked = answer(store, [(i1, p1[0], 2), (i2, p2[0], 5)])
    ratings_flow.fn(s, decide="keep")  # pulled before the backup
    acked += answer(store, [(i1, p1[-1], 4)])  # given before the backup, pulled after it
    snap = take_backup(tmp_path / "backups")
    manifest = json.loads((snap / MANIFEST).read_text())
    assert manifest["survey_store"]["events"] == 3 and manifest["survey_store"]["identity"]["epoch"] == epoch
    assert manifest["warehouse"]["answers_pulled"] == 2 and manifest["warehouse"]["last_run"]["flow"] == "ratings"

    # Since the backup: answers through the survey server (each acknowledged by its 303 after the
    # commit), a pull into the live warehouse, and more answers nobody pulled yet.
    links = [RATE.findall(m.get_body(("plain",)).get_content())[2] for m in sink.messages[:3]]  # type: ignore[union-attr]
    with survey_server_process(s) as (base, _proc), httpx.Client(base_url=base, timeout=30) as http:
        before = store.max_event_id()
        assert [http.post(link).status_code for link in links] == [303, 303, 303]
    acked += acknowledged(store, before)
    ratings_flow.fn(s, decide="keep")
    acked += answer(store, [(i2, p2[0], 1), (i1, p1[0], None)])
    assert len(acked) == 8

    live_sha, live_events = file_sha256(s.warehouse_path), store.events_since()
    code, out, err = run_cli("restore", "--from", str(snap))
    line = one_line_error(code, out, err, 2, "runs the backup lacks", "4 answers pulled since", "--force",
                          "the live survey store holds 5 answers the backup lacks")
    assert "the latest: ratings run" in line and "nothing was restored" in line
    assert file_sha256(s.warehouse_path) == live_sha and store.events_since() == live_events and not aside_folders(s)

    code, out, err = run_cli("restore", "--from", str(snap), "--force")
    assert code == 0, out + err
    assert "merged: the live store keeps every answer it had" in " ".join(out.split())
    [aside] = aside_folders(s)
    assert file_sha256(aside / "warehouse.duckdb") == live_sha  # the live warehouse, kept as it was
    assert json.loads((aside / "restore.json").read_text())["forced"] is True
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:  # the snapshot's warehouse
        assert wh.runs.latest_runs(1)["run_id"][0] == manifest["warehouse"]["last_run"]["run_id"]
        assert wh.count(SURVEY_EVENTS) == 2
    assert store.epoch() == epoch and store.events_since() == live_events  # the store lost nothing, kept its ids
    every_answer_once(s, acked)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd (Linux)")
def test_the_survey_and_ratings_flows_leave_no_connection_to_the_store_open(sent) -> None:
    # A connection left to the garbage collector (Prefect keeps a task's parameters) keeps its
    # write-ahead log: collected later, while a restore reads a store damaged meanwhile, it
    # checkpoints that log into the damaged file and the restore reads the old store back.
    s, invs = sent
    assert store_logs_open(s.survey_store_path) == 0
    with SurveyStore(s.survey_store_path) as store:
        answer(store, [(invs[0][0], invs[0][1][0], 3)])
        store.opt_out(invs[1][0], "link")
    ratings_flow.fn(s, decide="keep")
    assert store_logs_open(s.survey_store_path) == 0


def test_a_lost_store_comes_back_from_the_backup_and_the_live_warehouse(sent, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    s, invs = sent
    use_env(s, monkeypatch)
    (i1, p1), (i2, p2), (i3, _p3) = invs[0], invs[1], invs[2]
    store = SurveyStore(s.survey_store_path)
    epoch = store.epoch()
    acked = answer(store, [(i1, p1[0], 3), (i2, p2[0], 4)])
    snap = take_backup(tmp_path / "backups")
    acked += answer(store, [(i1, p1[0], 5), (i2, p2[-1], 2)])
    store.opt_out(i3, "link")
    ratings_flow.fn(s, decide="keep")  # the live warehouse holds every answer and the opt-out
    store.close()
    # The store is damaged in place: only the live warehouse still holds the answers given since the backup.
    s.survey_store_path.write_bytes(b"this is not a SQLite file" * 400)
    for side in ("-wal", "-shm"):
        Path(f"{s.survey_store_path}{side}").unlink(missing_ok=True)

    code, out, err = run_cli("restore", "--from", str(snap))
    one_line_error(code, out, err, 2, "the live survey store cannot be read", "runs the backup lacks", "--force")
    code, out, err = run_cli("restore", "--from", str(snap), "--force")
    assert code == 0, out + err
    store = SurveyStore(s.survey_store_path)
    ident = store.identity()
    assert ident["origin"] == "renewed" and ident["renewed_from"] == epoch and ident["epoch"] != epoch
    assert f"epoch {epoch} renewed as {ident['epoch']}" in " ".join(out.split())
    [aside] = aside_folders(s)
    assert (aside / "survey.sqlite").read_bytes().startswith(b"this is not a SQLite file")  # moved, never deleted
    every_answer_once(s, acked)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:  # the opt-out given since the backup stays
        assert i3 in set(wh.read(SURVEY_OPT_OUTS)["invitation_id"])


def test_a_store_replaced_since_the_backup_gains_its_answers_above_every_id_and_the_latest_answer_counts(
        sent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s, invs = sent
    use_env(s, monkeypatch)
    (i1, p1), (i2, p2), (i3, _p3) = invs[0], invs[1], invs[2]
    store = SurveyStore(s.survey_store_path)
    acked = answer(store, [(i1, p1[0], 3), (i2, p2[0], 4)])
    ratings_flow.fn(s, decide="keep")
    acked += answer(store, [(i2, p2[-1], 1)])  # in the backup's store, never pulled before the restore
    snap = take_backup(tmp_path / "backups")
    store.close()
    moved = tmp_path / "moved"  # the store moved away; the survey server starts a new one (ids from 1 again)
    moved.mkdir()
    for side in ("", "-wal", "-shm"):
        if Path(f"{s.survey_store_path}{side}").exists():
            Path(f"{s.survey_store_path}{side}").rename(moved / f"survey.sqlite{side}")
    fresh = SurveyStore(s.survey_store_path)
    acked += answer(fresh, [(i1, p1[0], 5)])  # re-rated since the backup: the answer that counts
    fresh.opt_out(i3, "link")  # asked since the backup, pulled by nobody yet
    top = fresh.max_event_id()

    code, out, err = run_cli("restore", "--from", str(snap), "--force")
    assert code == 0, out + err
    assert "merged" in " ".join(out.split())
    added = fresh.events_since(top)
    assert sorted((e["invitation_id"], e["paper_id"], e["rating"]) for e in added) == sorted(
        [(i1, p1[0], 3), (i2, p2[0], 4), (i2, p2[-1], 1)])
    assert min(e["event_id"] for e in added) > top  # above every id handed out: the epoch's numbering holds
    every_answer_once(s, acked)
    assert ratings_of(s)[(i1, p1[0])] == 5
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert i3 in set(wh.read(SURVEY_OPT_OUTS)["invitation_id"])


def test_a_message_confirmed_sent_since_the_backup_stays_sent(sent, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    s, _invs = sent
    use_env(s, monkeypatch)
    with Warehouse.open(s.warehouse_path) as wh:
        message = wh.survey.survey_messages().sort("message_id")["message_id"][0]
        wh.survey.set_message_state(message, "unconfirmed")  # its reply was lost: a curator would be asked to resend it
    snap = take_backup(tmp_path / "backups")
    with Warehouse.open(s.warehouse_path) as wh:
        wh.survey.set_message_state(message, "sent")  # resent since, and confirmed
    code, out, err = run_cli("restore", "--from", str(snap), "--force")
    assert code == 0, out + err
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        states = dict(wh.read(SURVEY_MESSAGES).select("message_id", "state").iter_rows())
    assert states[message] == "sent"  # never offered for a resend again


def test_a_wave_sent_after_the_backup_is_neither_forgotten_nor_sent_twice(survey_settings: Settings, sink: MailSink,
                                                                          tmp_path: Path, monkeypatch) -> None:
    s = survey_settings.with_overrides(ratings=RULES)
    use_env(s, monkeypatch)
    snap = take_backup(tmp_path / "backups")  # the round built, nothing sent: the store does not exist yet
    assert json.loads((snap / MANIFEST).read_text())["survey_store"] is None
    survey_flow.fn(s, round=1, approve="all", approver="tester")
    sent_mail = len(sink.messages)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        (i1, p1), (i2, p2) = wh.survey.survey_invitations().sort("invitation_id").select("invitation_id", "paper_ids").rows()[:2]
        messages = wh.survey.survey_messages().height
    store = SurveyStore(s.survey_store_path)
    acked = answer(store, [(i1, p1[0], 4), (i2, p2[0], 2)])
    ratings_flow.fn(s, decide="keep")

    code, out, err = run_cli("restore", "--from", str(snap), "--force")
    assert code == 0, out + err
    assert "survey messages sent since (carried over)" in " ".join(out.split())
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.read(SURVEY_MESSAGES).height == messages and wh.read(SURVEY_INVITATIONS).height > 0
    every_answer_once(s, acked)  # the answers name invitations the restored warehouse knows
    survey_flow.fn(s, round=1, approve="all", approver="tester")
    assert len(sink.messages) == sent_mail  # nobody is mailed twice


def small_data(s: Settings) -> None:
    """A warehouse and a store with one answer: enough for the checks that need no flow."""
    one_answer(s, 3)


def test_a_changed_truncated_or_missing_backup_file_is_refused_by_name(settings: Settings, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(settings, monkeypatch)
    small_data(settings)
    snap = take_backup(tmp_path / "backups")
    live = {p: file_sha256(p) for p in (settings.warehouse_path, settings.survey_store_path)}

    def refused(*needles: str) -> None:
        code, out, err = run_cli("restore", "--from", str(snap))
        one_line_error(code, out, err, 2, *needles)
        assert {p: file_sha256(p) for p in live} == live and not aside_folders(settings)
        assert not list(settings.data_dir.glob(".restore-*"))  # nothing staged is left behind

    wh = snap / "warehouse.duckdb"
    original = wh.read_bytes()
    wh.write_bytes(original[:1000] + bytes([original[1000] ^ 1]) + original[1001:])  # one bit, same size
    refused(str(wh), "does not match its manifest", "nothing was restored")
    wh.write_bytes(original[: len(original) // 2])
    refused(str(wh), "truncated or changed")
    wh.unlink()
    refused(str(wh), "is missing from the backup")
    wh.write_bytes(original)

    store = snap / "survey.sqlite"
    store.write_bytes(store.read_bytes()[:-10])
    refused(str(store), "truncated or changed")

    manifest = snap / MANIFEST
    text = manifest.read_text()
    manifest.write_text(text.replace('"created_at": "', '"created_at": "2999'))
    refused(str(manifest), "does not verify with REVBENCH_BACKUP__KEY", "changed after the backup was written")
    manifest.write_text("{not json")
    refused(str(manifest), "cannot be read as JSON")


def test_restore_names_a_wrong_from(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(settings, monkeypatch)
    small_data(settings)
    folder = tmp_path / "backups"
    snap = take_backup(folder)
    # A snapshot being written has its manifest before its rename: its name alone refuses it.
    partial = folder / f".{snap.name}.4242.partial"
    shutil.copytree(snap, partial)
    for source, needles in [(tmp_path / "nowhere", ("does not exist",)), (snap / MANIFEST, ("is a file",)),
                            (folder, ("holds 1 backups", str(snap))), (tmp_path, ("is not a revbench backup",)),
                            (partial, ("still being written",))]:
        code, out, err = run_cli("restore", "--from", str(source))
        one_line_error(code, out, err, 2, *needles)

    # A manifest whose HMAC holds (made with the key) but whose file entry is not a size and a sha256.
    manifest = json.loads((snap / MANIFEST).read_text())
    manifest["files"]["survey.sqlite"] = "trust me"
    manifest["manifest_hmac"] = manifest_hmac(manifest, BACKUP_KEY.encode())
    (snap / MANIFEST).write_text(json.dumps(manifest))
    code, out, err = run_cli("restore", "--from", str(snap))
    one_line_error(code, out, err, 2, "lists survey.sqlite without its size and sha256", "nothing was restored")


def forge(snap: Path, old_format: bool = False) -> None:
    """The probe's forgery: an answer in the backup's survey store changed from 5 to 1, every
    sha256 in the manifest and its plain digest recomputed (as anyone can); ``old_format`` also
    drops the HMAC and marks the manifest as written before backups were keyed."""
    con = sqlite3.connect(snap / "survey.sqlite")
    with con:
        assert con.execute("UPDATE events SET rating = 1 WHERE rating = 5").rowcount == 1
    con.close()
    manifest = json.loads((snap / MANIFEST).read_text())
    for name, entry in manifest["files"].items():
        entry.update(bytes=(snap / name).stat().st_size, sha256=file_sha256(snap / name))
    if old_format:
        manifest = {k: v for k, v in manifest.items() if k not in ("manifest_hmac", "key_id")} | {"format_version": 1}
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    manifest["manifest_sha256"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    (snap / MANIFEST).write_text(json.dumps(manifest, indent=2))


@pytest.mark.parametrize("old_format", [False, True], ids=["hmac-kept", "hmac-stripped"])
def test_a_consistently_edited_backup_is_refused(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 old_format: bool) -> None:
    use_env(settings, monkeypatch)
    one_answer(settings, 5)
    snap = take_backup(tmp_path / "backups")
    forge(snap, old_format)
    # The store is lost: the moment a backup is restored, and nothing live stands in the way.
    settings.survey_store_path.unlink()
    code, out, err = run_cli("restore", "--from", str(snap))
    needle = "carries no HMAC" if old_format else "does not verify with REVBENCH_BACKUP__KEY"
    one_line_error(code, out, err, 2, str(snap), "REVBENCH_BACKUP__KEY", needle, "nothing was restored")
    assert not settings.survey_store_path.exists() and not aside_folders(settings)


def test_a_backup_is_refused_under_another_key_or_none_and_the_key_is_never_shown(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(settings, monkeypatch)
    small_data(settings)
    code, out, err = run_cli("backup", "--to", str(tmp_path / "backups"))
    assert code == 0, out + err
    snap = snapshots(tmp_path / "backups")[-1]
    assert BACKUP_KEY not in (snap / MANIFEST).read_text() + out + err
    live = {p: file_sha256(p) for p in (settings.warehouse_path, settings.survey_store_path)}

    monkeypatch.setenv("REVBENCH_BACKUP__KEY", "another-key-just-as-long-and-random")
    code, out, err = run_cli("restore", "--from", str(snap))
    one_line_error(code, out, err, 2, str(snap), "REVBENCH_BACKUP__KEY", "written with another backup key",
                   "nothing was restored")
    assert BACKUP_KEY not in out + err and "another-key" not in out + err

    monkeypatch.delenv("REVBENCH_BACKUP__KEY")
    code, out, err = run_cli("restore", "--from", str(snap))
    one_line_error(code, out, err, 2, "REVBENCH_BACKUP__KEY is not set", str(snap), "nothing was restored")
    assert {p: file_sha256(p) for p in live} == live and not aside_folders(settings)

    # No backup is written without a key (or with a short one), by the command or by the scheduled flow.
    code, out, err = run_cli("backup", "--to", str(tmp_path / "unkeyed"))
    one_line_error(code, out, err, 2, "REVBENCH_BACKUP__KEY is not set", str(tmp_path / "unkeyed"), "no backup was written")
    monkeypatch.setenv("REVBENCH_BACKUP__KEY", "short")
    code, out, err = run_cli("backup", "--to", str(tmp_path / "unkeyed"))
    one_line_error(code, out, err, 2, "REVBENCH_BACKUP__KEY is shorter than 16 characters")
    assert "short" not in out + err.replace("shorter", "")
    with pytest.raises(UsageError, match="REVBENCH_BACKUP__KEY is not set"):
        backup_flow.fn(settings.with_overrides(backup={"key": None}), to=tmp_path / "unkeyed")
    assert not (tmp_path / "unkeyed").exists()


def test_backups_accumulate_are_pruned_and_stay_among_their_own(settings: Settings, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(settings, monkeypatch)
    small_data(settings)
    folder = tmp_path / "backups"
    first = take_backup(folder)
    (folder / ".revbench-backup-20000101T000000Z.999.partial").mkdir()  # left by a backup killed midway
    for _ in range(3):
        code, out, err = run_cli("backup", "--to", str(folder), "--keep", "2")
        assert code == 0, err
    kept = snapshots(folder)
    assert len(kept) == 2 and first not in kept and kept[-1].name.startswith("revbench-backup-")
    assert f"Backup written: {kept[-1]} " in out  # the one just written is the newest kept, whatever the second
    assert sorted(p.name for p in folder.iterdir() if p not in kept) == [LOCK]  # the leftover is gone too
    assert "removed the older snapshot" in " ".join(out.split())

    (tmp_path / "a-file").write_text("x")
    code, out, err = run_cli("backup", "--to", str(tmp_path / "a-file"))
    one_line_error(code, out, err, 2, "is a file")
    (folder / "notes.txt").write_text("mine")
    code, out, err = run_cli("backup", "--to", str(folder))
    one_line_error(code, out, err, 2, "holds files that are not revbench backups (notes.txt)")
    code, out, err = run_cli("backup", "--to", str(kept[-1]))
    one_line_error(code, out, err, 2, "is itself a backup snapshot")
    assert snapshots(folder) == kept  # nothing written, nothing pruned
    (folder / "notes.txt").unlink()

    # A snapshot named in the future (a clock set back since, or one copied in): the one just
    # written still counts as the newest, and is never pruned by its own backup.
    future = folder / "revbench-backup-29990101T000000Z"
    kept[-1].rename(future)
    code, out, err = run_cli("backup", "--to", str(folder), "--keep", "1")
    assert code == 0, err
    [written] = snapshots(folder)
    assert written != future and written.name in " ".join(out.split()) and not future.exists()

    # A link named like a snapshot or like the lock is not ours: refused, and what it points at untouched.
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(written, elsewhere)
    (folder / "revbench-backup-20000101T000000Z").symlink_to(elsewhere)
    code, out, err = run_cli("backup", "--to", str(folder), "--keep", "1")
    one_line_error(code, out, err, 2, "holds files that are not revbench backups (revbench-backup-20000101T000000Z)")
    assert (elsewhere / MANIFEST).exists() and snapshots(folder) == [written]
    (folder / "revbench-backup-20000101T000000Z").unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (folder / LOCK).unlink()
    (folder / LOCK).symlink_to(victim)
    code, out, err = run_cli("backup", "--to", str(folder))
    one_line_error(code, out, err, 2, "not revbench backups")
    assert victim.read_text() == "precious" and snapshots(folder) == [written]
    (folder / LOCK).unlink()

    # The default folder, and nothing to back up at all.
    code, out, err = run_cli("backup")
    assert code == 0 and len(snapshots(settings.data_dir / "backups")) == 1, err
    monkeypatch.setenv("REVBENCH_DATA_DIR", str(tmp_path / "empty"))
    code, out, err = run_cli("backup", "--to", str(tmp_path / "other"))
    one_line_error(code, out, err, 2, "nothing to back up")
    assert not (tmp_path / "other").exists()  # refused before anything was written


HOLD = ("import sys; from revbench.warehouse import Warehouse; wh = Warehouse(sys.argv[1]); "
        "print('held', flush=True); sys.stdin.read()")


def hold_warehouse(path: Path) -> subprocess.Popen[str]:
    """Another process holding the warehouse, as a running flow does, until its stdin closes."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=60)


def test_logs_left_beside_missing_live_files_are_set_aside_not_replayed_into_the_restored_ones(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(settings, monkeypatch)
    small_data(settings)
    snap = take_backup(tmp_path / "backups")
    other = tmp_path / "other"  # another warehouse and store, each with a log not yet folded in
    other.mkdir()
    con = duckdb.connect(str(other / "w.duckdb"))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.execute("CHECKPOINT")
    con.execute("INSERT INTO t VALUES (1)")
    duck_wal = (other / "w.duckdb.wal").read_bytes()
    con.close()
    lite = sqlite3.connect(other / "s.sqlite", isolation_level=None)
    lite.execute("PRAGMA journal_mode=WAL")
    lite.execute("PRAGMA wal_autocheckpoint=0")
    lite.execute("CREATE TABLE events (x TEXT)")
    lite.executemany("INSERT INTO events VALUES (?)", [("x" * 500,)] * 200)
    lite_wal = (other / "s.sqlite-wal").read_bytes()
    lite.close()
    # The live files are gone (deleted by hand), their logs left behind.
    settings.warehouse_path.unlink()
    settings.survey_store_path.unlink()
    Path(f"{settings.warehouse_path}.wal").write_bytes(duck_wal)
    Path(f"{settings.survey_store_path}-wal").write_bytes(lite_wal)
    Path(f"{settings.survey_store_path}-shm").unlink(missing_ok=True)

    code, out, err = run_cli("restore", "--from", str(snap))
    assert code == 0, out + err
    with Warehouse.open(settings.warehouse_path, read_only=True) as wh:
        assert wh.schema_version() > 0
    assert [(r[1], r[2], r[3]) for r in store_rows(settings.survey_store_path)] == [("inv_1", "2609.00001", 3)]
    [aside] = aside_folders(settings)
    assert (aside / "warehouse.duckdb.wal").read_bytes() == duck_wal  # set aside, never deleted
    assert (aside / "survey.sqlite-wal").read_bytes() == lite_wal


KILLED = ("import os, sys; from revbench.warehouse import Warehouse; wh = Warehouse(sys.argv[1]); "
          "wh._exec(\"INSERT INTO runs (run_id, flow, status, started_at) VALUES ('killed-1', 'ingest', 'running', now())\"); "
          "os._exit(9)")


def test_a_warehouse_a_killed_run_left_with_its_write_ahead_log_is_backed_up_whole(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(settings, monkeypatch)
    small_data(settings)
    assert subprocess.run([sys.executable, "-c", KILLED, str(settings.warehouse_path)], check=False).returncode == 9
    assert Path(f"{settings.warehouse_path}.wal").stat().st_size > 0  # its last write is only in the log
    snap = take_backup(tmp_path / "backups")
    con = duckdb.connect(str(snap / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT run_id FROM runs").fetchall() == [("killed-1",)]
    finally:
        con.close()
    assert json.loads((snap / MANIFEST).read_text())["warehouse"]["runs"] == 1


def test_backup_and_restore_wait_for_a_busy_warehouse_then_refuse(settings: Settings, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(settings, monkeypatch)
    small_data(settings)
    snap = take_backup(tmp_path / "backups")
    monkeypatch.setenv("REVBENCH_WAREHOUSE__LOCK_WAIT_SECONDS", "1")
    holder = hold_warehouse(settings.warehouse_path)
    try:
        code, out, err = run_cli("restore", "--from", str(snap), "--force")
        one_line_error(code, out, err, 4, str(settings.warehouse_path), "is in use")
        code, out, err = run_cli("backup", "--to", str(tmp_path / "backups"))
        one_line_error(code, out, err, 4, "is in use")
    finally:
        release(holder)
    assert len(snapshots(tmp_path / "backups")) == 1 and not aside_folders(settings)

    # A run waiting for a curator let go of the warehouse, but would write into the restored one.
    write_waiting(settings.warehouse_path, {"run_id": "r-1", "flow": "ratings", "what": "a curator's decisions",
                                            "command": "revbench ratings --decide keep|drop"})
    code, out, err = run_cli("restore", "--from", str(snap), "--force")
    one_line_error(code, out, err, 4, "ratings run r-1 waits for a curator's decisions")


def backup_process(s: Settings, folder: Path, wait: float) -> subprocess.Popen[str]:
    return cli(s, "backup", "--to", str(folder), extra={"REVBENCH_WAREHOUSE__LOCK_WAIT_SECONDS": str(wait)}, wait=False)


def partial_appears(folder: Path, proc: subprocess.Popen[str]) -> Path:
    """The folder the backup process ``proc`` writes its snapshot into (its name ends in its pid)."""
    deadline = time.monotonic() + 120
    while True:
        found = [p for p in folder.iterdir() if PARTIAL.match(p.name) and p.name.endswith(f".{proc.pid}.partial")] \
            if folder.is_dir() else []
        if found:
            return found[0]
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


def test_an_interrupted_or_killed_backup_never_looks_complete_and_backups_take_turns(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(settings, monkeypatch)
    small_data(settings)
    folder = tmp_path / "backups"
    holder = hold_warehouse(settings.warehouse_path)  # each backup below stops at the warehouse's lock
    try:
        killed = backup_process(settings, folder, 120)
        partial = partial_appears(folder, killed)
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert snapshots(folder) == [] and partial.exists() and not (partial / MANIFEST).exists()
        code, out, err = run_cli("restore", "--from", str(partial))
        one_line_error(code, out, err, 2, "never finished")

        interrupted = backup_process(settings, folder, 120)
        partial_appears(folder, interrupted)  # the killed one's leftover is removed first
        interrupted.send_signal(signal.SIGINT)
        assert interrupted.wait(60) == 130
        assert snapshots(folder) == [] and not [p for p in folder.iterdir() if PARTIAL.match(p.name)]

        first = backup_process(settings, folder, 120)
        partial_appears(folder, first)
        second = backup_process(settings, folder, 1)
        out, err = second.communicate(timeout=120)
        one_line_error(second.returncode, out, err, 4, "another backup (pid", f"is writing into {folder}")
    finally:
        release(holder)
    assert first.wait(120) == 0, first.communicate()
    [snap] = snapshots(folder)
    manifest = json.loads((snap / MANIFEST).read_text())
    for name, entry in manifest["files"].items():
        assert file_sha256(snap / name) == entry["sha256"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([LOCK, snap.name])


def store_rows(path: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return con.execute("SELECT * FROM events ORDER BY event_id").fetchall()
    finally:
        con.close()


def test_a_backup_taken_while_the_survey_server_takes_answers_is_consistent(sent, sink: MailSink,
                                                                             tmp_path: Path) -> None:
    s, _invs = sent
    folder = tmp_path / "backups"
    pages: list[tuple[str, list[str]]] = []
    stop, errors, posted = threading.Event(), [], [0]
    with survey_server_process(s) as (base, proc), httpx.Client(base_url=base, timeout=30) as http:
        for m in sink.messages:  # each person opens their page from a rating link, then changes answers there
            first = RATE.findall(m.get_body(("plain",)).get_content())[0]  # type: ignore[union-attr]
            page = http.post(first).headers["location"].split("?")[0]
            pages.append((page, list(dict.fromkeys(re.findall(r'name="answer-([^"]+)"', http.get(page).text)))))

        def people() -> None:
            try:
                turn = 0
                while not stop.is_set():
                    for page, papers in pages:
                        form = {f"answer-{p}": str(2 + (turn + i) % 3) for i, p in enumerate(papers)}
                        assert http.post(page, data=form).status_code == 303
                        posted[0] += 1
                    turn += 1
            except BaseException as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

        def answers_go_on(n: int) -> None:
            """Wait for ``n`` more confirmed pages: what the counts below rely on is then ordered by
            the test, not by how fast this machine is."""
            start = posted[0]
            while posted[0] < start + n:
                assert answering.is_alive() and not errors, errors
                time.sleep(0.05)

        answering = threading.Thread(target=people)
        answering.start()
        try:
            for _ in range(2):
                answers_go_on(5)
                done = cli(s, "backup", "--to", str(folder))
                assert done.returncode == 0, done.stderr
            answers_go_on(1)  # at least one answer after the last snapshot
        finally:
            stop.set()
            answering.join(60)
        assert proc.poll() is None
    assert not errors
    live = store_rows(s.survey_store_path)
    taken = [store_rows(snap / "survey.sqlite") for snap in snapshots(folder)]
    assert len(taken) == 2 and 0 < len(taken[0]) < len(taken[1]) < len(live)
    for rows in taken:  # a consistent copy: the live store's events up to some moment, none half-written
        assert rows == live[: len(rows)]
        assert json.loads((folder / snapshots(folder)[taken.index(rows)] / MANIFEST).read_text())["survey_store"][
            "events"] == len(rows)
