"""What the command line prints: run summaries as tables."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from rich.table import Table as RichTable

from revbench.app.narrow import FittingConsole

if TYPE_CHECKING:  # the flows load only when a command runs one
    from revbench.flows.disambiguate import DisambiguationResult
    from revbench.flows.embed import EmbedResult
    from revbench.flows.graph import GraphResult
    from revbench.flows.ingest import IngestResult
    from revbench.flows.pools import PoolsResult
    from revbench.flows.ratings import RatingsResult
    from revbench.flows.refresh import RefreshResult
    from revbench.flows.release import ReleaseResult
    from revbench.flows.survey import SurveyResend, SurveyWave
    from revbench.flows.train import Trained, TrainSkipped
    from revbench.flows.train_attention import AttentionTrained
    from revbench.flows.train_contrastive import AugmentTrained

console = FittingConsole()
err_console = FittingConsole(stderr=True)


def print_ingest_summary(summary: IngestResult) -> None:
    """Stages, rejects by reason and totals."""
    t = RichTable(title="Ingest stages")
    for col in ("stage", "in", "out", "rejected", "seconds"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for s in summary.stages:
        t.add_row(s["stage"], str(s["rows_in"]), str(s["rows_out"]), str(s["rejected"]), f"{s['seconds']:.1f}")
    console.print(t)
    r = RichTable(title="Papers rejected, by reason")
    r.add_column("reason")
    r.add_column("this run", justify="right")
    r.add_column("in warehouse", justify="right")
    for reason, n in summary.rejects_in_warehouse.items():
        r.add_row(reason, str(summary.rejects_this_run.get(reason, 0)), str(n))
    console.print(r)
    tot = summary.totals
    console.print(
        f"[bold]{tot['papers']}[/] papers and [bold]{tot['mentions']}[/] author mentions in the warehouse; "
        f"{tot['rejects']} papers rejected."
    )
    console.print(f"Warehouse: [cyan]{summary.warehouse}[/]")


def print_disambiguation(res: DisambiguationResult, quality: dict[str, float] | None = None) -> None:
    """Authors and merges by method; with ``quality``, the scores against a SYNTHETIC truth."""
    t = RichTable(title=f"Author disambiguation (decider {res.decider})")
    t.add_column("method")
    t.add_column("merges this run", justify="right")
    t.add_column("mentions linked by", justify="right")
    for m in ("orcid", "email", "affiliation", "openalex", "llm", "fallback", "singleton"):
        if m == "openalex" and not (res.merges.get(m) or res.links_by_method.get(m)):
            continue  # the graph's ids only where the graph gave some: a graph-less run prints as before
        t.add_row(m, str(res.merges.get(m, 0)), str(res.links_by_method.get(m, 0)))
    console.print(t)
    console.print(
        f"{res.mentions} mentions -> [bold]{res.authors}[/] authors, {res.edges} co-authorship edges; "
        f"{res.blocks_decided} of {res.blocks} name blocks decided this run; LLM calls {res.llm_calls} "
        f"({res.llm_cached} from cache)."
    )
    if quality is not None:
        q = quality
        console.print(
            f"Against the SYNTHETIC world's truth: pairwise precision [bold]{q['pairwise_precision']:.3f}[/], "
            f"recall {q['pairwise_recall']:.3f}, F1 {q['pairwise_f1']:.3f}; B-cubed precision {q['bcubed_precision']:.3f}, "
            f"recall {q['bcubed_recall']:.3f} ({q['predicted_authors']} authors found, {q['true_authors']} real)."
        )


def print_pools(stats: PoolsResult, coi_violations: int | None = None, tau_report: bool = False,
                planted: list[dict[str, Any]] | None = None) -> None:
    """Pool sizes through the filters, exclusions, invitations; the COI audit of a SYNTHETIC world."""
    t = RichTable(title=f"Candidate pools, round {stats.round} ({stats.queries} queries)")
    for col in ("stage", "median", "mean", "queries with none"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for v, label in ((stats.pool_before_coi, "recalled"), (stats.pool_after_coi, "after COI"),
                     (stats.pool_after_screening, "after screening")):
        t.add_row(label, f"{v['median']:.0f}", f"{v['mean']:.1f}", str(v["zero"]))
    console.print(t)
    console.print(
        "exclusions: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.exclusions.items())) +
        f"; {stats.assignments} invitations to {stats.invited_candidates} candidates (at most "
        f"{stats.max_queries_per_candidate} queries each); {stats.queries_short_of_target} queries below target; "
        f"{stats.embedded_now} papers embedded now; files in {stats.out_dir}"
    )
    from revbench.flows.pools import recall_line

    console.print(recall_line(stats), markup=False, highlight=False)
    if coi_violations is not None:
        console.print(f"COI audit against the SYNTHETIC truth: {coi_violations} invitations pair a reviewer with a "
                      "paper they or a co-author of its authors wrote, or a planted conflict.")
    for p in planted or []:
        ways = [w for w, paths in (("similarity", ("semantic", "both")), ("citation", ("citation", "both")))
                if set(paths) & set(p.get("paths", []))]
        by = f" (recalled by {' and '.join(ways)})" if ways else ""
        how = (f"[green]caught[/]{by}: excluded as " + ", ".join(p["reasons"]) if p["caught"] else
               "[red]NOT caught[/]: " + ("invited" if p["invited"] else "not excluded" if p["recalled"] else "never recalled"))
        console.print(f"Planted {p['kind'].replace('_', '-')} conflict on query {p['query_id']} ({p['detail']}): {how}.")
    if tau_report:
        tr = RichTable(title="Pool size by threshold (to choose tau)")
        for col in ("tau", "median", "mean", "p90", "queries without candidates"):
            tr.add_column(col, justify="right")
        for r in stats.tau_report:
            tr.add_row(f"{r['tau']:.2f}", f"{r['median']:.0f}", f"{r['mean']:.1f}", f"{r['p90']:.0f}",
                       str(r["queries_without_candidates"]))
        console.print(tr)


def print_report(tables: list[Any]) -> None:
    """Evaluation report tables (``revbench.evaluation.report.ReportTable``), best values in bold."""
    import re

    for t in tables:
        if not t.header:
            # A line in place of a table: what is absent and why.
            console.print(t.title.lstrip("# "), markup=False)
            continue
        table = RichTable(title=t.title.lstrip("# "), title_justify="left")
        for i, h in enumerate(t.header):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in t.rows:
            table.add_row(*[re.sub(r"\*\*(.+?)\*\*", r"[bold]\1[/]", c.replace("[", "\\[")) for c in row])
        console.print(table)
        for note in getattr(t, "notes", []):
            console.print(f"  {note}", markup=False, highlight=False)


def print_markdown(markdown: str) -> None:
    """A markdown report (tables render as tables)."""
    from rich.markdown import Markdown

    console.print(Markdown(markdown))


def print_status(st: Any) -> None:
    """Rows per table, rejects by reason and the latest runs; while a flow holds the warehouse,
    what that flow reports of itself (``revbench.warehouse.status.WarehouseStatus``); then the runs
    waiting for a curator, each as the block it printed when it paused."""
    from revbench.warehouse.holder import describe_waiting

    _print_status(st)
    for info in st.waiting:
        console.print(describe_waiting(info), markup=False, highlight=False)


def _print_status(st: Any) -> None:
    h = st.holder
    if st.busy:
        if h:
            where = f"stage {h['stage']}" if h.get("stage") else "starting"
            if h.get("progress"):
                where += f" ({h['progress']['done']}/{h['progress']['total']})"
            console.print(f"A run is in progress: [bold]{h.get('flow')}[/] {h.get('run_id')} (pid {h.get('pid')}, "
                          f"since {h.get('started_at')}), now in {where}; last update {h.get('updated_at')}.")
            done = RichTable(title="Stages finished so far")
            for col in ("stage", "in", "out", "rejected", "seconds"):
                done.add_column(col, justify="left" if col == "stage" else "right")
            for s in h.get("stages") or []:
                done.add_row(s["stage"], str(s["rows_in"]), str(s["rows_out"]), str(s["rejected"]), f"{s['seconds']:.1f}")
            console.print(done)
        else:
            console.print("Another process holds the warehouse (no run record beside it).")
        console.print(f"Table counts are shown once it has finished: {st.path}")
        return
    from revbench.schemas.graph import GRAPH_TABLES

    t = RichTable(title=f"Warehouse {st.path} (schema v{st.version})")
    t.add_column("table")
    t.add_column("rows", justify="right")
    # Until a graph is fetched its empty tables are left out, so the table reads as it did before them.
    hidden: set[str] = set() if st.graph else {g.name for g in GRAPH_TABLES}
    for name, n in st.counts.items():
        if name not in hidden:
            t.add_row(name, str(n))
    console.print(t)
    if st.graph:
        _print_graph(st.graph)
    r = RichTable(title="Rejected papers by reason")
    r.add_column("reason")
    r.add_column("papers", justify="right")
    for row in st.rejects:
        r.add_row(row["reason"], str(row["n"]))
    console.print(r)
    u = RichTable(title="Latest runs")
    cols = ("run_id", "flow", "status", "started_at", "finished_at")
    for col in cols:
        u.add_column(col)
    for row in st.runs:
        u.add_row(*[str(row[c]) for c in cols])
    console.print(u)
    if h and not h.get("alive"):
        console.print(f"run {h.get('run_id')} ({h.get('flow')}) stopped without finishing; the next run marks it crashed.")


def _share(n: int, of: int) -> str:
    return f"{n} ({100 * n / of:.0f}%)" if of else str(n)


def _print_graph(graph: dict[str, Any]) -> None:
    """Graph coverage (``Warehouse.graph.graph_coverage``): per source, the corpus's papers with references
    and with topics, and the references resolved to a warehouse paper; then institutions and affiliations."""
    papers = graph["papers"]
    g = RichTable(title=f"Graph coverage ({papers} papers in the corpus)")
    for col in ("source", "papers with references", "references", "resolved to our papers", "papers with topics"):
        g.add_column(col, justify="left" if col == "source" else "right")
    for s in graph["sources"]:
        g.add_row(s["source"], _share(s["papers_with_references"], papers), str(s["references"]),
                  _share(s["resolved"], s["references"]), _share(s["papers_with_topics"], papers))
    console.print(g)
    console.print(f"graph institutions: {graph['institutions']} ({graph['with_ror']} with a ROR id); affiliations: "
                  f"{graph['affiliations']} of {graph['people']} people at {graph['affiliated_institutions']} institutions",
                  markup=False, highlight=False)


def print_graph(res: GraphResult) -> None:
    """A graph run: papers asked and answered, what was saved, failures, match rates, then coverage."""
    console.print(f"Graph run {res.run_id[:8]}: asked {res.papers_asked} papers ({res.papers_answered} answered, "
                  f"{res.failed} failed and asked again next run); saved {res.references_saved} references, "
                  f"{res.topics_saved} topics, {res.affiliations_saved} affiliations; {res.re_resolved} older "
                  f"references resolved ({res.re_checked} looked at again, {res.unresolved} still name no paper of "
                  "ours)", markup=False, highlight=False)
    for r in res.match_rates:
        console.print(f"  {r['source']} references matched to our papers: {r['resolved']} of {r['references']} "
                      f"(doi {r.get('doi', 0)}, arXiv id {r.get('arxiv', 0)}, title and year {r.get('title_year', 0)})",
                      markup=False, highlight=False)
    for note in res.notes:
        console.print(f"  {note}", markup=False, highlight=False)
    _print_graph(res.coverage)


def print_survey_wave(stats: SurveyWave) -> None:
    """What one survey wave did."""
    line = (f"round {stats.round} {stats.kind}s: {stats.rendered} rendered now, {stats.pending} waiting to be sent, "
            f"{len(stats.left_out)} people left out, {stats.opted_out} opted out in all")
    if stats.outbox:
        line += f"; dry run: .eml files in {stats.outbox}, nothing sent"
    elif stats.decision is not None:
        line += (f"; {stats.decision} by {stats.approver}: {stats.sent} sent, {stats.failed} failed, "
                 f"{stats.deferred} deferred to the next run, {stats.unconfirmed} unconfirmed")
    if stats.interrupted:
        line += f"; {stats.interrupted} found unconfirmed after an interrupted run"
    console.print(line)
    print_unconfirmed(stats.unconfirmed_messages)


def print_survey_resend(stats: SurveyResend) -> None:
    """What one resend did."""
    console.print(f"resend of {stats.requested} named messages by {stats.approver}: {stats.sent} sent, "
                  f"{stats.failed} failed, {stats.deferred} deferred (they wait with their wave), "
                  f"{stats.unconfirmed} unconfirmed again, {stats.opted_out} not sent (opted out)")
    print_unconfirmed(stats.unconfirmed_messages)


def print_unconfirmed(rows: list[dict[str, Any]]) -> None:
    """Messages that may or may not have arrived, for the curator to check before any resend."""
    if not rows:
        return
    # Plain lines, never wrapped: the ids are copied from here into `survey resend`.
    say = functools.partial(console.print, markup=False, highlight=False, soft_wrap=True)
    say(f"{len(rows)} unconfirmed messages: they may have arrived, so nothing sends them again by itself; check with the "
        "recipient or the server's log, then `revbench survey resend MESSAGE_ID ...` sends those named:")
    for r in rows:
        say(f"  {r['message']}  to {r['to']}  ({r['kind']}, round {r['round']})  since {r['since'] or '?'}  "
            f"server {r['server'] or '?'}: {r['why']}")


def print_survey_status(counts: dict[str, Any], unconfirmed: list[dict[str, Any]] | None = None) -> None:
    """Survey counts as a table, then the unconfirmed messages."""
    t = RichTable(title="Survey")
    t.add_column("what")
    t.add_column("count", justify="right")
    for k, v in counts.items():
        t.add_row(k.replace("_", " "), str(v))
    console.print(t)
    print_unconfirmed(unconfirmed or [])


def print_ratings(out: RatingsResult, quality: dict[str, Any] | None = None) -> None:
    """What one ratings run did: events in, ratings out by status, flags and their decisions,
    tuples, statistics, and the evaluation when it ran; with ``quality``, the flags judged
    against a SYNTHETIC truth."""
    if out.survey_store:
        line = out.survey_store
        console.print(line[0].upper() + line[1:], markup=False, highlight=False, soft_wrap=True)  # one greppable line
    console.print(
        f"Ratings: {out.events_pulled} new survey events ({out.events} in all: {out.duplicates} duplicates "
        f"superseded, {out.skips} skips, {out.unknown_invitation + out.unknown_paper + out.invalid_rating} rejected) -> "
        f"[bold]{out.ratings}[/] ratings: {out.kept} kept, {out.dropped} dropped, {out.pending} pending; "
        f"{out.paper_centric_tuples} paper-centric and {out.reviewer_centric_tuples} reviewer-centric tuples.")
    if out.flag_list:
        t = RichTable(title=f"Quality flags ({out.flags_asked} asked this run)", title_justify="left")
        for col in ("flag", "ratings", "evidence", "decision"):
            t.add_column(col)
        for f in out.flag_list:
            ev = ", ".join(f"{k}={v}" for k, v in f["evidence"].items() if k != "ratings")
            t.add_row(f["flag_id"], str(len(f["paper_ids"])), ev, f"{f['decision'] or 'undecided'} ({f['decided_by'] or '-'})")
        console.print(t)
    if quality:
        console.print(
            f"Flags against the [yellow]SYNTHETIC[/] truth: {quality['flagged']} respondents flagged, "
            f"{quality['planted']} planted low-effort respondents answered; precision {quality['precision']:.2f}, "
            f"recall {quality['recall']:.2f}")
    print_markdown(out.statistics)
    if out.figure:
        console.print(f"Figure: [cyan]{out.figure}[/]")
    if out.evaluation:
        console.print("Evaluation on the warehouse benchmark:")
        print_report(out.evaluation.tables)
        console.print(f"Evaluation report: [cyan]{out.evaluation.report_dir}[/]")


def print_release(out: ReleaseResult) -> None:
    """One line on what a release run made."""
    c = out.counts
    if out.unchanged:
        console.print(f"Nothing changed since the published release [bold]{out.version}[/]: no release built, none put "
                      f"to a curator ({out.dir}; --force builds one anyway)")
        return
    status = {"published": f"published by {out.decided_by}", "rejected": f"rejected by {out.decided_by}",
              "built": "built; it waits for a curator's go (--approve yes|no)"}[out.status or "built"]
    audited = f" ({out.audit_strings} strings)" if out.audit_strings is not None else " (when it was built)"
    console.print(f"Release [bold]{out.version}[/] (parent {out.parent or 'none'}): {c['pointwise']} ratings, "
                  f"{c['paper_centric']} paper-centric and {c['reviewer_centric']} reviewer-centric tuples, {c['papers']} papers, "
                  f"{c['reviewers']} reviewers; privacy audit passed{audited} -> [cyan]{out.dir}[/]; {status}")
    if out.evaluation:
        console.print(f"Evaluation of release {out.version}:")
        print_report(out.evaluation.tables)


def print_labels(r: Any) -> None:
    """What ``revbench labels`` wrote (a ``flows.labels.LabelsResult``), its agreement with the survey
    and how to evaluate it."""
    console.print(f"Weak benchmark {r.version} ({r.source}) in [cyan]{r.out}[/]: {r.submissions} submissions, "
                  f"{r.reviewers} reviewers, {r.positives} weak positives among {r.candidates} candidates", soft_wrap=True)
    console.print(r.agreement.line(), highlight=False, soft_wrap=True)
    console.print(f"Evaluate it: revbench evaluate -b weak={r.out}", highlight=False, soft_wrap=True)


def print_release_verified(release: Any) -> None:
    """One line: the release matches its manifest (and the warehouse's record of it)."""
    against = ("its manifest, as recorded in the warehouse when it was built" if release.recorded
               else "its own manifest (no warehouse record of this folder)")
    console.print(f"release {release.version} verified: {len(release.manifest['files'])} files match {against} "
                  f"(manifest sha256 {release.digest[:12]}...) -> {release.path}", markup=False, highlight=False,
                  soft_wrap=True)


def print_release_report(rows: Any, metric: str, split: str, png: Any) -> None:
    """``metric`` per scorer (rows) and release (columns)."""
    versions = list(dict.fromkeys(rows["version"].to_list()))
    t = RichTable(title=f"{metric} on {split}, across releases", title_justify="left")
    t.add_column("scorer")
    for v in versions:
        t.add_column(v, justify="right")
    for scorer in sorted(set(rows["scorer"].to_list())):
        got = {v: x for s, v, x in rows.select("scorer", "version", "value").iter_rows() if s == scorer}
        t.add_row(scorer, *[("-" if got.get(v) is None else f"{got[v]:.3f}") for v in versions])
    console.print(t)
    console.print(f"Plot: [cyan]{png}[/]")



def print_refresh(out: RefreshResult) -> None:
    """Each stage of a refresh: ran or skipped, why, and how long it took."""
    t = RichTable(title=f"Refresh {out.run_id[:8]} over {out.since}..{out.until} ({out.status})")
    for col in ("stage", "status", "why", "seconds"):
        t.add_column(col, justify="right" if col == "seconds" else "left")
    for r in out.stages:
        colour = {"ran": "green", "skipped": "dim", "failed": "red"}.get(r.status, "")
        t.add_row(r.stage, f"[{colour}]{r.status}[/]", r.reason, f"{r.seconds:.1f}")
    console.print(t)


def print_embed(out: EmbedResult) -> None:
    """Texts per benchmark and model: encoded now, reused, and where the export is."""
    t = RichTable(title=f"Embeddings on {out.device}")
    for col in ("benchmark", "model", "texts", "encoded now", "reused", "export"):
        t.add_column(col, justify="right" if col in ("texts", "encoded now", "reused") else "left")
    for r in out.rows:
        t.add_row(r.benchmark, r.model, str(r.texts), str(r.encoded), str(r.reused), r.export)
    console.print(t)


def print_train(out: Trained | TrainSkipped | AttentionTrained | AugmentTrained) -> None:
    """What the training did and the scorer it registered."""
    if out.status == "skipped":
        console.print(f"Nothing to do: {out.reason}.\nScorer: [cyan]{out.scorer}[/]", soft_wrap=True)
        return
    resumed = f", resumed at step {out.resumed_from}" if out.resumed_from else ""
    if getattr(out, "resume_note", ""):  # a damaged checkpoint set aside: the curator should know
        console.print(out.resume_note, markup=False, highlight=False, soft_wrap=True)  # type: ignore[union-attr]
    objective = "attention" if hasattr(out, "temperature") else getattr(out, "objective", "rate")
    if objective != "rate":
        what = {"attention": f"Attention over reviewers' papers: {getattr(out, 'submissions', 0)} training papers "
                             f"({getattr(out, 'skipped_papers', 0)} left out)",
                "augment": f"Two views of each of {getattr(out, 'pairs', 0)} unrated papers",
                "factors": f"{getattr(out, 'pairs', 0)} factor pairs (citation, topic, semantic) among unrated papers"}
        tail = (f", learned temperature {out.temperature:.3f}" if objective == "attention"  # type: ignore[union-attr]
                else f", {out.pairs_per_second:.1f} rows/s")  # type: ignore[union-attr]
        console.print(f"{what[objective]}, {out.steps} steps{resumed}: loss {out.first_loss:.4f} -> "  # type: ignore[union-attr]
                      f"{out.last_loss:.4f}{tail}", soft_wrap=True)  # type: ignore[union-attr]
        console.print(f"Scorer: [cyan]{out.scorer}[/]", soft_wrap=True)
        return
    p = out.provenance  # type: ignore[union-attr]
    console.print(
        f"{p.triplets} triplets ({', '.join(f'{k} {v}' for k, v in sorted(p.by_view.items()))}) from "
        f"{p.papers} papers and {p.reviewers} keyword profiles; skipped anchors: "
        + (", ".join(f"{k} {v}" for k, v in sorted(p.skipped.items())) or "none"))
    console.print(f"{out.steps} steps{resumed}: loss {out.first_loss:.4f} -> {out.last_loss:.4f}, "  # type: ignore[union-attr]
                  f"{out.pairs_per_second:.1f} triplets/s")  # type: ignore[union-attr]
    console.print(f"Scorer: [cyan]{out.scorer}[/] (evaluate it with --scorer rate --scorer '{out.scorer}' --baseline rate)")


def print_doctor(probes: list[Any], as_json: bool = False) -> None:
    """``revbench doctor``'s table (service, URL, result, latency, version, what it found), then one
    line per failure naming the service, its URL and what to fix; or all of it as JSON."""
    import json

    from rich.markup import escape

    from revbench.app.doctor import as_json as doctor_json
    from revbench.app.doctor import failed, failure_line

    if as_json:
        console.print(json.dumps(doctor_json(probes), indent=1), markup=False, highlight=False, soft_wrap=True)
        return
    style = {"ok": "green", "warn": "yellow", "fail": "bold red", "skipped": "dim"}
    shown = {"ok": "ok", "warn": "warn", "fail": "FAIL", "skipped": "-"}
    t = RichTable(title="revbench doctor")
    t.add_column("service", no_wrap=True)
    t.add_column("URL", overflow="fold")
    t.add_column("result", no_wrap=True)
    t.add_column("latency", justify="right", no_wrap=True)
    t.add_column("version", overflow="fold")
    t.add_column("detail")
    for p in probes:
        latency = f"{p.latency_ms:.0f} ms" if p.latency_ms is not None else ""
        result = "not needed" if p.status == "skipped" and p.detail.startswith("not needed") else shown[p.status]
        # A failure's whole story is its line below the table; the table keeps to the gist.
        detail = p.detail if len(p.detail) <= 72 else p.detail[:71] + "…"
        t.add_row(p.label, escape(p.url), f"[{style[p.status]}]{result}[/]", latency, escape(p.version or ""),
                  escape(detail))
    console.print(t)
    bad = failed(probes)
    for p in bad:
        console.print(f"[bold red]FAIL[/] {escape(failure_line(p))}", soft_wrap=True, highlight=False)
    for p in probes:
        if p.status == "warn":
            console.print(f"[yellow]warn[/] {escape(failure_line(p))}", soft_wrap=True, highlight=False)
    counts = {s: sum(1 for p in probes if p.status == s) for s in ("ok", "warn", "fail", "skipped")}
    verdict = "[bold red]not ready[/]" if bad else "[green]ready[/]"
    console.print(f"{verdict}: {counts['ok']} ok, {counts['warn']} warnings, {counts['fail']} failed, "
                  f"{counts['skipped']} not checked", highlight=False)


def print_backup(out: Any) -> None:
    """A snapshot written (``revbench.flows.backup.BackupResult``): where, what it holds, what was pruned."""
    from rich.markup import escape

    mib = out.bytes / 2**20
    console.print(f"Backup written: [bold]{escape(out.path)}[/] ({out.files} files, {mib:.1f} MiB, taken {out.created_at})",
                  soft_wrap=True, highlight=False)
    if out.last_run:
        console.print(f"  warehouse: {out.warehouse_runs} runs, the last {escape(out.last_run)}", highlight=False)
    if out.store_epoch:
        console.print(f"  survey store: {out.store_answers} answers (epoch {out.store_epoch})", highlight=False)
    for p in out.pruned:
        console.print(f"  removed the older snapshot {escape(p)} (keeping the newest {out.kept})", soft_wrap=True,
                      highlight=False)
    console.print(f"Restore it with: revbench restore --from {escape(out.path)}", soft_wrap=True, highlight=False)


def print_restore(out: Any) -> None:
    """What a restore did (``revbench.backup.restore.RestoreResult``): each part, what was carried over, where the
    live files went."""
    from rich.markup import escape

    console.print(f"Restored [bold]{escape(str(out.backup))}[/] (taken {out.created_at})", soft_wrap=True, highlight=False)
    console.print(f"  warehouse: {escape(out.warehouse)}", soft_wrap=True, highlight=False)
    console.print(f"  survey store: {escape(out.survey_store)}", soft_wrap=True, highlight=False)
    for line in out.newer.parts():
        console.print(f"  the live data had: {escape(line)}", soft_wrap=True, highlight=False)
    kept = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in out.carried.items() if v)
    if kept:
        console.print(f"  carried over: {escape(kept)}", soft_wrap=True, highlight=False)
    console.print(f"  the live files as they were: {escape(str(out.set_aside))}/ (restore.json says what was done)",
                  soft_wrap=True, highlight=False)
    console.print("The next ratings pull (`revbench ratings`) brings in every answer given since the backup.",
                  soft_wrap=True, highlight=False)
