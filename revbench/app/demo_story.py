"""The demo's account on one screen: a line or two per stage with its key figure, the evaluation
as one table, where the full output went and how to open the UI, at most about 60 lines at 80
columns. The stages' full tables go to ``data/reports/demo.txt`` (to the screen too with ``-v``).

A run that finds nothing new (the second ``make demo``) says in a few lines what it did not need
to do instead of repeating every stage's figures."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table as RichTable

from revbench.app.console import console

STORY_SPLITS = (("pointwise", "pointwise"), ("paper_centric", "paper-centric"))
"""The evaluation table's columns: (split in ``results.json``, header)."""


def shown(path: str | Path) -> str:
    """``path`` as the reader would type it: relative to the working directory when inside it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p)


SHORT_SUFFIX = ":pooling=mean"
"""Cut from a scorer's name in the story's table (named whole once below it)."""


def short(scorer: str) -> str:
    """A scorer's name in the story's table: ``embedding`` for ``embedding:pooling=mean``."""
    return scorer.removesuffix(SHORT_SUFFIX)


def _n(x: int) -> str:
    return f"{x:,}"


class Story:
    """The lines of one demo run, said as its stages end. A stage with nothing new to do is kept
    back and said with the others in one short block ("did not need to: ..."), before the next
    stage that did something new, or before the evaluation."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self.not_needed: list[str] = []
        self.new_work = False
        self.warnings = 0

    def say(self, *lines: str) -> None:
        """Lines of the account, on the screen and in the report."""
        self.flush()
        for line in lines:
            console.tell(line, markup=False, highlight=False)

    def skip(self, what: str) -> None:
        """Something this run did not need to do (said later, with the rest)."""
        self.not_needed.append(what)

    def flush(self) -> None:
        """The things kept back, as one block."""
        if not self.not_needed:
            return
        items, self.not_needed = self.not_needed, []
        head = "Nothing new since the last run, so it did not need to:" if not self.new_work else "It did not need to:"
        console.tell(head, markup=False, highlight=False)
        for item in items:
            console.tell(f"  {item}", markup=False, highlight=False)

    def world(self, name: str, counts: dict[str, int], fault_rate: float) -> None:
        """The SYNTHETIC world and the replay server in front of it."""
        self.say(f"SYNTHETIC world {name}: {counts['papers']} papers, {counts['persons']} people, "
                 f"{counts['bad_records']} bad records planted",
                 f"replay server: arXiv, S2, OpenAlex, PDFs, GROBID, an LLM; {fault_rate:.0%} of requests fail")

    def ingest(self, summary: Any) -> None:
        """Papers fetched, kept and rejected."""
        fetched = next((s["rows_out"] for s in summary.stages if s["stage"] == "crawl"), 0)
        tot = summary.totals
        if not fetched:
            self.skip(f"fetch papers: {tot['papers']} in the warehouse, {tot['rejects']} rejected, as before")
            return
        self.new_work = True
        self.say(f"ingest: {fetched} papers fetched -> {tot['papers']} in the warehouse, {tot['rejects']} rejected "
                 f"({len(summary.rejects_in_warehouse)} reasons)")

    def graph(self, res: Any) -> None:
        """References saved and the share of papers that have some, per source."""
        papers = res.coverage["papers"]
        cover = ", ".join(f"{s['source']} {s['papers_with_references'] / papers:.0%}" for s in res.coverage["sources"]
                          if papers)
        if not res.papers_asked:
            self.skip(f"ask for references: papers with some, {cover}")
            return
        self.new_work = True
        self.say(f"graph: {_n(res.references_saved)} references saved; papers with references: {cover}")

    def authors(self, runs: list[tuple[Any, dict[str, float]]], fetched_nothing: bool) -> None:
        """Each decider's merges and authors, scored against the world's truth."""
        llm = [r for r, _ in runs if r.decider.startswith("llm")]
        if fetched_nothing and not any(r.llm_calls for r, _ in runs):
            cached = sum(r.llm_cached for r in llm)
            self.skip(f"call the LLM: {cached} answers from its cache; "
                      + " and ".join(str(r.authors) for r, _ in runs) + " authors, as before")
            return
        lines = [f"authors: {runs[0][0].mentions} mentions; pairwise precision and recall against the truth:"]
        for r, q in runs:
            who = "LLM decider:" if r.decider.startswith("llm") else "offline decider:"
            calls = f" ({r.llm_calls} LLM calls)" if r.decider.startswith("llm") else ""
            lines.append(f"  {who:<17}{sum(r.merges.values())} merges -> {r.authors} authors; "
                         f"{q['pairwise_precision']:.3f}, {q['pairwise_recall']:.3f}{calls}")
        self.say(*lines)

    def pools(self, stats: Any, audit: int, planted: list[dict[str, Any]], fetched_nothing: bool) -> None:
        """Round 1's queries and invitations, and the COI audit against the truth."""
        caught = sum(bool(p["caught"]) for p in planted)
        if fetched_nothing and not stats.embedded_now:
            self.skip(f"redo the pools: round {stats.round} as before, {stats.assignments} invitations, "
                      f"COI audit {audit}")
            return
        self.say(f"pools, round {stats.round}: {stats.queries} queries, {stats.assignments} invitations to "
                 f"{stats.invited_candidates} candidates",
                 f"  COI audit against the truth: {audit} violations; planted conflicts caught: {caught} of {len(planted)}")

    def survey(self, sent: int, panel: dict[str, int]) -> None:
        """Invitations sent, how the SYNTHETIC panel answered, what the link scanners recorded."""
        if not sent:
            self.skip("email anyone: round 1 went out before, and nobody is emailed twice")
            return
        self.new_work = True
        self.say(f"survey: {sent} invitations sent; {panel['answered']} answered ({panel['ratings']} ratings), "
                 f"{panel['silent']} silent, {panel['opt_outs']} opted out",
                 f"  link scanners: {_n(panel['scanner_requests'])} requests on {panel['scanned_mailboxes']} "
                 f"mailboxes, {panel['scanner_recorded']} recorded")

    def ratings(self, out: Any, quality: dict[str, Any]) -> None:
        """Answers into ratings, the flags judged against the planted low-effort respondents, tuples."""
        if not out.events_pulled:
            self.skip(f"pull answers: {out.events} known, {out.kept} ratings kept, "
                      f"{out.paper_centric_tuples} + {out.reviewer_centric_tuples} tuples")
            return
        self.new_work = True
        self.say(f"ratings: {out.events} survey events -> {out.ratings} ratings: {out.kept} kept, {out.dropped} dropped",
                 f"  flags: {quality['flagged']} respondents, precision {quality['precision']:.2f} and recall "
                 f"{quality['recall']:.2f} against {quality['planted']} planted",
                 f"  tuples: {out.paper_centric_tuples} paper-centric, {out.reviewer_centric_tuples} reviewer-centric")

    def release(self, out: Any) -> None:
        """The release made (or why none was)."""
        if out.unchanged:
            self.skip(f"build a release: nothing changed since {out.version}")
            return
        c = out.counts
        status = {"published": "published", "rejected": "rejected", "built": "waits for a curator"}[out.status or "built"]
        audit = " passed" if out.audit_strings is None else f" passed ({_n(out.audit_strings)} strings)"
        self.say(f"release {out.version}: {c['pointwise']} ratings, {c['papers']} papers, {c['reviewers']} reviewers; "
                 f"{status}", f"  privacy audit{audit}; folder: {shown(out.dir)}")

    def labels(self, r: Any) -> None:
        """The citation weak labels and their agreement with the survey."""
        a = r.agreement
        if not self.new_work:
            return  # nothing new to label from: the labels of the last run
        agree = (f"Kendall tau {a.kendall_tau:.2f}, AUC {a.auc:.2f}" if a.kendall_tau is not None and a.auc is not None
                 else "not measured")
        self.say(f"weak labels from citations: {r.positives} positives among {r.candidates} candidates",
                 f"  agreement with the survey on {a.n_pairs} pairs: {agree}")

    def embeddings(self) -> None:
        """Texts encoded, when every one came from the cache (said with what was not needed)."""
        from revbench.ml.embeddings import EmbeddingCache

        asked, encoded, _ = EmbeddingCache.totals()
        if asked and not encoded:
            self.skip(f"encode texts: {_n(asked)} asked for, all from the cache")

    def evaluation(self, report_dir: Path) -> dict[str, Any]:
        """The warehouse evaluation as one table: each scorer's loss with its 95% interval per
        split, the lowest marked only where the interval of its difference to every other scorer
        excludes 0. Returns the table's figures (for ``reports/demo.json``)."""
        from revbench.evaluation.model import is_difference_row

        self.flush()
        rows = _read(report_dir / "results.json")
        cells: dict[str, dict[str, dict[str, Any]]] = {}
        for r in rows:
            if (r["metric"] == "loss" and r["value"] is not None and r["split"] in dict(STORY_SPLITS)
                    and not is_difference_row(r)):  # a --baseline's paired differences are not scorers
                cells.setdefault(r["scorer"], {})[r["split"]] = r
        if not cells:
            self.say(f"evaluation: no loss in {shown(report_dir / 'results.json')}")
            return {}
        pairs = _read(report_dir / "separation.json")
        best = {split: best_scorer(cells, pairs, split) for split, _ in STORY_SPLITS}
        # Shortened only where the short name is no other scorer's.
        name = {sc: short(sc) if short(sc) not in cells else sc for sc in cells}
        t = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        t.add_column("scorer")
        for _, head in STORY_SPLITS:
            t.add_column(head, justify="right")
        for scorer, by_split in cells.items():
            t.add_row(name[scorer], *[_cell(by_split.get(split), best[split] == (scorer, [])) for split, _ in STORY_SPLITS])
        self.say("Evaluation on the warehouse benchmark: loss [95% interval], lower is better")
        console.tell(t)
        notes = []
        if any(not holding for low, holding in best.values() if low is not None):
            notes.append("  * the lowest, and the interval of its difference to every other excludes 0")
        for split, head in STORY_SPLITS:
            low, holding = best[split]
            if low is not None and holding:
                others = name[holding[0]] if len(holding) == 1 else f"{len(holding)} others"
                line = f"  {head}: {name[low]} lowest, not separated from {others}: no best"
                # a long scorer name: two lines, so the screen stays within 80 columns
                notes += [line] if len(line) <= 80 else [f"  {head}: {name[low]} lowest,",
                                                        f"    not separated from {others}: no best"]
        named = sorted(sc for sc in cells if name[sc] != sc)
        if named:
            notes.append("  " + ", ".join(name[sc] for sc in named) + ": short for " + ", ".join(named))
        if _same_split(rows, "pointwise", "reviewer_centric"):
            notes.append("  pointwise = reviewer-centric here (the same pairs)")
        self.say(*notes)
        return {"loss": {split: {sc: [_round(c[split].get(k)) for k in ("value", "ci_low", "ci_high")]
                                 for sc, c in cells.items() if split in c} for split, _ in STORY_SPLITS},
                "best": {split: (low if low is not None and not holding else None) for split, (low, holding) in best.items()}}

    def realism(self, realism: dict[str, int]) -> None:
        """The world against the real figures it is calibrated on, in one line."""
        self.say(f"world realism: {realism['hold']} of {realism['targets']} targets hold "
                 "(docs/benchmarks.md: how real the world is)")

    def ending(self, seconds: float, data_dir: Path, track: bool) -> None:
        """How long it took, where the full output and the reports are, and how to see the runs."""
        self.flush()
        if self.warnings:
            self.say(f"{self.warnings} warning{'s' if self.warnings > 1 else ''} logged (in the full output)")
        again = "run it again for a cheap refresh" if self.new_work else "nothing was new"
        reports = data_dir / "reports"
        self.say(f"demo finished in {seconds:.0f} s; {again}.",
                 f"Full output: {shown(reports / 'demo.txt')}" + ("" if self.verbose else " (or run the demo with -v)"),
                 f"Reports: {shown(reports)}/ (warehouse/report.md, releases/, world_realism.json)",
                 # Last: what a newcomer does next.
                 "Flow runs: make ui (or .venv/bin/revbench ui), then open http://127.0.0.1:4200" if track else
                 "Not tracked (--no-track): `revbench status` lists the runs; tracked ones show in `make ui`")


def best_scorer(cells: dict[str, dict[str, dict[str, Any]]], pairs: list[dict[str, Any]],
                split: str) -> tuple[str | None, list[str]]:
    """The scorer with the lowest loss on ``split`` and the scorers it is not separated from
    (``separation.json``'s pairs; where a pair is missing, overlapping intervals): an empty list
    means it is the best by the intervals."""
    have = {s: c[split] for s, c in cells.items() if split in c}
    if not have:
        return None, []
    low = min(have, key=lambda s: have[s]["value"])
    separated = {(p["scorer_a"], p["scorer_b"]): bool(p.get("separated")) for p in pairs if p.get("split") == split}
    holding = []
    for other in have:
        if other == low:
            continue
        if (low, other) in separated:
            ok = separated[(low, other)]
        elif (other, low) in separated:
            ok = False  # the other is A: its loss is the lower on the shared tuples
        else:
            ok = (have[low].get("ci_high") or 0) < (have[other].get("ci_low") or 0)
        if not ok:
            holding.append(other)
    return low, holding


def _cell(r: dict[str, Any] | None, best: bool) -> str:
    if r is None:
        return "-"
    lo, hi = r.get("ci_low"), r.get("ci_high")
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{r['value']:.3f}{ci}{'*' if best else ' '}"


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return got if isinstance(got, list) else []


def _same_split(rows: list[dict[str, Any]], a: str, b: str) -> bool:
    """Whether splits ``a`` and ``b`` have the same loss for every scorer (the same pairs)."""
    def losses(split: str) -> dict[str, Any]:
        return {r["scorer"]: (r["value"], r.get("n")) for r in rows if r["split"] == split and r["metric"] == "loss"}

    return bool(losses(a)) and losses(a) == losses(b)


class _ToReport(logging.Handler):
    """Log records into the report being written; warnings counted for the account's last lines."""

    def __init__(self, story: Story, level: int) -> None:
        super().__init__(level)
        self.story = story

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "run_log_only", False):  # printed by the stage's printer already
            return
        if record.levelno >= logging.WARNING:
            self.story.warnings += 1
        try:
            console.to_report(f"{record.levelname:<8} {record.getMessage()}")
        except Exception:  # a log line must never end the demo
            self.handleError(record)


def _screen_errors_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


@contextmanager
def told(story: Story, report: Path, verbose: bool, track: bool) -> Iterator[None]:
    """While the demo runs: what the stages print and what revbench logs go to ``report``; on the
    screen only the account and errors, unless ``verbose`` (then everything, as before). Prefect's
    own lines (a task run finished) stay in the Prefect UI (``prepare_process(run_lines=False)``)."""
    if track:
        # Prefect sets up its logging on first use, removing the root logger's handlers: first, then.
        import prefect.main  # noqa: F401

    ours = logging.getLogger("revbench")
    screen = [h for h in ours.handlers if not type(h).__module__.startswith("prefect")]
    from_ours, from_prefect = _ToReport(story, logging.NOTSET), _ToReport(story, logging.WARNING)
    ours.addHandler(from_ours)
    # Prefect's run loggers (a flow's warning about its outcome) reach the root logger.
    logging.getLogger().addHandler(from_prefect)
    if not verbose:
        for h in screen:
            h.addFilter(_screen_errors_only)
    try:
        with console.report_to(report, shown=verbose):
            try:
                yield
            except BaseException:
                console.tell(f"the demo stopped; what it printed so far: {shown(report)}", markup=False, highlight=False)
                raise
    finally:
        ours.removeHandler(from_ours)
        logging.getLogger().removeHandler(from_prefect)
        for h in screen:
            h.removeFilter(_screen_errors_only)
