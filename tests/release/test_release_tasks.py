"""The release flow's computations on their own: the next version, whether anything changed,
the counts of the manifest and card, and the files it lists."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from revbench.files import file_sha256
from revbench.schemas.release import RELEASE_TABLES
from revbench.tasks import release as tasks


def test_the_next_version_follows_the_highest_vn() -> None:
    assert tasks.next_version([]) == "v1"
    assert tasks.next_version(["v2", "v10", "v3-rc", "vx", "v9"]) == "v11"


def test_changed_sees_any_row_added_or_removed() -> None:
    assert not tasks.changed({"pointwise": {"added": [], "removed": []}})
    assert tasks.changed({"pointwise": {"added": [], "removed": [("r", "p", 3)]}, "papers": {"added": [], "removed": []}})


def test_size_categories() -> None:
    assert [tasks.size_category(n) for n in (0, 999, 1000, 10_000, 100_000)] == [
        "n<1K", "n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M"]


def test_release_counts_cover_events_ratings_flags_and_every_table() -> None:
    events = pl.DataFrame({"disposition": ["latest", "latest", "superseded", "skip"]})
    ratings = pl.DataFrame({"status": ["kept", "kept", "dropped"]})
    tables = {t.name: pl.DataFrame({"x": list(range(i))}) for i, t in enumerate(RELEASE_TABLES)}
    counts = tasks.release_counts(events, ratings, 2, tables)
    assert {k: counts[k] for k in ("events", "ratings", "duplicates", "skips", "flags", "kept", "dropped")} == {
        "events": 4, "ratings": 3, "duplicates": 1, "skips": 1, "flags": 2, "kept": 2, "dropped": 1}
    assert all(counts[t.name] == i for i, t in enumerate(RELEASE_TABLES))
    assert tasks.release_counts(events.head(0), ratings, 0, tables)["duplicates"] == 0


def test_file_docs_and_the_listed_files(tmp_path: Path) -> None:
    rows = {"data/pointwise.parquet": 3, "evaluations_pc.json": 1}
    docs = tasks.file_docs(rows)
    assert [(d["path"], d["rows"]) for d in docs] == sorted(rows.items()) and all(d["doc"] for d in docs)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "pointwise.parquet").write_bytes(b"abc")
    (tmp_path / "README.md").write_text("card")
    listed = tasks.listed_files(tmp_path, rows)
    assert [(f["path"], f["rows"], f["bytes"]) for f in listed] == [("README.md", None, 4), ("data/pointwise.parquet", 3, 3)]
    assert listed[1]["sha256"] == file_sha256(tmp_path / "data" / "pointwise.parquet")


def test_written_addresses_become_a_mark_and_metrics_stay() -> None:
    from revbench.tasks.release import without_addresses

    df = pl.DataFrame({"title": ["Hits@10.In addition R@1.On COCO and mAP@0.5.We report"], "abstract": [
        "Correspondence to: Mark Chen <mark@openai.com>, Jerry Tworek <jt@lab.co.uk>, {ada, bo}@cs.cmu.edu."]})
    out = without_addresses(df, ("title", "abstract"))
    assert out["title"][0] == "Hits@10.In addition R@1.On COCO and mAP@0.5.We report"  # the audit's own rule
    assert out["abstract"][0] == "Correspondence to: Mark Chen [email], Jerry Tworek [email], [email]."


def test_an_audit_stopped_by_a_written_address_says_how_to_redact_it() -> None:
    from revbench.flows.release import PrivacyAuditFailed
    from revbench.tasks.privacy import AuditHit

    hit = AuditHit("reviewers", 7, "publications[0].abstract", "email", "ada@lab.org", "plain")
    assert "REVBENCH_RELEASE__REDACT_ADDRESSES=true" in str(PrivacyAuditFailed([hit]))
    name = AuditHit("papers", 1, "abstract", "person_name", "Ada Byron", "first_last", "author_x")
    said = str(PrivacyAuditFailed([name]))
    assert "REVBENCH_RELEASE__REDACT_NAMES=true" in said and "REDACT_ADDRESSES" not in said
    token = AuditHit("papers", 2, "abstract", "survey_token", "inv_0123456789abcdef0123")
    said = str(PrivacyAuditFailed([token]))
    assert "REDACT" not in said and "revbench ratings --decide drop" in said
