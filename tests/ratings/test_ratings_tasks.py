"""The ratings flow's frame work on its own: new events by digest, the event history, the epoch
row, flag rows on record, the flag list and the counts a run reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl

from revbench.schemas.tables import FLAG_DECISIONS, RATING_FLAGS, SURVEY_EPOCHS
from revbench.tasks import ratings as r

T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 9, 2, 12, 0, tzinfo=UTC)


def store_rows(*answers: tuple[int, str, str, int]) -> list[dict]:
    """(event id, invitation, paper, rating) as the survey store hands them out."""
    return [{"event_id": e, "invitation_id": i, "paper_id": p, "rating": v, "skipped": 0, "source": "click",
             "created_at": f"2026-09-01T12:00:0{e}+00:00"} for e, i, p, v in answers]


def test_fresh_events_are_new_answers_each_once() -> None:
    read = r.store_events(store_rows((1, "a", "p1", 3), (2, "a", "p2", 4)), "e1")
    again = r.store_events(store_rows((1, "a", "p1", 3)), "e2")  # the same answer under another epoch
    both = pl.concat([read, again])
    fresh = r.fresh_events(both, known={read["digest"][1]})
    assert fresh["event_id"].to_list() == [1] and fresh["epoch"].to_list() == ["e1"]
    assert r.fresh_events(read, known=set(read["digest"])).height == 0


def test_the_event_history_keeps_old_rows_and_stamps_new_ones() -> None:
    old = r.store_events(store_rows((1, "a", "p1", 3)), "e1").with_columns(
        pl.lit("run0").alias("run_id"), pl.lit(T0).alias("pulled_at"))
    incoming = r.store_events(store_rows((2, "a", "p2", 4)), "e1")
    history = r.event_history(old, incoming, "run1", T1)
    assert history.columns == [*r.EVENT_COLUMNS, "run_id", "pulled_at"]
    assert history.select("event_id", "run_id", "pulled_at").rows() == [(1, "run0", T0), (2, "run1", T1)]


def test_dispositions_count_events_by_what_became_of_them() -> None:
    resolved = pl.DataFrame({"disposition": ["latest", "superseded", "latest", "skip"]})
    assert r.dispositions(resolved) == {"latest": 2, "superseded": 1, "skip": 1}


def test_the_epoch_row_moves_the_mark_to_the_newest_event_read() -> None:
    ident = {"epoch": "e1", "origin": "created", "renewed_from": None, "created_at": "2026-08-01T00:00:00+00:00"}
    read = r.store_events(store_rows((3, "a", "p1", 3), (5, "a", "p2", 4)), "e1")
    found = r.PullFound(epoch="e1", origin="created", after=2, new=2, known=0)
    earlier = SURVEY_EPOCHS.conform(pl.DataFrame([{"epoch": "e1", "high_water": 2, "origin": "created", "first_pulled_at": T0,
                                                   "last_pulled_at": T0, "new_events": 2, "known_events": 0,
                                                   "summary": ""}]))
    row = r.epoch_row(ident, read, found, earlier, "old-digest", T1, "run1").row(0, named=True)
    assert row["high_water"] == 5 and row["high_water_digest"] == read["digest"][1]
    assert row["first_pulled_at"] == T0 and row["last_pulled_at"] == T1 and row["summary"] == found.line()
    assert row["store_created_at"] == datetime(2026, 8, 1, tzinfo=UTC)
    # Nothing read: the mark stays where it was, with its digest; a first pull starts now.
    empty = r.epoch_row(ident, read.head(0), found, earlier.head(0), "old-digest", T1, "run1").row(0, named=True)
    assert (empty["high_water"], empty["high_water_digest"], empty["first_pulled_at"]) == (2, "old-digest", T1)


def test_a_store_that_lost_events_is_reported_by_the_ids_it_no_longer_holds() -> None:
    pulled = r.store_events(store_rows(*[(e, "a", f"p{e}", 3) for e in (1, 2, 3, 5, 6, 7, 8, 9)]), "e1")
    known = set(pulled["digest"].to_list())
    # Restored from a backup of events 1-7: id 4 never handed out (a gap, no answer), 8-9 lost.
    restored = r.store_events(store_rows(*[(e, "a", f"p{e}", 3) for e in (1, 2, 3, 5, 6, 7)]), "e2")
    held, missing = r.lost_events(restored, pulled, known, "e1", 9)
    assert (held, missing) == (7, (8, 9))
    line = r.PullFound("e2", "renewed", 0, 0, 6, lost_from="e1", held_up_to=held, pulled_up_to=9, missing=missing).line()
    assert "holds events up to 7 but 9 were pulled from it (epoch e1): it was restored from an older backup; " \
           "events 8-9 are kept in the warehouse" in line, line
    # Edited by hand as well: event 2 taken out, id 7 given to another answer.
    edited = restored.filter(~pl.col("event_id").is_in([2, 7])).vstack(r.store_events(store_rows((7, "b", "p7", 1)), "e2"))
    held, missing = r.lost_events(edited, pulled, known, "e1", 9)
    assert (held, missing) == (6, (2, 7, 8, 9))
    line = r.PullFound("e2", "renewed", 0, 1, 4, lost_from="e1", held_up_to=held, pulled_up_to=9, missing=missing).line()
    assert "holds events up to 6 but not 4 of the events up to 9 pulled from it (epoch e1)" in line, line
    assert "events 2, 7-9 are kept in the warehouse" in line, line
    assert r.id_ranges((1, 2, 3, 5, 8, 9)) == "1-3, 5, 8-9" and r.id_ranges((1, 3, 5), most=2) == "1, 3, … (3 events)"


def flags_of(*rows: tuple[str, str]) -> pl.DataFrame:
    """(flag id, evidence hash) flags on alice's p1 and p2."""
    return pl.DataFrame([{"flag_id": f, "rule": "straight_lining", "subject": "invitation", "reviewer_id": "alice",
                          "invitation_id": "inv_a", "paper_ids": ["p1", "p2"], "evidence": json.dumps({"n": 2}),
                          "evidence_hash": h} for f, h in rows], schema=r.FLAG_SCHEMA)


def test_flag_rows_keep_first_seen_times_and_retire_flags_that_no_longer_fire() -> None:
    known = RATING_FLAGS.conform(flags_of(("f1", "h1"), ("f2", "h2")).with_columns(
        pl.lit(True).alias("active"), pl.lit("run0").alias("run_id"), pl.lit(T0).alias("flagged_at")))
    rows = r.flag_rows(flags_of(("f1", "h1"), ("f3", "h3")), known, "run1", T1).sort("flag_id")
    assert rows.select("flag_id", "active", "flagged_at").rows() == [("f1", True, T0), ("f2", False, T0), ("f3", True, T1)]
    assert rows.filter(pl.col("active"))["run_id"].to_list() == ["run1", "run1"]
    # A flag whose evidence changed is flagged again, now.
    assert r.flag_rows(flags_of(("f1", "h9")), known, "run1", T1).filter(pl.col("flag_id") == "f1")["flagged_at"][0] == T1


def test_the_flag_list_has_parsed_evidence_and_the_decision() -> None:
    decisions = pl.DataFrame([{"flag_id": "f1", "evidence_hash": "h1", "decision": "drop", "reason": "", "decided_by": "ada",
                               "decided_at": T0, "run_id": "run0"}], schema=FLAG_DECISIONS.polars_schema)
    listed = r.flag_list(flags_of(("f1", "h1"), ("f2", "h2")), decisions)
    assert [(f["flag_id"], f["evidence"], f["decision"], f["decided_by"]) for f in listed] == [
        ("f1", {"n": 2}, "drop", "ada"), ("f2", {"n": 2}, None, None)]


def test_the_outcome_counts_events_ratings_and_tuples() -> None:
    ratings = pl.DataFrame({"reviewer_id": ["a", "b", "c", "d"], "status": ["kept", "kept", "dropped", "pending"]})
    tuples = pl.DataFrame({"kind": ["paper_centric"], "anchor_id": ["p"]})
    o = r.outcome({"latest": 4, "superseded": 2, "skip": 1, "unknown_paper": 3}, ratings, tuples)
    assert (o.duplicates, o.skips, o.unknown_invitation, o.unknown_paper, o.invalid_rating) == (2, 1, 0, 3, 0)
    assert (o.ratings, o.kept, o.dropped, o.pending) == (4, 2, 1, 1)
    assert (o.paper_centric_tuples, o.reviewer_centric_tuples) == (1, 0)
