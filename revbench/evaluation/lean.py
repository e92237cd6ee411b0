"""RATE's flat prediction files evaluated with the standard library alone, for the command line's
lean lane (``revbench.app.lean_evaluate``): the tuples, metrics, report tables and export files the
full path (polars and numpy, ``revbench.flows.evaluate``) makes of one such file, byte for byte.
Each function names the one it mirrors; ``tests/app/test_lean_evaluate.py`` runs both on the public
samples and on randomized files and compares every output.

What the lane does not mirror exactly is :class:`Declined`, and the full path runs the command
instead (and names what is wrong, if anything): a file that is not RATE's flat format or fails one
of its checks, an id with white space or an unprintable character (TREC files, numpy's strings), a
score of -0.0 (polars sorts it apart from 0.0).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

# Neither typing nor dataclasses: with inspect they cost the lane 8 ms, a tenth of RATE's whole script.
Row = dict[str, object]

LR_FLAT_KEYS = ("anchor_id", "positive_id", "negative_id", "positive_score", "negative_score",
                "positive_ref_score", "negative_ref_score")
"""As ``revbench.evaluation.importers.predictions.LR_FLAT_KEYS``."""
SCALE = (1.0, 5.0)
"""LR-bench's rating scale (``importers.checks.DEFAULT_SCALE``)."""
PAPER_CENTRIC, REVIEWER_CENTRIC = "paper_centric", "reviewer_centric"
SPLITS = {frozenset({PAPER_CENTRIC}): "lr_paper_centric", frozenset({REVIEWER_CENTRIC}): "lr_reviewer_centric"}
METRICS = ("loss", "accuracy", "easy_accuracy", "hard_accuracy")
"""``revbench.evaluation.evaluate.PAIR_METRICS``, also the report's columns."""
RATE_SUFFIX = {PAPER_CENTRIC: "pc", REVIEWER_CENTRIC: "rc"}
TRIVIAL = "trivial"
TIES_SHOWN, FEW_DECIDED = 0.01, 0.5
"""As in ``revbench.evaluation.report``."""
SURROGATE = re.compile("[\ud800-\udfff]|\\\\u[dD][89a-fA-F]")
"""``revbench.text_clean``'s test: text that may parse to a lone surrogate (replaced there, with a warning)."""


class Declined(Exception):
    """Input the lean lane does not take: the full path runs the command instead."""


class FlatTuple:
    """One tuple as ``load_lr_flat`` keeps it (``TUPLES_SCHEMA``)."""

    __slots__ = ("reviewer_pos", "paper_pos", "reviewer_neg", "paper_neg", "rating_pos", "rating_neg", "cluster")

    def __init__(self, pos: tuple[str, str], neg: tuple[str, str], rating_pos: float, rating_neg: float,
                 cluster: str) -> None:
        self.reviewer_pos, self.paper_pos = pos
        self.reviewer_neg, self.paper_neg = neg
        self.rating_pos, self.rating_neg, self.cluster = rating_pos, rating_neg, cluster


class FlatFile:
    """A flat predictions file read as the full path reads it: its tuples (one split) and its
    scores, one per (reviewer, paper) in the order first given."""

    def __init__(self, name: str, path: Path, split: str, tuples: list[FlatTuple],
                 scores: dict[tuple[str, str], float], sha256: str) -> None:
        self.name, self.path, self.split, self.tuples, self.scores, self.sha256 = name, path, split, tuples, scores, sha256
        self.benchmark = f"lrbench:{path.stem}"
        """The benchmark the file is its own, as ``load_inputs`` names it."""


class Table:
    """``revbench.evaluation.report.ReportTable``: a title, a header, rows of cells, notes."""

    def __init__(self, title: str, header: list[str], rows: list[list[str]], notes: list[str]) -> None:
        self.title, self.header, self.rows, self.notes = title, header, rows, notes

    def to_markdown(self) -> str:
        """As ``ReportTable.to_markdown`` (every table here has a header)."""
        lines = [self.title, "", "| " + " | ".join(self.header) + " |", "|---|" + "---|" * (len(self.header) - 1)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        lines += ([""] + [f"- {n}" for n in self.notes]) if self.notes else []
        return "\n".join(lines) + "\n"


def file_name(name: str) -> str:
    """``revbench.evaluation.exports.file_name``: one path component and one TREC token."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def export_key(name: str) -> str:
    """``revbench.evaluation.plan.export_key``."""
    return file_name(name).casefold()


def share_files(a: str, b: str) -> bool:
    """Whether two names would write the same export files (``plan._shared_file_name``)."""
    ka, kb = export_key(a), export_key(b)
    return ka == kb or bool(re.fullmatch(re.escape(kb) + r"_d\d+", ka) or re.fullmatch(re.escape(ka) + r"_d\d+", kb))


def is_flat(path: Path, data: bytes) -> bool:
    """``importers.predictions.is_lr_flat`` of the file at ``path`` holding ``data``: judged by its
    name and its first 2,000 bytes."""
    head = data[:2000].decode("utf-8", errors="replace")
    return path.suffix == ".json" and '"anchor_id"' in head and '"positive_ref_score"' in head


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object, as ``json``'s ``object_pairs_hook``; one that repeats a key is declined."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise Declined("a key given twice")  # parse_json refuses it
    return obj


def no_constant(name: str) -> float:
    """``json``'s ``parse_constant``: NaN and infinity are declined."""
    raise Declined(f"{name} is no JSON number")


def _id(value: object) -> str:
    # str() of anything else (a float, a list) is what the full path keeps: mirrored only for the plain kinds.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise Declined("an id that is neither text nor an integer")
    text = str(value)
    if not text or not text.isprintable() or " " in text:
        raise Declined("an empty id, or one with white space or an unprintable character")
    return text


def number(value: object) -> float:
    """``importers.checks.finite_number`` on a value it accepts; anything else is declined."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Declined("not a number")
    try:
        x = float(value)
    except OverflowError:
        raise Declined("too large") from None
    if not math.isfinite(x) or (x == 0 and math.copysign(1.0, x) < 0):
        raise Declined("not finite, or -0.0")
    return x


def _rating(value: object) -> float:
    x = number(value)
    if not SCALE[0] <= x <= SCALE[1]:
        raise Declined("a rating outside the scale")
    return x


def read_flat(name: str, path: Path) -> FlatFile:
    """``importers.predictions.load_lr_flat`` (with ``read_json`` and ``file_sha256``) on a file
    it accepts; a file it would refuse, or read in a way not mirrored here, is declined."""
    if path.suffix != ".json" or not path.is_file():
        raise Declined(f"{path} is not RATE's flat format")
    data = path.read_bytes()
    if not is_flat(path, data):
        raise Declined(f"{path} is not RATE's flat format")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Declined("not UTF-8") from None
    if SURROGATE.search(text):
        raise Declined("lone surrogates are replaced, with a warning")
    try:
        items = json.loads(text, object_pairs_hook=unique_keys, parse_constant=no_constant)
    except (ValueError, RecursionError):
        raise Declined("not JSON the lane reads") from None
    if not isinstance(items, list) or not items:
        raise Declined("not a list of tuples")
    tuples: list[FlatTuple] = []
    scores: dict[tuple[str, str], float] = {}
    kinds: set[str] = set()
    seen: set[tuple[str, str, str, str]] = set()
    for t in items:
        if not isinstance(t, dict) or any(k not in t for k in LR_FLAT_KEYS):
            raise Declined("a tuple without every key")
        kind = t.get("type", PAPER_CENTRIC)
        if kind not in (PAPER_CENTRIC, REVIEWER_CENTRIC):
            raise Declined("a tuple of no known type")
        kinds.add(kind)
        a, p, n = _id(t["anchor_id"]), _id(t["positive_id"]), _id(t["negative_id"])
        if (kind, a, p, n) in seen:
            raise Declined("a tuple given twice")
        seen.add((kind, a, p, n))
        pos, neg = ((p, a), (n, a)) if kind == PAPER_CENTRIC else ((a, p), (a, n))
        for pair, key in ((pos, "positive_score"), (neg, "negative_score")):
            value = number(t[key])
            if scores.setdefault(pair, value) != value:
                raise Declined("one pair with two scores")
        tuples.append(FlatTuple(pos, neg, _rating(t["positive_ref_score"]), _rating(t["negative_ref_score"]), a))
    return FlatFile(name, path, SPLITS.get(frozenset(kinds), "lr_mixed"), tuples, scores,
                    hashlib.sha256(data).hexdigest())


def numpy_sum(values: list[float]) -> float:
    """``numpy.ndarray.sum`` of float64 values, to the last bit: numpy adds pairwise (eight
    accumulators over blocks of up to 128 values, halves above that), not left to right."""
    def block(lo: int, n: int) -> float:
        if n < 8:
            res = 0.0
            for i in range(lo, lo + n):
                res += values[i]
            return res
        if n <= 128:
            r = values[lo:lo + 8]
            i = 8
            while i < n - n % 8:
                for j in range(8):
                    r[j] += values[lo + i + j]
                i += 8
            res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
            for k in range(lo + i, lo + n):
                res += values[k]
            return res
        half = n // 2
        half -= half % 8
        return block(lo, half) + block(lo + half, n - half)

    return 0.0 + block(0, len(values))


def _pairs(f: FlatFile) -> list[tuple[FlatTuple, float, float, float]]:
    """``revbench.evaluation.pairs.split_pairs`` of the file's tuples with ``Evaluator._diffs``:
    (tuple, rating_a, rating_b, score_a - score_b), the higher-rated side as ``a``, equal
    ratings left out."""
    out = []
    for t in f.tuples:
        if t.rating_pos == t.rating_neg:
            continue
        hi = t.rating_pos > t.rating_neg
        a = (t.reviewer_pos, t.paper_pos) if hi else (t.reviewer_neg, t.paper_neg)
        b = (t.reviewer_neg, t.paper_neg) if hi else (t.reviewer_pos, t.paper_pos)
        out.append((t, max(t.rating_pos, t.rating_neg), min(t.rating_pos, t.rating_neg), f.scores[a] - f.scores[b]))
    return out


def _num_den(metric: str, ra: float, rb: float, diff: float) -> tuple[float, float]:
    """``evaluate._num_den`` of one pair (``metrics.loss.costs``, ``metrics.accuracy.mask``)."""
    if metric == "loss":
        w = ra - rb
        return w * ((diff < 0) + 0.5 * (diff == 0)), w
    counted = {"accuracy": True, "easy_accuracy": ra >= 4 and rb <= 2, "hard_accuracy": rb >= 4 and ra > rb}[metric]
    return float(diff > 0 and counted), float(counted)


def metric_rows(f: FlatFile) -> list[Row]:
    """``Evaluator(benchmark, n_resamples=0).evaluate_all([scores])`` on the file's benchmark: per
    metric the ratio of the per-cluster sums (``bootstrap.cluster_sums``, clusters in sorted
    order) as numpy adds them, no interval; as ``MetricValue`` fields."""
    pairs = _pairs(f)
    labels = {c: i for i, c in enumerate(sorted({t.cluster for t, *_ in pairs}))}
    total = len(pairs)
    ties = sum(d == 0 for *_, d in pairs) / total if total else None
    rows = []
    for metric in METRICS:
        nums, dens = [0.0] * len(labels), [0.0] * len(labels)
        counted = 0
        for t, ra, rb, d in pairs:
            num, den = _num_den(metric, ra, rb, d)
            nums[labels[t.cluster]] += num
            dens[labels[t.cluster]] += den
            counted += den != 0
        n_sum, d_sum = numpy_sum(nums), numpy_sum(dens)
        rows.append(dict(benchmark=f.benchmark, split=f.split, scorer=f.name, metric=metric,
                         value=n_sum / d_sum if d_sum > 0 else None, ci_low=None, ci_high=None, n=counted,
                         spec=f"predictions:{f.path.name}", coverage=1.0 if total else None,
                         predictions_sha256=f.sha256, ties=ties, basis="", baseline=None))
    return rows


def result_rows(rows: list[Row], run_id: str, evaluated_at: str, version: str | None = None) -> list[Row]:
    """``tasks.evaluate.stored_results`` then ``json_rows``: ``eval_results``' columns in its order;
    ``version`` the benchmark's (None: a flat file's own benchmark, versioned by its stem). Every
    row is a scorer's own (the lane makes no paired difference): its ``baseline`` is null."""
    cols = ("benchmark", "benchmark_version", "split", "scorer", "metric", "value", "ci_low", "ci_high", "n", "run_id",
            "evaluated_at", "spec", "predictions_sha256", "coverage", "benchmark_digest", "ties", "basis", "baseline")
    out = []
    for r in rows:
        full = {**r, "run_id": run_id, "evaluated_at": evaluated_at, "benchmark_digest": None,
                "benchmark_version": version or str(r["benchmark"]).removeprefix("lrbench:")}  # a file's: its stem
        out.append({c: full[c] for c in cols})
    return out


def pct(share: float) -> str:
    """``report._pct``."""
    return "100%" if share >= 1.0 else f"{math.floor(share * 1000) / 10:g}%"


def cell(value: float | None, lo: float | None, hi: float | None, best: bool) -> str:
    """``report._cell``: the value, its interval where there is one, bold where best."""
    if value is None:
        return "–"
    text = f"{value:.3f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "")
    return f"**{text}**" if best else text


def report_table(rows: list[Row]) -> Table:
    """``report.report_tables`` for one benchmark of one split and one scorer: the best of each
    column in bold (never ``trivial``'s), a ties column from 1% ties, a line from half."""
    first = rows[0]
    scorer, ties = first["scorer"], first["ties"]
    shown = ties is not None and ties >= TIES_SHOWN
    cells = [scorer] + (["100%" if ties >= 1 else pct(ties)] if shown else [])
    for r in rows:
        value = r["value"]
        text = "–" if value is None else f"{value:.3f}"
        cells.append(f"**{text}**" if value is not None and scorer != TRIVIAL else text)
    notes = ([f"{scorer} tied {pct(ties)} of these pairs: its loss and accuracy rest on the {pct(1 - ties)} it decided"]
             if ties is not None and ties >= FEW_DECIDED else [])
    return Table(f"### {first['benchmark']} · {first['split']}", ["scorer", *(["ties"] if shown else []), *METRICS],
                 [cells], notes)


def openreview(f: FlatFile) -> dict[str, dict[str, float]]:
    """``Scores.to_openreview``: ``{reviewer: {paper: score}}`` in the order the scores came."""
    out: dict[str, dict[str, float]] = {}
    for (r, p), s in f.scores.items():
        out.setdefault(r, {})[p] = s
    return out


def predictions_file(f: FlatFile) -> str:
    """``flows.evaluate.predictions_path`` relative to the report folder."""
    return f"predictions/{f.benchmark.replace(':', '_')}/{file_name(f.name)}.json"


Side = tuple[str, str, float]
"""(reviewer, paper, rating) of one side of a tuple."""


def _oriented(f: FlatFile) -> list[tuple[str, str, str, str, Side, Side]]:
    """``exports.oriented_tuples``: (type, anchor_id, positive_id, negative_id, positive side,
    negative side), the higher-rated side as positive, the kind by the tuple's shape."""
    out = []
    for t in f.tuples:
        swap = t.rating_pos < t.rating_neg
        pos = (t.reviewer_neg, t.paper_neg, t.rating_neg) if swap else (t.reviewer_pos, t.paper_pos, t.rating_pos)
        neg = (t.reviewer_pos, t.paper_pos, t.rating_pos) if swap else (t.reviewer_neg, t.paper_neg, t.rating_neg)
        if pos[1] == neg[1]:  # one paper on both sides
            out.append((PAPER_CENTRIC, pos[1], pos[0], neg[0], pos, neg))
        else:
            out.append((REVIEWER_CENTRIC, pos[0], pos[1], neg[1], pos, neg))
    return out


def _level(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _exported(path: str, fmt: str, f: FlatFile, scorer: str | None, split: str | None, written: int) -> Row:
    """``asdict(exports.Exported(...))``; a flat file's scores leave no entry out."""
    return dict(path=path, format=fmt, benchmark=f.benchmark, scorer=scorer, split=split, written=written, left_out=0)


def export_files(f: FlatFile) -> tuple[dict[str, str], list[Row]]:
    """``exports.export_formats`` without its index: RATE's files (``_rate_files``), then the
    qrels and the run of the paper-centric tuples (``_trec_files``), as {relative path: text},
    with their ``exports.json`` entries."""
    files: dict[str, str] = {}
    index: list[Row] = []
    tuples = _oriented(f)
    bname = file_name(f.benchmark)
    for kind, short in RATE_SUFFIX.items():
        items = [{"anchor_id": a, "positive_id": p, "negative_id": n, "type": kind, "positive_score": f.scores[pos[:2]],
                  "negative_score": f.scores[neg[:2]], "positive_ref_score": _level(pos[2]), "negative_ref_score": _level(neg[2])}
                 for k, a, p, n, pos, neg in tuples if k == kind]
        if items:
            rel = f"predictions/{file_name(f.name)}/{bname}_{short}.json"
            files[rel] = json.dumps(items, indent=1)
            index.append(_exported(rel, "rate", f, f.name, None, len(items)))
    # exports.paper_view: every positive side, then every negative side, a pair's first rating kept.
    view: dict[tuple[str, str], float] = {}
    for positive in (True, False):
        for kind, anchor, _, _, pos, neg in tuples:
            if kind == PAPER_CENTRIC:
                reviewer, _, rating = pos if positive else neg
                view.setdefault((anchor, reviewer), rating)
    if not view:
        return files, index
    qrels = [f"{p} 0 {r} {int(round(x))}" for (p, r), x in sorted(view.items())]
    ranked = sorted(((p, f.scores[(r, p)], r) for p, r in view), key=lambda x: (x[0], -x[1], x[2]))
    run, rank, tag = [], 0, file_name(f.name)
    for i, (p, s, r) in enumerate(ranked):
        rank = rank + 1 if i and ranked[i - 1][0] == p else 1
        run.append(f"{p} Q0 {r} {rank} {float(s)!r} {tag}")
    base = f"trec/{bname}"
    files[f"{base}/qrels"] = "".join(f"{line}\n" for line in qrels)
    index.append(_exported(f"{base}/qrels", "trec_qrels", f, None, None, len(qrels)))
    rel = f"{base}/{file_name(f.split)}/{tag}.run"
    files[rel] = "".join(f"{line}\n" for line in run)
    index.append(_exported(rel, "trec_run", f, f.name, f.split, len(run)))
    return files, index


def merged_index(text: str | None, benchmarks: list[str]) -> list[object]:
    """What ``export_formats`` keeps of an earlier ``exports.json`` (``text``; None: none) once every
    benchmark of the run has written its entries: the other benchmarks' entries (none of a text it
    cannot read). One it would stop on (a number, ``null``, nesting too deep) is declined."""
    if text is None:
        return []
    try:
        kept = [e for e in json.loads(text) if e.get("benchmark") not in benchmarks]
    except (ValueError, AttributeError):
        return []
    except Exception:
        raise Declined("an exports.json export_formats cannot read") from None
    return kept
