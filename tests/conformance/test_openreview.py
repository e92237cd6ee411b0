"""OpenReview expertise data (openreview/openreview-expertise's documented layout): the
``submissions/<id>.jsonl`` folder and ``archives/~<reviewer>.jsonl`` profiles, read by the real
importer and evaluated through the command line. Years come from ``content.year``, ``year``,
``pdate``, ``cdate``, ``mdate`` in that order; blank titles are dropped and counted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from revbench.errors import InputError
from revbench.evaluation.importers.openreview import load_openreview, read_openreview_notes
from tests.support.common import run_cli
from tests.support.conformance import REAL, expected, needs_samples

pytestmark = needs_samples
SAMPLES = REAL / "openreview"


def dataset(tmp: Path, ratings: str | None = None) -> Path:
    """The real samples as one dataset (folder layout), with ``ratings.csv`` when given."""
    d = tmp / "openreview"
    shutil.copytree(SAMPLES, d)
    if ratings is not None:
        (d / "ratings.csv").write_text(ratings)
    return d


def test_every_sample_file_has_expected_values() -> None:
    files = {str(p.relative_to(SAMPLES)) for p in SAMPLES.rglob("*.jsonl")}
    assert files == {k for k in expected("openreview") if not k.startswith("_")}


def test_each_sample_reads_with_ids_titles_years_and_blank_titles_dropped(tmp_path: Path) -> None:
    submissions, profiles, dropped = read_openreview_notes(dataset(tmp_path))
    want = {k: v for k, v in expected("openreview").items() if not k.startswith("_")}
    got_subs = {r["paper_id"]: r for r in submissions.to_dicts()}
    for name, exp in want.items():
        if name.startswith("submissions/"):
            for n in exp["notes"]:
                row = got_subs[n["id"]]
                assert (row["title"], row["year"]) == (n["title"], n["year"]), name
        else:
            mine = profiles.filter(profiles["reviewer_id"] == exp["reviewer"])
            assert [(r["paper_id"], r["title"], r["year"]) for r in mine.to_dicts()] == [
                (n["id"], n["title"], n["year"]) for n in exp["notes"]], name
            assert not set(exp["dropped"]) & set(mine["paper_id"].to_list()), name
    assert set(got_subs) == {n["id"] for k, v in want.items() if k.startswith("submissions/") for n in v["notes"]}
    blank = sum(len(v["dropped"]) for v in want.values())
    assert dropped == {"archives: blank title": blank} and blank == 2


def test_the_year_comes_from_the_best_source_first(tmp_path: Path) -> None:
    d = dataset(tmp_path)
    ms = {"2019": 1_560_000_000_000, "2021": 1_620_000_000_000, "2023": 1_690_000_000_000}
    notes = [
        {"id": "v2", "content": {"title": {"value": "API v2"}, "year": {"value": 2018}}, "pdate": ms["2019"]},
        {"id": "top", "year": "2017", "content": {"title": "top-level year"}, "pdate": ms["2019"]},
        {"id": "pdate", "content": {"title": "p"}, "pdate": ms["2019"], "cdate": ms["2021"], "mdate": ms["2023"]},
        {"id": "cdate", "content": {"title": "c"}, "pdate": None, "cdate": ms["2021"], "mdate": ms["2023"]},
        {"id": "mdate", "content": {"title": "m"}, "mdate": ms["2023"]},
        {"id": "junk", "content": {"title": "j"}, "mdate": "yesterday", "cdate": True},
    ]
    (d / "archives" / "~Year_Tester1.jsonl").write_text("\n".join(json.dumps(n) for n in notes) + "\n")
    _, profiles, _ = read_openreview_notes(d)
    years = dict(profiles.filter(profiles["reviewer_id"] == "Year_Tester1").select("paper_id", "year").iter_rows())
    assert years == {"v2": 2018, "top": 2017, "pdate": 2019, "cdate": 2021, "mdate": 2023, "junk": None}


def test_both_layouts_give_the_same_submissions(tmp_path: Path) -> None:
    folder = dataset(tmp_path / "a")
    single = dataset(tmp_path / "b")
    notes = {p.stem: json.loads(p.read_text()) for p in (single / "submissions").glob("*.jsonl")}
    shutil.rmtree(single / "submissions")
    (single / "submissions.json").write_text(json.dumps(notes))
    a, b = read_openreview_notes(folder)[0], read_openreview_notes(single)[0]
    assert a.sort("paper_id").equals(b.sort("paper_id")) and a.height == 6


def test_neither_layout_is_one_line_naming_both(tmp_path: Path) -> None:
    d = dataset(tmp_path)
    shutil.rmtree(d / "submissions")
    with pytest.raises(InputError, match=r"no submissions\.json or submissions/ folder"):
        read_openreview_notes(d)
    (d / "submissions").mkdir()
    (d / "submissions" / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(InputError, match=r"bad\.jsonl line 1"):
        read_openreview_notes(d)


RATINGS = """reviewer,paper,rating
~Jackson_Upton9,GhJKSuij,4
~Jackson_Upton9,KAeiq76y,2
~Jerald_Hackett2,XMA5Kr4A,5
~Jerald_Hackett2,qeFU8O7D,1
~Loreta_Tremblay3,sUPXdz06,3
~Loreta_Tremblay3,duplicate,4
~Loreta_Tremblay3,gone,2
"""


def test_a_folder_layout_dataset_evaluates_with_years(tmp_path: Path) -> None:
    d = dataset(tmp_path, RATINGS)
    bench = load_openreview(d)
    assert bench.draws[0]["year"].drop_nulls().to_list() == [2009] * 8  # mdate 1234567890 in seconds
    assert bench.dropped == {"archives: blank title": 2, "ratings: submission dropped or missing": 1}
    out_json = tmp_path / "results.json"
    code, out, err = run_cli("evaluate", "-b", f"openreview={d}", "-s", "tpms", "--bootstrap", "0",
                             "--json-out", str(out_json))
    assert code == 0, out + err
    said = " ".join(out.split())  # the console wraps lines at its width
    assert "openreview: left out 2 (archives: blank title), 1 (ratings: submission dropped or missing)" in said
    rows = json.loads(out_json.read_text())
    assert {r["benchmark"] for r in rows} >= {"openreview"} and any(r["scorer"] == "tpms" for r in rows)
