"""What a world cannot be built from is refused before any work, in one line that names the file
and the item or row: the strict importers, and ``revbench demo --world`` on the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from revbench.errors import InputError
from revbench.evaluation.importers.registry import load_benchmark
from revbench.settings import Settings
from tests.support.cli import cli, error_line, one_line_error, write_gold
from tests.support.common import run_cli
from tests.support.rebuild import copy_sample, tiny_items, write_lrbench

Items = list[dict[str, Any]]


def _shared_pair(items: Items) -> tuple[int, str, int]:
    """The first item that rates a (reviewer, paper) an earlier item rates too: its index, the side
    and the earlier item's index."""
    seen: dict[tuple[str, str], int] = {}
    for i, t in enumerate(items):
        for side in ("positive", "negative"):
            key = (t[side]["author_id"], t["anchor"]["paper_id"])
            if key in seen and seen[key] != i:
                return i, side, seen[key]
            seen.setdefault(key, i)
    raise AssertionError("no reviewer rates one paper in two items")


def _drop_title(items: Items) -> tuple[int, str]:
    del items[1]["anchor"]["paper_title"]
    return 1, "anchor.paper_title is missing or empty"


def _blank_title(items: Items) -> tuple[int, str]:
    items[2]["anchor"]["paper_title"] = "  "
    return 2, "anchor.paper_title is missing or empty"


def _drop_score(items: Items) -> tuple[int, str]:
    del items[2]["positive"]["score"]
    return 2, "positive.score"


def _score_seven(items: Items) -> tuple[int, str]:
    items[0]["negative"]["score"] = 7
    return 0, "negative.score: rating 7 is outside the benchmark's 1-5 scale"


def _duplicate(items: Items) -> tuple[int, str]:
    items.append(json.loads(json.dumps(items[1])))
    return len(items) - 1, "the same tuple as item 1"


def _no_publications(items: Items) -> tuple[int, str]:
    items[1]["positive"]["papers"] = []
    return 1, f"positive.papers is missing or an empty publication list (reviewer {items[1]['positive']['author_id']!r})"


def _untitled_publication(items: Items) -> tuple[int, str]:
    items[0]["negative"]["papers"][0]["title"] = ""
    return 0, "negative.papers[0] has no title"


def _rated_twice(items: Items) -> tuple[int, str]:
    i, side, earlier = _shared_pair(items)
    old = items[i][side]["score"]
    items[i][side]["score"] = new = old - 1 if old > 1 else old + 1
    who, paper = items[i][side]["author_id"], items[i]["anchor"]["paper_id"]
    return i, f"reviewer {who!r} rates paper {paper!r} {new:g} here and {old:g} in item {earlier}; one rating per pair"


def _not_above(items: Items) -> tuple[int, str]:
    items[0]["positive"]["score"] = items[0]["negative"]["score"]
    return 0, "is not above negative.score"


def _null_id(items: Items) -> tuple[int, str]:
    items[1]["negative"]["author_id"] = None
    return 1, "negative.author_id is missing, empty or not a string or number"


def _title_not_text(items: Items) -> tuple[int, str]:
    items[1]["anchor"]["paper_title"] = ["a", "list"]
    return 1, "anchor.paper_title is not text"


def _other_kind(items: Items) -> tuple[int, str]:
    papers = items[0]["positive"]["papers"]
    items[0] = {"anchor": {"author_id": "r_x", "papers": papers},
                "positive": {"paper_id": "p_a", "paper_title": "A", "abstract": "", "score": 5},
                "negative": {"paper_id": "p_b", "paper_title": "B", "abstract": "", "score": 2}, "type": "reviewer_centric"}
    return 0, "a reviewer-centric tuple in the paper-centric file"


def _repeated_anchor(items: Items) -> tuple[int, int]:
    """The first item whose anchor paper an earlier item anchors too, and that earlier item."""
    first: dict[str, int] = {}
    for i, t in enumerate(items):
        pid = t["anchor"]["paper_id"]
        if pid in first:
            return i, first[pid]
        first[pid] = i
    raise AssertionError("no paper anchors two items")


def _two_titles(items: Items) -> tuple[int, str]:
    i, earlier = _repeated_anchor(items)
    old = items[earlier]["anchor"]["paper_title"]
    items[i]["anchor"]["paper_title"] = "A title of another paper"
    shown = old if len(old) <= 60 else old[:59] + "…"
    return i, (f"paper {items[i]['anchor']['paper_id']!r} is titled 'A title of another paper' here and {shown!r} "
               f"in item {earlier}; give each paper id one title")


def _two_abstracts(items: Items) -> tuple[int, str]:
    i, earlier = _repeated_anchor(items)
    items[i]["anchor"]["abstract"] = "An abstract of another paper."
    return i, "has the abstract 'An abstract of another paper.' here and "


# (change, refused without strict too)
CASES: dict[str, tuple[Callable[[Items], tuple[int, str]], bool]] = {
    "missing title": (_drop_title, False), "blank title": (_blank_title, False), "missing score": (_drop_score, True),
    "score 7": (_score_seven, True), "duplicate tuple": (_duplicate, True), "no publications": (_no_publications, False),
    "untitled publication": (_untitled_publication, False), "rated twice differently": (_rated_twice, False),
    "positive not above negative": (_not_above, False), "null id": (_null_id, False),
    "title not text": (_title_not_text, False), "other kind of tuple": (_other_kind, False),
    "two titles for one paper": (_two_titles, True), "two abstracts for one paper": (_two_abstracts, True),
}


@pytest.fixture(params=["hand-written", "sample"])
def lr_source(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Items]:
    """A writable LR-bench folder (the hand-written one, or a copy of the real sample) and its items."""
    if request.param == "hand-written":
        d = write_lrbench(tmp_path / "lr")
    else:
        d = copy_sample(request.getfixturevalue("external") / "lrbench-sample", tmp_path / "lr")
    f = next(d.glob("evaluations_pc*.json"))
    return f, json.loads(f.read_text())


def _refusal(kind: str, path: Path) -> str:
    with pytest.raises(InputError) as caught:
        load_benchmark(kind, path, strict=True)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_unchanged_folders_load_strictly(lr_source: tuple[Path, Items]) -> None:
    f, _ = lr_source
    assert load_benchmark("lrbench", f.parent, strict=True).splits[0].tuples.height >= 3


@pytest.mark.parametrize("case", sorted(CASES))
def test_lrbench_refusals(lr_source: tuple[Path, Items], case: str) -> None:
    f, items = lr_source
    change, always = CASES[case]
    index, says = change(items)
    f.write_text(json.dumps(items))
    message = _refusal("lrbench", f.parent)
    assert message.startswith(f"{f} item {index}"), message
    assert says in message, message
    if not always:  # evaluation alone takes the file: only a world needs more of it
        load_benchmark("lrbench", f.parent)
    else:
        with pytest.raises(InputError):
            load_benchmark("lrbench", f.parent)


def test_a_candidate_without_its_id_is_one_line(tiny_lrbench: Path) -> None:
    f = tiny_lrbench / "evaluations_pc.json"
    items = json.loads(f.read_text())
    del items[1]["negative"]["author_id"]
    f.write_text(json.dumps(items))
    message = _refusal("lrbench", tiny_lrbench)
    assert message.startswith(f"{f} item 1") and "author_id" in message


@pytest.fixture(params=["hand-written", "sample"])
def gold_source(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A writable gold-standard folder: the hand-written one (``tests.support.cli.write_gold``), or
    a copy of the real sample."""
    if request.param == "hand-written":
        return write_gold(tmp_path / "gold")
    return copy_sample(request.getfixturevalue("external") / "goldstandard-sample", tmp_path / "gold")


def _participants(d: Path) -> list[tuple[str, list[str]]]:
    """Each participant of ``evaluations.tsv`` with their rated papers, in row order."""
    lines = (d / "evaluations.tsv").read_text().splitlines()[1:]
    return [(cells[0], [p for p in cells[1:11] if p]) for cells in (ln.split("\t") for ln in lines)]


@pytest.mark.parametrize("how", ["missing", "empty"])
def test_a_participant_without_an_archive_is_refused(gold_source: Path, how: str) -> None:
    assert load_benchmark("goldstandard", gold_source, strict=True)
    row, (who, _) = 3, _participants(gold_source)[1]  # the second participant: row 3 (the header is row 1)
    archive = gold_source / "d_20_1" / "archives" / f"~{who}.jsonl"
    if how == "missing":
        archive.unlink()
    else:
        archive.write_text("")
    message = _refusal("goldstandard", gold_source)
    assert message.startswith(f"{gold_source / 'evaluations.tsv'} row {row}: participant {who!r} has an empty publication list")
    assert str(archive) in message
    load_benchmark("goldstandard", gold_source)  # evaluation leaves the participant out


def test_a_rated_paper_missing_from_the_submissions_is_refused(gold_source: Path) -> None:
    participants = _participants(gold_source)
    paper = participants[-1][1][0]
    row = next(i for i, (_, papers) in enumerate(participants, start=2) if paper in papers)  # the first to rate it
    for subs in sorted(gold_source.glob("d_20_*/submissions.json")):
        held = json.loads(subs.read_text())
        held.pop(paper, None)
        subs.write_text(json.dumps(held))
    message = _refusal("goldstandard", gold_source)
    assert message.startswith(f"{gold_source / 'evaluations.tsv'} row {row}: paper {paper!r} is not among "
                              f"{gold_source / 'd_20_1' / 'submissions.json'}"), message
    load_benchmark("goldstandard", gold_source)


def _titled_differently(gold: Path, where: str) -> tuple[Path, str, str]:
    """A rated paper given another title in a second draw (``draw``) or a second time in the first
    draw's submissions (``file``): the file changed, the paper and its first title."""
    first = gold / "d_20_1" / "submissions.json"
    held = json.loads(first.read_text())
    paper = _participants(gold)[0][1][0]
    other = {"id": paper, "content": {**held[paper]["content"], "title": "A title of another paper"}}
    if where == "file":
        held["again"] = other
        first.write_text(json.dumps(held))
        return first, paper, held[paper]["content"]["title"]
    second = gold / "d_20_2" / "submissions.json"
    if not second.exists():  # the hand-written slice has one draw: a second one, the same
        copy_sample(gold / "d_20_1", gold / "d_20_2")
    subs = json.loads(second.read_text())
    subs[paper] = other
    second.write_text(json.dumps(subs))
    return second, paper, held[paper]["content"]["title"]


@pytest.mark.parametrize("where", ["draw", "file"])
def test_a_submission_given_two_titles_is_refused(gold_source: Path, where: str) -> None:
    changed, paper, title = _titled_differently(gold_source, where)
    first = gold_source / "d_20_1" / "submissions.json"
    at = "submission again" if where == "file" else f"submission {paper}"
    there = f"submission {paper}" if where == "file" else f"{first} submission {paper}"
    shown = title if len(title) <= 60 else title[:59] + "…"
    for strict in (True, False):  # evaluation would keep one of the two titles unseen
        with pytest.raises(InputError) as caught:
            load_benchmark("goldstandard", gold_source, strict=strict)
        assert str(caught.value) == (f"{changed} {at}: paper {paper!r} is titled 'A title of another paper' here and "
                                     f"{shown!r} in {there}; give each paper id one title"), str(caught.value)


def test_one_paper_in_both_files_with_its_abstract_once_is_no_clash(tiny_lrbench: Path) -> None:
    q1 = json.loads((tiny_lrbench / "evaluations_pc.json").read_text())[0]["anchor"]
    rc = {"anchor": {"author_id": "r9", "papers": [{"title": "Efficient transformers", "abstract": "x"}]},
          "positive": {"paper_id": "q1", "paper_title": " sparse attention for long  DOCUMENTS ", "abstract": "", "score": 5},
          "negative": {"paper_id": "p_b", "paper_title": "B", "abstract": "", "score": 2}, "type": "reviewer_centric"}
    (tiny_lrbench / "evaluations_rc.json").write_text(json.dumps([rc]))
    bench = load_benchmark("lrbench", tiny_lrbench, strict=True)
    q1_row = bench.submissions.filter(bench.submissions["paper_id"] == "q1").select("paper_id", "title", "abstract")
    assert q1_row.rows() == [("q1", q1["paper_title"], q1["abstract"])]
    rc["positive"]["paper_title"] = "Dense Attention for Short Documents"
    (tiny_lrbench / "evaluations_rc.json").write_text(json.dumps([rc]))
    message = _refusal("lrbench", tiny_lrbench)
    assert message == (f"{tiny_lrbench / 'evaluations_rc.json'} item 0: paper 'q1' is titled 'Dense Attention for Short "
                       f"Documents' here and 'Sparse Attention for Long Documents' in {tiny_lrbench / 'evaluations_pc.json'} "
                       "item 0; give each paper id one title"), message


# The command line: one line, exit 2, nothing written.


@pytest.mark.parametrize("command", ["demo", "evaluate"])
def test_one_paper_with_two_titles_is_one_line_on_the_command_line(settings: Settings, tmp_path: Path,
                                                                  command: str) -> None:
    items = json.loads(json.dumps(tiny_items()))
    index, says = _two_titles(items)
    d = write_lrbench(tmp_path / "two-titles", items)
    args = (["demo", "--world", f"lrbench={d}", "--no-track"] if command == "demo"
            else ["evaluate", "-b", f"lrbench={d}", "--report", str(tmp_path / "report")])
    result = cli(settings, *args, extra={"PREFECT_HOME": str(tmp_path / "prefect")})
    assert result.returncode == 2, result.stdout + result.stderr
    line = error_line(result)
    assert f"{d / 'evaluations_pc.json'} item {index}: {says}" in line, line
    assert not list(settings.data_dir.rglob("*.duckdb")) and not (tmp_path / "report").exists()


def test_demo_world_on_a_bad_copy_is_one_line_and_writes_nothing(settings: Settings, tmp_path: Path) -> None:
    d = write_lrbench(tmp_path / "bad")
    items = json.loads((d / "evaluations_pc.json").read_text())
    items[2]["positive"]["papers"] = []
    (d / "evaluations_pc.json").write_text(json.dumps(items))
    result = cli(settings, "demo", "--world", f"lrbench={d}", "--no-track",
                 extra={"PREFECT_HOME": str(tmp_path / "prefect")})
    assert result.returncode == 2, result.stdout + result.stderr
    line = error_line(result)
    assert str(d / "evaluations_pc.json") in line and "item 2" in line and "positive.papers" in line, line
    assert not list(settings.data_dir.rglob("*.duckdb")) and not list(settings.data_dir.rglob("worlds"))
    assert not list(settings.data_dir.rglob("world.json"))


@pytest.mark.parametrize(("world", "needles"), [
    ("bogus=x", ("--world 'bogus=x'", "lrbench, goldstandard", "not 'bogus'")),
    ("lrbench", ("--world 'lrbench'", "expected KIND=PATH")),
    ("lrbench=", ("--world 'lrbench='", "expected KIND=PATH")),
    ("lrbench=/nonexistent", ("--world 'lrbench=/nonexistent'", "/nonexistent does not exist")),
])
def test_demo_world_arguments(data_dir: Path, world: str, needles: tuple[str, ...]) -> None:
    one_line_error(*run_cli("demo", "--world", world, "--no-track"), 2, *needles)
    assert not data_dir.exists()


@pytest.mark.parametrize("flag", ["--cassettes", "--papers"])
def test_demo_world_takes_no_cassettes_nor_papers(data_dir: Path, tiny_lrbench: Path, tmp_path: Path, flag: str) -> None:
    value = str(tmp_path) if flag == "--cassettes" else "50"
    one_line_error(*run_cli("demo", "--world", f"lrbench={tiny_lrbench}", flag, value), 2, f"{flag}: not with --world")
    assert not data_dir.exists()


def test_an_empty_file_a_folder_and_a_rating_given_differently_in_the_other_file_are_one_line(tiny_lrbench: Path) -> None:
    from revbench.errors import InputError

    pc = tiny_lrbench / "evaluations_pc.json"
    items = json.loads(pc.read_text())
    pc.write_text("[]")
    with pytest.raises(InputError, match=r"evaluations_pc.json: holds no tuples; a world needs rated pairs"):
        load_benchmark("lrbench", tiny_lrbench, strict=True)
    pc.unlink()
    pc.mkdir()
    with pytest.raises(InputError, match=r"evaluations_pc.json: a folder, not a JSON file"):
        load_benchmark("lrbench", tiny_lrbench, strict=True)
    pc.rmdir()
    pc.write_text(json.dumps(items))
    first = items[0]
    reviewer, paper, score = first["positive"]["author_id"], first["anchor"]["paper_id"], first["positive"]["score"]
    other = {"anchor": {"author_id": reviewer, "papers": first["positive"]["papers"]},
             "positive": {"paper_id": "p_new", "paper_title": "New", "abstract": "", "score": 5},
             "negative": {"paper_id": paper, "paper_title": first["anchor"]["paper_title"], "abstract": "",
                          "score": 1 if score != 1 else 2}, "type": "reviewer_centric"}
    (tiny_lrbench / "evaluations_rc.json").write_text(json.dumps([other]))
    with pytest.raises(InputError) as err:
        load_benchmark("lrbench", tiny_lrbench, strict=True)
    assert str(err.value).startswith(f"{tiny_lrbench / 'evaluations_rc.json'} item 0: reviewer {reviewer!r} rates paper")
    assert f"in {pc} item 0; one rating per pair" in str(err.value)
