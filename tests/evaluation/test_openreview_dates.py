"""OpenReview dates in either unit: OpenReview writes milliseconds since the epoch,
openreview-expertise's own files seconds (``"mdate": 1234567890``). The importer reads a date by
its size, and refuses one that is no plausible date in either unit, naming the file and line;
never a silent 1970."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from revbench.errors import InputError
from revbench.evaluation.importers.openreview import read_openreview_notes
from tests.support.common import run_cli
from tests.support.evaluation import write_openreview

# 2009-02-13T23:31:30Z, 2021-05-03T00:00:00Z, 2023-07-22T04:26:40Z: each in seconds and in milliseconds.
SECONDS = {"2009": 1_234_567_890, "2021": 1_620_000_000, "2023": 1_690_000_000}


def _years(tmp: Path, notes: list[dict]) -> dict[str, int | None]:
    d = write_openreview(tmp / "or")
    (d / "archives" / "~Dates1.jsonl").write_text("\n".join(json.dumps(n) for n in notes) + "\n")
    _, profiles, _ = read_openreview_notes(d)
    return dict(profiles.filter(profiles["reviewer_id"] == "Dates1").select("paper_id", "year").iter_rows())


def test_seconds_and_milliseconds_give_the_same_year(tmp_path: Path) -> None:
    notes = []
    for unit, scale in (("s", 1), ("ms", 1000)):
        y2009, y2021, y2023 = (SECONDS[y] * scale for y in ("2009", "2021", "2023"))
        notes += [
            {"id": f"mdate-{unit}", "content": {"title": "m"}, "mdate": y2009},
            {"id": f"cdate-{unit}", "content": {"title": "c"}, "cdate": y2021, "mdate": y2023},
            {"id": f"tcdate-{unit}", "content": {"title": "t"}, "tcdate": y2021, "mdate": y2023},
            {"id": f"pdate-{unit}", "content": {"title": "p"}, "pdate": float(y2023), "cdate": y2021},
        ]
    notes.append({"id": "unset", "content": {"title": "u"}, "pdate": 0, "mdate": SECONDS["2009"]})  # 0: no date
    notes.append({"id": "old", "content": {"title": "o"}, "pdate": -315_619_200_000})  # 1960 in milliseconds
    years = _years(tmp_path, notes)
    for unit in ("s", "ms"):
        assert (years[f"mdate-{unit}"], years[f"cdate-{unit}"], years[f"tcdate-{unit}"], years[f"pdate-{unit}"]) == (
            2009, 2021, 2021, 2023), unit
    assert years["unset"] == 2009 and years["old"] == 1960


@pytest.mark.parametrize(("value", "falls"), [
    (1_234_567_890_000_000, "beyond any calendar"),  # microseconds: read as milliseconds, 39,000 years on
    (20_000_000_000, "in 2603"),               # seconds too large for any paper
    (1_234_567, "in 1970"),                    # a fortnight after the epoch: a placeholder or a unit error
    (-5_000_000_000_000, "in 1811"),           # before any paper
    (1e300, "beyond any calendar"),
])
def test_an_implausible_date_is_one_line_naming_the_file_and_line(tmp_path: Path, value: float, falls: str) -> None:
    notes = [{"id": "fine", "content": {"title": "f"}, "mdate": SECONDS["2021"]},
             {"id": "bad", "content": {"title": "b"}, "cdate": value}]
    with pytest.raises(InputError) as exc:
        _years(tmp_path, notes)
    said = str(exc.value)
    assert "\n" not in said and "~Dates1.jsonl line 2: cdate" in said and falls in said, said


def test_the_command_line_refuses_it_in_one_line(tmp_path: Path) -> None:
    d = write_openreview(tmp_path / "or")
    (d / "archives" / "~Dates1.jsonl").write_text(json.dumps({"id": "x", "content": {"title": "x"}, "mdate": 1_234_567}) + "\n")
    code, out, err = run_cli("evaluate", "-b", f"openreview={d}", "-s", "tpms", "--bootstrap", "0")
    assert code == 2, out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "~Dates1.jsonl line 1: mdate 1234567 is not a date" in lines[0], err
