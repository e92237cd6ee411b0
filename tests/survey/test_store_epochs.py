"""A survey store has an identity: answers acknowledged by a store that is later emptied, moved
aside, restored from an older backup or upgraded from before epochs all reach the warehouse,
each exactly once, and the run says what it found."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import duckdb
import polars as pl
import pytest

from revbench.flows.ratings import ratings_flow
from revbench.flows.refresh import plan_ratings
from revbench.flows.survey import survey_flow
from revbench.schemas.tables import SURVEY_EPOCHS, SURVEY_EVENTS, SURVEY_OPT_OUTS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.warehouse.store import SurveyStore
from tests.support.answers import answer, latest, pulled, ratings_of, same
from tests.support.common import run_cli, settings_env
from tests.support.migrations import warehouse_at
from tests.support.survey import RULES


@pytest.fixture
def sent(survey_settings: Settings) -> tuple[Settings, list[tuple[str, list[str]]]]:
    """Round 1 sent; returns the settings and each invitation with its papers."""
    s = survey_settings.with_overrides(ratings=RULES)
    survey_flow.fn(s, round=1, approve="all", approver="tester")
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        invs = wh.survey.survey_invitations().sort("invitation_id")
    return s, [(i, list(p)) for i, p in invs.select("invitation_id", "paper_ids").iter_rows()]


def plan(s: Settings) -> tuple[bool, str]:
    with Warehouse.open(s.warehouse_path) as wh:
        p = plan_ratings(s, wh)
    return p.run, p.reason


def replace_file(path: Path, with_file: Path | None) -> None:
    """Move the store aside (its WAL with it) and put ``with_file`` in its place, if any."""
    for suffix in ("", "-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.exists():
            side.rename(Path(f"{path}.aside{suffix}"))
    if with_file is not None:
        shutil.copyfile(with_file, path)


def backup(path: Path, to: Path) -> None:
    """A consistent copy of a live store (SQLite's online backup, WAL included)."""
    src, dst = sqlite3.connect(path), sqlite3.connect(to)
    with dst:
        src.backup(dst)
    src.close()
    dst.close()


def test_a_restored_backup_loses_no_answer_and_names_the_gap(sent, tmp_path: Path, monkeypatch) -> None:
    s, invs = sent
    (i1, p1), (i2, p2) = invs[0], invs[1]
    store = SurveyStore(s.survey_store_path)
    epoch = store.epoch()
    acked = answer(store, [(i1, p1[0], 2), (i1, p1[-1], 4), (i2, p2[0], 5)])  # events 1-3
    backup(s.survey_store_path, tmp_path / "backup.sqlite")
    acked += answer(store, [(i1, p1[0], 3), (i2, p2[0], None), (i2, p2[-1], 1), (i1, p1[-1], 5)])  # events 4-7
    first = ratings_flow.fn(s, decide="keep")
    assert first.events_pulled == 7 and "first pull from the survey store" in first.survey_store

    store.close()
    replace_file(s.survey_store_path, tmp_path / "backup.sqlite")
    store = SurveyStore(s.survey_store_path)
    assert store.epoch() == epoch and store.max_event_id() == 3  # the backup's own epoch, events 1-3
    # Answers after the restore get ids 4-9: 4-7 were other answers already pulled, 8-9 are above the mark.
    acked += answer(store, [(i1, p1[0], 1), (i2, p2[0], 4), (i1, p1[-1], 2), (i2, p2[-1], 3), (i1, p1[0], 5),
                            (i2, p2[-1], None)])
    assert store.max_event_id() == 9
    run, reason = plan(s)
    assert run and "no longer holds event 7" in reason

    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    code, out, err = run_cli("ratings", "--no-track", "--decide", "keep")
    assert code == 0, err
    renewed = store.epoch()
    assert renewed != epoch and store.identity() == {**store.identity(), "origin": "renewed", "renewed_from": epoch}
    line = (f"holds events up to 3 but 7 were pulled from it (epoch {epoch}): it was restored from an older backup; "
            f"events 4-7 are kept in the warehouse; its new epoch {renewed}: 6 new answers, 3 already known")
    assert line in " ".join(out.split()), out
    # Every acknowledged answer exactly once; the ratings are the latest answers in time order.
    assert len(acked) == 13 and same(pulled(s), acked)
    assert ratings_of(s) == latest(acked)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        marks = {e: h for e, h in wh.read(SURVEY_EPOCHS).select("epoch", "high_water").iter_rows()}
    assert marks == {epoch: 7, renewed: 9}

    # Nothing new: nothing pulled, nothing changed, the plan rests.
    assert plan(s) == (False, f"no new survey answers since event 9 of epoch {renewed}")
    again = ratings_flow.fn(s, decide="keep")
    assert again.events_pulled == 0 and f"survey store epoch {renewed}: 0 new answers" in again.survey_store
    assert same(pulled(s), acked) and ratings_of(s) == latest(acked)

    # The same old backup restored once more: recognised again, nothing counted twice.
    store.close()
    replace_file(s.survey_store_path, tmp_path / "backup.sqlite")
    store = SurveyStore(s.survey_store_path)
    acked += answer(store, [(i2, p2[0], 2)])
    out3 = ratings_flow.fn(s, decide="keep")
    assert out3.events_pulled == 1 and "holds events up to 3 but 7 were pulled" in out3.survey_store
    assert same(pulled(s), acked) and ratings_of(s) == latest(acked)


def skip_an_id(path: Path) -> None:
    """The store's next event id skipped, as SQLite's AUTOINCREMENT leaves a gap (a row deleted,
    an insert that took an id and failed): legitimate, and no answer lost."""
    con = sqlite3.connect(path)
    with con:
        con.execute("UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'events'")
    con.close()


def test_an_id_gap_in_a_restored_store_is_no_loss(sent, tmp_path: Path) -> None:
    s, invs = sent
    (i1, p1), (i2, p2) = invs[0], invs[1]
    store = SurveyStore(s.survey_store_path)
    epoch = store.epoch()
    acked = answer(store, [(i1, p1[0], 2), (i1, p1[-1], 4), (i2, p2[0], 5)])  # events 1-3
    skip_an_id(s.survey_store_path)  # no event 4
    acked += answer(store, [(i2, p2[-1], 1), (i1, p1[0], 3), (i2, p2[0], 4)])  # events 5-7
    backup(s.survey_store_path, tmp_path / "backup.sqlite")
    acked += answer(store, [(i1, p1[-1], 5), (i2, p2[-1], 2)])  # events 8-9
    assert [e["event_id"] for e in store.events_since(0)] == [1, 2, 3, 5, 6, 7, 8, 9]
    assert ratings_flow.fn(s, decide="keep").events_pulled == 8

    store.close()
    replace_file(s.survey_store_path, tmp_path / "backup.sqlite")  # the swap: 1-3 and 5-7, intact
    store = SurveyStore(s.survey_store_path)
    out = ratings_flow.fn(s, decide="keep")
    renewed = store.epoch()
    line = (f"holds events up to 7 but 9 were pulled from it (epoch {epoch}): it was restored from an older backup; "
            f"events 8-9 are kept in the warehouse; its new epoch {renewed}: 0 new answers, 6 already known")
    assert line in out.survey_store, out.survey_store
    assert same(pulled(s), acked) and ratings_of(s) == latest(acked)


def test_an_emptied_store_starts_a_new_epoch_and_keeps_answers_and_opt_outs(sent, monkeypatch) -> None:
    s, invs = sent
    (i1, p1), (i2, p2), (i3, _p3) = invs[0], invs[1], invs[2]
    store = SurveyStore(s.survey_store_path)
    published = [store.invitation(i) for i, _ in invs]
    old_epoch = store.epoch()
    acked = answer(store, [(i1, p1[0], 4), (i1, p1[-1], 2), (i2, p2[0], 3)])
    store.opt_out(i3, "link")
    first = ratings_flow.fn(s, decide="keep")  # the ratings run pulls opt-outs too, not only the next wave
    assert first.opt_outs_pulled == 1 and "; 1 new opt-outs" in first.survey_store

    store.close()
    replace_file(s.survey_store_path, None)  # moved aside, as the damaged-store message advises
    store = SurveyStore(s.survey_store_path)
    assert store.identity()["origin"] == "created" and store.epoch() != old_epoch
    store.publish_invitations([{k: v for k, v in inv.items()} for inv in published if inv])
    acked += answer(store, [(i1, p1[0], 5), (i2, p2[-1], 1), (i2, p2[0], None)])  # ids 1-3 again, a new store
    store.opt_out(i2, "one-click")
    # The newest id equals what was pulled from the old store: only the epoch tells them apart.
    run, reason = plan(s)
    assert store.max_event_id() == 3 and run and f"not pulled before (epoch {store.epoch()})" in reason

    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    code, out, err = run_cli("ratings", "--no-track", "--decide", "keep")
    assert code == 0, err
    assert (f"Survey store replaced since the last pull (epoch {store.epoch()} new): 3 new answers, 0 already known; "
            "1 new opt-outs") in " ".join(out.split()), out
    assert same(pulled(s), acked) and ratings_of(s) == latest(acked)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        opted = set(wh.read(SURVEY_OPT_OUTS)["invitation_id"])
        events = wh.read(SURVEY_EVENTS)
    assert opted == {i2, i3}  # the old store's opt-out stays, the new one's arrived
    assert dict(events.group_by("epoch").len().iter_rows()) == {old_epoch: 3, store.epoch(): 3}
    assert plan(s)[0] is False


def test_a_store_emptied_in_place_keeps_its_file_but_not_its_ids(sent) -> None:
    s, invs = sent
    (i1, p1), (i2, p2) = invs[0], invs[1]
    store = SurveyStore(s.survey_store_path)
    epoch = store.epoch()
    acked = answer(store, [(i1, p1[0], 4), (i2, p2[0], 2)])
    ratings_flow.fn(s, decide="keep")
    lite = sqlite3.connect(s.survey_store_path)
    with lite:  # every event deleted and the numbering reset: the same epoch, ids from 1 again
        lite.execute("DELETE FROM events")
        lite.execute("DELETE FROM sqlite_sequence")
    lite.close()
    acked += answer(store, [(i1, p1[0], 1)])
    out = ratings_flow.fn(s, decide="keep")
    assert out.survey_store == (
        f"the survey store holds none of the events up to 2 pulled from it (epoch {epoch}): it was emptied or restored "
        f"from an older backup; everything pulled from it is kept in the warehouse; its new epoch {store.epoch()}: "
        "1 new answers, 0 already known")
    assert same(pulled(s), acked) and ratings_of(s) == latest(acked)


def test_a_store_and_warehouse_from_before_epochs_count_nothing_twice(sent) -> None:
    s, invs = sent
    (i1, p1), (i2, p2) = invs[0], invs[1]
    store = SurveyStore(s.survey_store_path)
    acked = answer(store, [(i1, p1[0], 4), (i2, p2[0], 2), (i1, p1[0], 1)])
    ratings_flow.fn(s, decide="keep")
    store.close()
    # Back to how both looked before schema 12: rows without epoch or digest, a store without meta.
    con = duckdb.connect(str(s.warehouse_path))
    con.execute("UPDATE survey_events SET epoch = 'legacy', digest = NULL")
    con.execute("UPDATE ratings SET epoch = NULL")
    con.execute("DELETE FROM survey_epochs")
    con.close()
    lite = sqlite3.connect(s.survey_store_path)
    with lite:
        lite.execute("DROP TABLE meta")
    lite.close()

    store = SurveyStore(s.survey_store_path)  # the first open after the upgrade gives it its epoch
    assert store.identity()["origin"] == "upgraded"
    acked += answer(store, [(i2, p2[-1], 5)])
    out = ratings_flow.fn(s, decide="keep")
    assert out.survey_store == f"the survey store got its epoch {store.epoch()} on upgrade: 1 new answers, 3 already known"
    assert out.events_pulled == 1 and same(pulled(s), acked) and ratings_of(s) == latest(acked)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        ev = wh.read(SURVEY_EVENTS)
    assert ev["digest"].null_count() == 0 and dict(ev.group_by("epoch").len().iter_rows()) == {"legacy": 3, store.epoch(): 1}
    again = ratings_flow.fn(s, decide="keep")
    assert again.events_pulled == 0 and "0 new answers, 0 already known after event 4" in again.survey_store


def test_migration_12_keys_survey_events_by_epoch_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = warehouse_at(path, 11)
    con.execute("""INSERT INTO survey_events (event_id, invitation_id, paper_id, rating, skipped, source, created_at,
                   reviewer_id, disposition, run_id, pulled_at)
                   VALUES (1, 'i1', '2609.00001', 4, false, 'click', '2026-09-01 12:00:00.000001+00', 'a1', 'latest',
                           'r1', now()),
                          (2, 'i1', '2609.00002', NULL, true, 'form', '2026-09-01 12:00:01+00', 'a1', 'skip', 'r1', now())""")
    con.close()
    with Warehouse.open(path) as wh:
        ev = wh.read(SURVEY_EVENTS)
        assert ev.select("epoch", "event_id", "rating").rows() == [("legacy", 1, 4), ("legacy", 2, None)]
        # The key is (epoch, event_id): a new store's event 1 is another event.
        wh.upsert(SURVEY_EVENTS, ev.head(1).with_columns(pl.lit("abc123").alias("epoch")))
        assert wh.count(SURVEY_EVENTS) == 3
        assert wh.ratings.survey_epoch_marks() == {"legacy": (2, None), "abc123": (1, None)}


def test_the_current_answer_is_the_latest_by_time_not_the_highest_id(tmp_path: Path) -> None:
    # A restore merges a backup's older answers into the live store with new, higher ids; the
    # page, reminders and a resubmitted page must still see the person's last answer.
    store = SurveyStore(tmp_path / "survey.sqlite")
    store.publish_invitations([{"invitation_id": "inv-1", "round": 1, "papers": [{"paper_id": "p1"}, {"paper_id": "p2"}]}])
    assert store.record_answers("inv-1", {"p1": 5, "p2": None}) == 2
    with sqlite3.connect(store.path) as con:  # what the merge writes: an answer given before, a later id
        con.execute("INSERT INTO events (invitation_id, paper_id, rating, skipped, source, created_at) "
                    "VALUES ('inv-1', 'p1', 3, 0, 'form', '2000-01-01T00:00:00.000000+00:00')")
    assert store.current("inv-1") == {"p1": 5, "p2": None}
    assert store.answered()["inv-1"] == {"p1": 5, "p2": None}
    assert store.record_answers("inv-1", {"p1": 5, "p2": None}) == 0  # unchanged: nothing new recorded
    assert store.record_answers("inv-1", {"p1": 3, "p2": None}) == 1  # a real change still counts
    assert store.current("inv-1")["p1"] == 3
