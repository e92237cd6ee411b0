"""The ``goldstandard`` kind: the CMU expertise gold standard (tab-separated ratings of up to ten
papers per participant, and ``d_20_<x>`` draws of OpenReview-format profiles)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from revbench.errors import InputError
from revbench.evaluation.importers.checks import DEFAULT_SCALE, PaperTexts, files_digest, number_text, rating
from revbench.evaluation.importers.openreview import read_openreview_dir
from revbench.evaluation.importers.registry import benchmark_kind
from revbench.evaluation.model import RATINGS_SCHEMA, SPLIT_GOLD, Benchmark, Split, frame

GOLD_COLUMNS = ["ParticipantID", *[f"Paper{i}" for i in range(1, 11)], *[f"Expertise{i}" for i in range(1, 11)]]


def read_gold_evaluations(path: Path, scale: tuple[float, float] = DEFAULT_SCALE) -> pl.DataFrame:
    """The gold standard's tab-separated ratings: ``ParticipantID, Paper1..10, Expertise1..10``."""
    try:
        table = pl.read_csv(path, separator="\t", infer_schema_length=0)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: not a readable tab-separated file ({str(exc).splitlines()[0]})") from None
    missing = [c for c in GOLD_COLUMNS if c not in table.columns]
    if missing:
        sep = " (it looks comma-separated)" if "," in (table.columns[0] if table.columns else "") else ""
        raise InputError(f"{path}: expected tab-separated columns ParticipantID, Paper1..Paper10, Expertise1..Expertise10; "
                         f"missing {', '.join(missing[:3])}{'...' if len(missing) > 3 else ''}{sep}")
    ratings = []
    first_row: dict[str, int] = {}
    for row_no, row in enumerate(table.iter_rows(named=True), start=2):
        who = (row["ParticipantID"] or "").strip()
        if not who:
            raise InputError(f"{path} row {row_no}: empty ParticipantID")
        if who in first_row:
            raise InputError(f"{path} row {row_no}: participant {who!r} also has row {first_row[who]}; "
                             "give each participant one row (a second one would silently replace ratings)")
        first_row[who] = row_no
        papers: dict[str, int] = {}
        for i in range(1, 11):
            paper, exp = (row.get(f"Paper{i}") or "").strip(), (row.get(f"Expertise{i}") or "").strip()
            if bool(paper) != bool(exp):
                raise InputError(f"{path} row {row_no}: Paper{i} and Expertise{i} must both be given or both be empty")
            if paper:
                if paper in papers:
                    raise InputError(f"{path} row {row_no}: Paper{i} {paper!r} is also Paper{papers[paper]}; "
                                     "rate each paper once")
                papers[paper] = i
                try:
                    value = number_text(exp, f"{path} row {row_no} Expertise{i}")
                except ValueError:
                    raise InputError(f"{path} row {row_no}: Expertise{i} {exp!r} is not a number") from None
                ratings.append({"reviewer_id": who, "paper_id": paper,
                                "rating": rating(value, f"{path} row {row_no} Expertise{i}", scale)})
    return frame(ratings, RATINGS_SCHEMA)


def _strict_gold(ev: Path, ratings: pl.DataFrame, submissions: pl.DataFrame, first_draw: pl.DataFrame, draw_dir: Path) -> None:
    """What a world built from the gold standard needs: every rated paper among the submissions
    with a title, every participant with publications in the first draw."""
    if ratings.height == 0:
        raise InputError(f"{ev}: no ratings; a world needs rated pairs")
    titled = set(submissions.filter(pl.col("title").str.strip_chars() != "")["paper_id"].to_list())
    with_pubs = set(first_draw.filter(pl.col("title").str.strip_chars() != "")["reviewer_id"].to_list())
    ids = pl.read_csv(ev, separator="\t", infer_schema_length=0, columns=["ParticipantID"])["ParticipantID"]
    row_of = {str(r).strip(): i + 2 for i, r in enumerate(ids.to_list())}  # the header is row 1
    for who, paper in ratings.select("reviewer_id", "paper_id").iter_rows():
        if who not in with_pubs:
            raise InputError(f"{ev} row {row_of[who]}: participant {who!r} has an empty publication list "
                             f"({draw_dir / 'archives' / f'~{who}.jsonl'} is missing or has no titled paper)")
        if paper not in titled:
            raise InputError(f"{ev} row {row_of[who]}: paper {paper!r} is not among {draw_dir / 'submissions.json'} "
                             "with a title")


@benchmark_kind("goldstandard")
def load_goldstandard(path: Path, strict: bool = False) -> Benchmark:
    """The CMU gold standard: the public repository (``data/evaluations.csv`` and
    ``evaluation_datasets/d_20_<x>``) or a slice laid out flat (``evaluations.tsv``, ``d_20_<x>``).
    ``strict`` (a world is to be built from it) refuses rated participants without publications
    and rated papers missing from the submissions, which evaluation leaves out."""
    candidates = [path / "data" / "evaluations.csv", path / "evaluations.csv", path / "evaluations.tsv"]
    ev = next((c for c in candidates if c.exists()), None)
    if ev is None:
        raise InputError(f"{path}: none of {', '.join(str(c) for c in candidates)} exists")
    ratings_df = read_gold_evaluations(ev)
    base = path / "evaluation_datasets" if (path / "evaluation_datasets").is_dir() else path
    draw_dirs = sorted(
        (d for d in base.iterdir() if re.fullmatch(r"d_20_\d+", d.name)), key=lambda d: int(d.name.rsplit("_", 1)[1])
    )
    if not draw_dirs:
        raise InputError(f"{base}: no d_20_<x> evaluation datasets")
    subs, draws = [], []
    texts = PaperTexts()  # across the draws: the submissions are kept once, by id
    for d in draw_dirs:
        s, prof = read_openreview_dir(d, texts)
        subs.append(s)
        draws.append(prof)
    submissions = pl.concat(subs).unique("paper_id", keep="first").sort("paper_id")
    if strict:
        _strict_gold(ev, ratings_df, submissions, draws[0], draw_dirs[0])
    reviewers = set(draws[0]["reviewer_id"].unique())
    ratings_df = ratings_df.filter(pl.col("reviewer_id").is_in(list(reviewers)))
    return Benchmark(
        name="goldstandard", version=files_digest(ev), submissions=submissions, draws=draws,
        splits=[Split(SPLIT_GOLD, ratings=ratings_df)], scale=DEFAULT_SCALE,
    )
