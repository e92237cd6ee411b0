"""The CMU gold standard's evaluation of prediction files for the command line's lean lane
(``revbench.app.lean_evaluate``): ``evaluate -b goldstandard=DIR -p NAME=PATH ...`` read, checked
and computed as the full path does it (``importers.goldstandard`` and ``importers.predictions``,
``Evaluator``, ``report.report_tables``, ``separation``, ``exports``), byte for byte, with numpy
and the metrics' own modules (``metrics.bootstrap``, ``loss``, ``accuracy``) but neither polars
nor the flow: loading those is most of the full path's time, many times the arithmetic's.
``tests/app/test_lean_gold.py`` runs both on the real gold standard and on perturbed copies.

The full path reads and checks every draw's profiles though prediction files need only who has
a titled paper in the first draw, so the lane checks them too, each distinct file once (a draw
that repeats another, as a link or a copy, holds the same text and passes the same checks).

What it does not mirror exactly is :class:`lean.Declined`, and the full path runs the command (and
names what is wrong, if anything): a ratings file polars could read otherwise than by splitting
lines and tabs (a quote, a carriage return, an empty line, rows of another width), ids outside
printable ASCII or with white space (TREC's columns), ratings that are not multiples of 1/64 (the
metrics' sums are then exact, whatever the order of the pairs, which polars' join leaves open),
anything in a file the full path would refuse or warn about (a repeated key, a lone surrogate, a
date it would read), files that leave a rated pair unscored, a flat file, a CSV or a ``submissions/``
folder.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import locale
import math
import re
import stat
import warnings
from collections.abc import Container
from itertools import combinations
from pathlib import Path

import numpy as np

from revbench.evaluation import lean
from revbench.evaluation.lean import Declined, Row
from revbench.evaluation.metrics import bootstrap
from revbench.evaluation.metrics.accuracy import mask
from revbench.evaluation.metrics.loss import costs

GOLD = "goldstandard"
"""The benchmark's name, its one split's (``SPLIT_GOLD``) and its kind."""
GOLD_COLUMNS = ("ParticipantID", *[f"Paper{i}" for i in range(1, 11)], *[f"Expertise{i}" for i in range(1, 11)])
DATES = ("pdate", "cdate", "tcdate", "mdate")
"""The dates ``openreview.note_fields`` reads a year from where a note states none."""
ID = re.compile(r"[!-~]+")
"""A rated id the lane takes: printable ASCII without white space (TREC's columns, sorted as polars sorts)."""
LEVELS = 64
"""Ratings the lane takes are multiples of 1/LEVELS: every sum of weights and costs is then exact."""
MAX_CLUSTERS = 100_000
"""Participants up to which a replicate's sums (counts up to this times 45 pairs of weight 4) stay exact."""
NOT_CSV = ('"', "\r", "\0", "\ufeff")
"""Characters polars reads its own way (quoting, line ends, a byte-order mark): declined."""
GLOB = set("*?[]/\\\0")
"""Characters that would make a name a pattern in ``load_predictions``' search of a folder."""
SEPARATION_TITLE = ("Can the benchmark tell the scorers apart? loss_A - loss_B on the same tuples (A: the lower loss; "
                    "more tuples: for the interval to exclude zero, at today's mix, if the difference is the true one)")
SEPARATION_HEADER = ["scorer A", "scorer B", "split", "diff [95% CI]", "order holds", "tuples", "more tuples needed"]
NOT_SEPARABLE = "not separable by size alone"
"""As in ``revbench.evaluation.separation``."""


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise Declined("a number too large for a float")  # parse_json keeps its text, to name it
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=lean.unique_keys, parse_float=_finite_float, parse_constant=lean.no_constant)


def _text(data: bytes) -> str:
    """A file's UTF-8 text, where ``checks.parse_json`` would replace no surrogate in it (with a
    warning): none escaped (an encoded one is no UTF-8); an archive's bad bytes are replaced there."""
    if b"\\ud" in data or b"\\uD" in data:
        raise Declined("a surrogate escape")
    return data.decode("utf-8")


def _loads(data: bytes | str) -> object:
    """``checks.parse_json`` of text it reads without a word (no repeated key, no surrogate to replace)."""
    return _DECODER.decode(_text(data) if isinstance(data, bytes) else data)


class Gold:
    """The gold standard as ``load_goldstandard`` loads it for prediction files: its version, its
    number of draws and the ratings (reviewer, paper, rating) of the participants with a titled
    paper in the first draw, in the file's order."""

    def __init__(self, version: str, draws: int, ratings: list[tuple[str, str, float]]) -> None:
        self.version, self.draws, self.ratings = version, draws, ratings


def read_ratings(data: bytes) -> list[tuple[str, str, float]]:
    """``read_gold_evaluations`` of a file it reads as tab-separated lines, each a row as wide as
    the header, whose ids are plain and ratings on the scale in steps of 1/64."""
    text = data.decode("utf-8")
    if any(c in text for c in NOT_CSV):
        raise Declined("a character polars reads its own way")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    header = lines[0].split("\t") if lines else []
    if "" in lines or "" in header or len(set(header)) < len(header) or not set(GOLD_COLUMNS) <= set(header):
        raise Declined("not the columns read_gold_evaluations reads, one line per row")
    col = {c: header.index(c) for c in GOLD_COLUMNS}
    ratings: list[tuple[str, str, float]] = []
    seen: set[str] = set()
    for line in lines[1:]:
        cells = line.split("\t")
        who = cells[col["ParticipantID"]].strip() if len(cells) == len(header) else ""
        if not ID.fullmatch(who) or who in seen:
            raise Declined("a row of another width, or a participant empty, not plain or given twice")
        seen.add(who)
        papers: set[str] = set()
        for i in range(1, 11):
            paper, level = cells[col[f"Paper{i}"]].strip(), cells[col[f"Expertise{i}"]].strip()
            if bool(paper) != bool(level) or paper in papers:
                raise Declined("a paper without its rating, or given twice")
            if paper:
                papers.add(paper)
                x = float(level)
                if not ID.fullmatch(paper) or not 1.0 <= x <= 5.0 or not (x * LEVELS).is_integer():
                    raise Declined("a paper id not plain, or a rating off the scale or between its steps")
                ratings.append((who, paper, x))
    return ratings


def _year(value: object) -> int | None:
    """``openreview._year``."""
    try:
        return int(str(value)[:4]) if value not in (None, "") else None
    except ValueError:
        return None


def note_fields(note: object, fallback_id: str | None = None) -> tuple[str, str, str]:
    """``openreview.note_fields``' paper id, title and abstract of a note it reads without an
    error; a note whose year would come from one of its dates is declined (read as dates there)."""
    if not isinstance(note, dict):
        raise Declined("a note that is no object")
    content = note.get("content", note)
    if not isinstance(content, dict):
        raise Declined("a note's content that is no object")

    def val(k: str) -> object:
        v = content.get(k)
        return v.get("value") if isinstance(v, dict) else v

    if not (_year(val("year")) or _year(note.get("year"))):
        if any(isinstance(note.get(k), int | float) and not isinstance(note.get(k), bool) and note.get(k) != 0 for k in DATES):
            raise Declined("a year from a date")
    paper = str(note.get("id") or fallback_id or hashlib.sha1(str(val("title")).encode()).hexdigest())
    return paper, str(val("title") or ""), str(val("abstract") or "")


class Profiles:
    """The draws as ``read_openreview_notes`` reads them, to its checks: every note readable, each
    submission id one title and one abstract across the draws (``PaperTexts``). Each distinct file
    is checked once: the same file (a draw linked as another) or the same bytes (a copy) pass the
    same checks again."""

    def __init__(self) -> None:
        self.texts: dict[tuple[str, str], str] = {}
        self.submissions_seen: set[object] = set()
        self.titled: dict[object, bool] = {}
        """An archive's identity on disk, or its bytes -> whether it holds a titled paper."""

    @staticmethod
    def _read(path: Path, seen: Container[object]) -> tuple[tuple[int, ...], bytes | None]:
        """A file's identity on disk and, unless ``seen`` holds it, its bytes."""
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise Declined("a profile that is no file")
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        return key, None if key in seen else path.read_bytes()

    def submissions(self, path: Path) -> None:
        """Check ``submissions.json`` (an object by id, or a list)."""
        key, data = self._read(path, self.submissions_seen)
        if data is not None and data not in self.submissions_seen:
            raw = _loads(data)
            if not isinstance(raw, dict | list):
                raise Declined("submissions neither an object nor a list")
            for k, note in raw.items() if isinstance(raw, dict) else [(None, n) for n in raw]:
                paper, title, abstract = note_fields(note, k)
                for field, text in (("title", title), ("abstract", abstract)):
                    norm = " ".join(text.split()).casefold()
                    if norm and self.texts.setdefault((paper, field), norm) != norm:
                        raise Declined("one paper id with two titles or abstracts")
            self.submissions_seen.add(data)
        self.submissions_seen.add(key)

    def archive(self, path: Path) -> bool:
        """Check one ``archives/~<reviewer>.jsonl``; whether it holds a titled paper."""
        key, data = self._read(path, self.titled)
        if data is not None:
            if data not in self.titled:
                titled = False
                # As read_text() then splitlines(): line ends translated or not, the same lines.
                for line in _text(data).splitlines():
                    if line.strip():
                        titled = bool(note_fields(_loads(line))[1].strip()) or titled
                self.titled[data] = titled
            self.titled[key] = self.titled[data]
        return self.titled[key]


def read_profiles(base: Path) -> tuple[int, set[str]]:
    """How many ``d_20_<x>`` draws ``base`` holds and who has a titled paper in the first."""
    found = [d for d in base.iterdir() if re.fullmatch(r"d_20_\d+", d.name)]
    numbers = [int(d.name.rsplit("_", 1)[1]) for d in found]
    if not found or len(set(numbers)) < len(found) or any(not d.name.isascii() or not d.is_dir() for d in found):
        raise Declined("no draws, two of one number, or one that is no folder")
    profiles, reviewers = Profiles(), set()
    for i, d in enumerate(sorted(found, key=lambda d: int(d.name.rsplit("_", 1)[1]))):
        if not (d / "submissions.json").is_file() or not (d / "archives").is_dir():
            raise Declined("no submissions.json or archives/")
        profiles.submissions(d / "submissions.json")
        for f in sorted((d / "archives").glob("*.jsonl")):
            if profiles.archive(f) and i == 0:
                reviewers.add(f.stem.lstrip("~"))
    return len(found), reviewers


def read_gold(item: str) -> Gold:
    """``-b goldstandard=PATH`` as ``plan_evaluation`` and ``load_goldstandard`` read it."""
    kind, eq, given = item.partition("=")
    if not eq or kind.strip() != GOLD or not given.strip():
        raise Declined("not goldstandard=PATH")
    path = Path(given.strip()).expanduser()
    candidates = [path / "data" / "evaluations.csv", path / "evaluations.csv", path / "evaluations.tsv"]
    ev = next((c for c in candidates if c.exists()), None)
    # The archives are read in the locale's encoding there.
    if ev is None or not ev.is_file() or codecs.lookup(locale.getpreferredencoding(False)).name != "utf-8":
        raise Declined("no evaluations file, or archives read in another encoding")
    data = ev.read_bytes()
    ratings = read_ratings(data)
    draws, reviewers = read_profiles(path / "evaluation_datasets" if (path / "evaluation_datasets").is_dir() else path)
    kept = [r for r in ratings if r[0] in reviewers]
    if not kept:
        raise Declined("no rating of a participant with publications")
    return Gold(hashlib.sha256(ev.name.encode() + data).hexdigest()[:12], draws, kept)  # checks.files_digest


class Predictions:
    """A ``-p NAME=PATH`` as ``load_predictions`` reads it for the gold standard: per draw the
    scores by (reviewer, paper) in the file's order, its spec and the sha256 of its files."""

    def __init__(self, name: str, draws: list[dict[tuple[str, str], float]], spec: str, sha256: str) -> None:
        self.name, self.draws, self.spec, self.sha256 = name, draws, spec, sha256


def _scores(data: bytes) -> dict[tuple[str, str], float]:
    """``scores_from_json`` of OpenReview's ``{reviewer: {paper: score}}``."""
    raw = _loads(data)
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise Declined("not {reviewer: {paper: score}}")
    return {(r, p): lean.number(s) for r, d in raw.items() for p, s in d.items()}


def read_predictions(items: list[str], gold: Gold) -> list[Predictions]:
    """Each ``NAME[@goldstandard]=PATH`` (a file for every draw, or a folder of the gold
    standard's ``<name>_d_20_<x>*.json``) as the full path reads it, when every file scores every
    rated pair and no two names write the same export files."""
    named = []
    for item in items:
        spec, eq, given = item.partition("=")
        name, _, target = spec.strip().partition("@")
        path = Path(given.strip()).expanduser()
        if not eq or not name or not given.strip() or target not in ("", GOLD) or not path.exists():
            raise Declined("not NAME[@goldstandard]=PATH of a path there is")
        named.append((name, path))
    if any(lean.share_files(a, b) for i, (a, _) in enumerate(named) for b, _ in named[:i]):
        raise Declined("two names writing the same export files")
    read: dict[bytes, dict[tuple[str, str], float]] = {}  # one file's bytes are one set of scores
    needed = {(r, p) for r, p, _ in gold.ratings}
    out = []
    for name, path in named:
        if path.is_file():
            files, spec = [path], f"predictions:{path.name}"
        elif path.is_dir() and not GLOB & set(name):
            files, spec = [], f"predictions:{path.name}/"
            for x in range(1, gold.draws + 1):
                found = sorted(path.glob(f"{name}_d_20_{x}_*.json")) + sorted(path.glob(f"{name}_d_20_{x}.json"))
                found += [p for p in (path / f"d_20_{x}" / f"predictions_{name}.json",) if p.exists()]
                files.append(found[0] if found else path)  # none: the folder itself, declined below
        else:
            raise Declined("neither a file nor a folder, or a name that is a pattern there")
        datas = [f.read_bytes() if f.is_file() else b"" for f in files]
        if any(not d or f.suffix == ".csv" or lean.is_flat(f, d) for f, d in zip(files, datas, strict=True)):
            raise Declined("a draw without a file, an empty one, a CSV or a flat file")
        draws = [read[d] if d in read else read.setdefault(d, _scores(d)) for d in datas] * (gold.draws // len(files))
        if any(not needed.issubset(d) for d in draws):
            raise Declined("a rated pair left unscored")
        out.append(Predictions(name, draws, spec, hashlib.sha256(b"".join(datas)).hexdigest()))  # files.file_sha256
    return out


def _num_den(metric: str, ra: np.ndarray, rb: np.ndarray, diff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``evaluate._num_den``."""
    if metric == "loss":
        return costs(ra - rb, diff), ra - rb
    m = mask(metric, ra, rb)
    return ((diff > 0) & m).astype(float), m.astype(float)


def replicates(nums: np.ndarray, dens: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``bootstrap.replicates``, its products summed by ``einsum`` instead of BLAS: the same numbers
    (integer counts times sums of multiples of 1/128 are exact in any order), without the BLAS
    threads that spin after a product and take the CPU a loaded machine has left for the command."""
    with np.errstate(invalid="ignore", divide="ignore"):
        per_draw = np.einsum("rk,dk->rd", counts, nums) / np.einsum("rk,dk->rd", counts, dens)
    if not per_draw.size:
        return np.full(counts.shape[0], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an undefined replicate: interval() drops it
        return np.nanmean(per_draw, axis=1)


def _point(nums: np.ndarray, dens: np.ndarray) -> float | None:
    """``evaluate._point``."""
    per_draw = [n.sum() / d.sum() for n, d in zip(nums, dens, strict=True) if d.sum() > 0]
    return float(np.mean(per_draw)) if per_draw else None


def metric_rows(gold: Gold, preds: list[Predictions], n_resamples: int, seed: int) -> tuple[list[Row], list[Row]]:
    """``Evaluator(gold, n_resamples, seed).evaluate_all(preds)`` and ``split_separations``, every
    pair covered: the rows as ``MetricValue`` fields, and ``separation_rows``. The pairs are every
    two papers one participant rated differently, the higher-rated as ``a`` (``split_pairs``);
    their order is not polars', and need not be: every sum over them is exact."""
    by_reviewer: dict[str, list[tuple[str, float]]] = {}
    for r, p, x in gold.ratings:
        by_reviewer.setdefault(r, []).append((p, x))
    pairs = [(r, a, b, xa, xb) for r, rated in by_reviewer.items() for a, xa in rated for b, xb in rated if xa > xb]
    if not pairs or len(by_reviewer) > MAX_CLUSTERS:
        raise Declined("no pair to compare, or more participants than the sums stay exact for")
    labels = {c: i for i, c in enumerate(sorted({r for r, *_ in pairs}))}
    codes = np.array([labels[r] for r, *_ in pairs], dtype=np.int64)
    ra, rb = np.array([x[3] for x in pairs], dtype=float), np.array([x[4] for x in pairs], dtype=float)
    k = len(labels)
    counts = bootstrap.replicate_counts(k, n_resamples, seed)
    rows: list[Row] = []
    losses: dict[str, tuple[float, np.ndarray]] = {}
    for pr in preds:
        diffs = [np.array([d[(r, a)] - d[(r, b)] for r, a, b, _, _ in pairs]) for d in pr.draws]
        tied = [float((x == 0).mean()) for x in diffs]
        extra = dict(spec=pr.spec, coverage=1.0, predictions_sha256=pr.sha256, ties=float(np.mean(tied)), basis="", baseline=None)
        for metric in lean.METRICS:
            parts = [_num_den(metric, ra, rb, x) for x in diffs]
            nums = np.vstack([bootstrap.cluster_sums(n, codes, k) for n, _ in parts])
            dens = np.vstack([bootstrap.cluster_sums(d, codes, k) for _, d in parts])
            value = _point(nums, dens)
            reps = replicates(nums, dens, counts)
            lo, hi = bootstrap.interval(reps) if value is not None and n_resamples else (None, None)
            rows.append(dict(benchmark=GOLD, split=GOLD, scorer=pr.name, metric=metric, value=value, ci_low=lo, ci_high=hi,
                             n=int(parts[0][1].astype(bool).sum()), **extra))
            if metric == "loss" and value is not None:
                losses[pr.name] = (value, reps)
    seps = [separation(a, b, losses, len(pairs), k) for a, b in combinations(losses, 2)] if n_resamples else []
    return rows, seps


def separation(a: str, b: str, losses: dict[str, tuple[float, np.ndarray]], n: int, n_clusters: int) -> Row:
    """``separation.paired_difference`` of two scorers' losses, as a row of ``separation_rows``."""
    if losses[b][0] < losses[a][0]:
        a, b = b, a
    d = losses[a][0] - losses[b][0]
    rd = np.asarray(losses[a][1], float) - np.asarray(losses[b][1], float)
    lo, hi = bootstrap.interval(rd, 0.95)
    defined = rd[~np.isnan(rd)]
    order = float(np.mean(np.sign(defined) == np.sign(d))) if d != 0 and defined.size else None
    separated = lo is not None and hi is not None and (lo > 0 or hi < 0)
    needed = more = None
    if lo is not None and hi is not None and not separated and d != 0:
        needed = n * ((d - lo if d > 0 else hi - d) / abs(d)) ** 2
        more = max(1, math.ceil(needed) - n)
    more_clusters = None if needed is None or not n else max(1, math.ceil(n_clusters * needed / n) - n_clusters)
    return {"benchmark": GOLD, "split": GOLD, "scorer_a": a, "scorer_b": b, "metric": "loss_difference", "value": d,
            "ci_low": lo, "ci_high": hi, "order_holds": order, "n": n, "n_clusters": n_clusters, "separated": separated,
            "n_needed": None if needed is None else math.ceil(needed), "more_needed": more, "more_clusters": more_clusters}


def report_tables(rows: list[Row], seps: list[Row]) -> list[lean.Table]:
    """``report.report_tables`` of one split every scorer covers whole (no coverage column, no own
    coverage table), the best of each column in bold but never ``trivial``'s; then, with two or more
    scorers, ``separation.separation_table``."""
    scorers = list(dict.fromkeys(str(r["scorer"]) for r in rows))
    by = {(r["scorer"], r["metric"]): r for r in rows}
    best = {}
    for m in lean.METRICS:
        values = [by[s, m]["value"] for s in scorers if s != lean.TRIVIAL and by[s, m]["value"] is not None]
        best[m] = (min if m == "loss" else max)(values) if values else None  # type: ignore[type-var]
    shown = any(r["ties"] >= lean.TIES_SHOWN for r in rows)  # type: ignore[operator]
    body, notes = [], []
    for s in scorers:
        ties: float = by[s, "loss"]["ties"]  # type: ignore[assignment]
        cells = [s, *([lean.pct(ties)] if shown else [])]
        for m in lean.METRICS:
            r = by[s, m]
            cells.append(lean.cell(r["value"], r["ci_low"], r["ci_high"],  # type: ignore[arg-type]
                               s != lean.TRIVIAL and r["value"] is not None and r["value"] == best[m]))
        body.append(cells)
        if ties >= lean.FEW_DECIDED:
            notes.append(f"{s} tied {lean.pct(ties)} of these pairs: its loss and accuracy rest on the "
                         f"{lean.pct(1 - ties)} it decided")
    tables = [lean.Table(f"### {GOLD} · {GOLD}", ["scorer", *(["ties"] if shown else []), *lean.METRICS], body, notes)]
    if seps:
        tables.append(lean.Table(SEPARATION_TITLE, SEPARATION_HEADER, [[
            s["scorer_a"], s["scorer_b"], f"{GOLD} · {GOLD}",
            "–" if s["ci_low"] is None or s["ci_high"] is None else f"{s['value']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]",
            "–" if s["order_holds"] is None else f"{100 * s['order_holds']:.1f}%", f"{s['n']:,}", _needed(s)] for s in seps], []))
    return tables


def _needed(s: Row) -> str:
    """``separation._needed_cell``."""
    if s["separated"]:
        return "separated"
    if s["value"] == 0:
        return NOT_SEPARABLE
    more, n = s["more_needed"], s["n"]
    return "–" if more is None else f"{more:,} (x{(n + more) / max(n, 1):.1f})"  # type: ignore[operator]


def _entry(path: str, fmt: str, scorer: str | None, split: str | None, written: int) -> Row:
    """``asdict(exports.Exported(...))``: every rated pair is scored, none left out."""
    return dict(path=path, format=fmt, benchmark=GOLD, scorer=scorer, split=split, written=written, left_out=0)


def export_files(gold: Gold, preds: list[Predictions]) -> tuple[dict[str, str], list[Row]]:
    """Each file's scores per draw in OpenReview's format (``export_predictions``), then
    ``exports.export_formats``' TREC qrels and runs (the gold standard has no tuples for RATE's
    files), as {path under the report: text}, with their ``exports.json`` entries."""
    files: dict[str, str] = {}
    several = gold.draws > 1
    made: dict[tuple[int, str], str] = {}  # draws read from the same bytes are one set of scores: written once
    for pr in preds:
        for d, scores in enumerate(pr.draws):
            if (id(scores), "") not in made:
                view: dict[str, dict[str, float]] = {}
                for (r, p), s in scores.items():  # Scores.to_openreview
                    view.setdefault(r, {})[p] = s
                made[id(scores), ""] = json.dumps(view)
            files[f"predictions/{GOLD}/{lean.file_name(pr.name)}{f'_d{d + 1}' if several else ''}.json"] = made[id(scores), ""]
    qrels = [f"{p} 0 {r} {int(round(x))}" for p, r, x in sorted((p, r, x) for r, p, x in gold.ratings)]
    files[f"trec/{GOLD}/qrels"] = "".join(f"{line}\n" for line in qrels)
    index = [_entry(f"trec/{GOLD}/qrels", "trec_qrels", None, None, len(qrels))]
    for pr in preds:
        tag = lean.file_name(pr.name)
        for d, scores in enumerate(pr.draws):
            if (id(scores), tag) not in made:
                # exports.trec_run: by paper, the higher score first, equal scores by reviewer id.
                ranked = sorted(((p, scores[r, p], r) for r, p, _ in gold.ratings), key=lambda t: (t[0], -t[1], t[2]))
                lines, rank = [], 0
                for i, (p, s, r) in enumerate(ranked):
                    rank = rank + 1 if i and ranked[i - 1][0] == p else 1
                    lines.append(f"{p} Q0 {r} {rank} {float(s)!r} {tag}\n")
                made[id(scores), tag] = "".join(lines)
            rel = f"trec/{GOLD}/{GOLD}/{tag}{f'_d{d + 1}' if several else ''}.run"
            files[rel] = made[id(scores), tag]
            index.append(_entry(rel, "trec_run", pr.name, GOLD, len(gold.ratings)))
    return files, index
