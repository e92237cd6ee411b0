"""The corpus's commands, in the stages' order: ``ingest`` (arXiv, Semantic Scholar and GROBID into
the warehouse), ``graph`` (references, topics and affiliations) and ``disambiguate`` (author mentions
to canonical authors), each with what it prints; the graph's coverage is ``status``'s too."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table as RichTable

from revbench.app.cli_common import MixWorlds, Track, fetching, mixed, parse_date, setup
from revbench.app.console import console
from revbench.app.entry import check_output_file, resolve_track
from revbench.errors import UsageError

if TYPE_CHECKING:  # the flows load only when a command runs one
    from revbench.flows.disambiguate import DisambiguationResult
    from revbench.flows.graph import GraphResult
    from revbench.flows.ingest import IngestResult


@fetching(("ingest",))
def ingest(
    since: Annotated[str, typer.Option(help="First last-revision date, YYYY-MM-DD")],
    until: Annotated[str, typer.Option(help="Last last-revision date, YYYY-MM-DD (inclusive)")],
    categories: Annotated[list[str] | None, typer.Option("--categories", "-c", help="arXiv categories (default: settings)")] = None,
    json_out: Annotated[Path | None, typer.Option(help="Also write the run summary as JSON")] = None,
    mix_worlds: MixWorlds = False,
    track: Track = None,
) -> None:
    """Crawl arXiv, enrich with Semantic Scholar, extract PDFs with GROBID and load the corpus."""
    s, u = parse_date(since, "--since"), parse_date(until, "--until")
    if u < s:
        raise UsageError(f"--until {until} is before --since {since}")
    if json_out:
        check_output_file(json_out, "--json-out")
    settings = setup(**({"arxiv.categories": categories} if categories else {}), **mixed(mix_worlds))
    from revbench.flows.ingest import ingest_flow

    summary = ingest_flow.run(settings, s, u, track=resolve_track(track, long_flow=True))
    print_ingest_summary(summary)
    if json_out:
        json_out.write_text(json.dumps({k: v for k, v in asdict(summary).items() if k != "summary_markdown"}, indent=2,
                                       default=str))


BULK_KINDS = {"s2ag": "s2.bulk_dir", "openalex": "openalex.snapshot_dir"}
"""``--from KIND=DIR``: the setting each kind of bulk folder stands for in one graph run."""


def parse_bulk_from(items: list[str]) -> dict[str, Path]:
    """``--from KIND=DIR`` (repeatable) as settings overrides (``{"s2.bulk_dir": DIR}``), checked
    before any work: a kind other than s2ag or openalex, a folder that does not exist, or a kind
    given twice is one line naming the flag."""
    out: dict[str, Path] = {}
    for item in items:
        kind, eq, path = (part.strip() for part in item.partition("="))
        if not eq or not kind or not path:
            raise UsageError(f"--from {item!r} is not KIND=DIR (KIND: {' or '.join(BULK_KINDS)})")
        if kind not in BULK_KINDS:
            raise UsageError(f"--from {item!r}: KIND is {' or '.join(BULK_KINDS)}, not {kind!r}")
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise UsageError(f"--from {item!r}: {folder} is not a folder")
        if BULK_KINDS[kind] in out:
            raise UsageError(f"--from {kind}= is given twice ({out[BULK_KINDS[kind]]} and {folder})")
        out[BULK_KINDS[kind]] = folder
    return out


@fetching(("graph",), flag=False)
def graph(
    openalex: Annotated[bool | None, typer.Option("--openalex/--no-openalex", help="Ask OpenAlex too (default: REVBENCH_OPENALEX__ENABLED)")] = None,
    bulk_from: Annotated[list[str], typer.Option("--from", metavar="KIND=DIR", help="KIND=DIR, repeatable: read the graph from bulk files in DIR before the API, for this run (s2ag: Semantic Scholar's datasets, as REVBENCH_S2__BULK_DIR; openalex: the OpenAlex snapshot, as REVBENCH_OPENALEX__SNAPSHOT_DIR, and OpenAlex asked)")] = [],  # noqa: B006
    track: Track = None,
) -> None:
    """Fetch references, topics and affiliations for papers not asked yet, and resolve cited works to our papers."""
    folders = parse_bulk_from(bulk_from)
    if openalex is False and BULK_KINDS["openalex"] in folders:
        raise UsageError("--from openalex=... reads OpenAlex's snapshot; --no-openalex turns OpenAlex off: give one")
    if BULK_KINDS["openalex"] in folders:
        openalex = True
    settings = setup(**({"openalex.enabled": openalex} if openalex is not None else {}), **folders)
    from revbench.flows.graph import graph_flow

    print_graph(graph_flow.run(settings, track=resolve_track(track, long_flow=True)))


def disambiguate(
    fallback: Annotated[bool, typer.Option("--fallback", help="Use the offline fallback even when an LLM is configured")] = False,
    track: Track = None,
) -> None:
    """Resolve author mentions to canonical authors (re-deciding only blocks whose inputs changed)."""
    settings = setup(**({"disambiguate.use_llm": False} if fallback else {}))
    from revbench.flows.disambiguate import disambiguate_flow

    print_disambiguation(disambiguate_flow.run(settings, track=resolve_track(track, long_flow=True)))


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
    print_graph_coverage(res.coverage)


def _share(n: int, of: int) -> str:
    return f"{n} ({100 * n / of:.0f}%)" if of else str(n)


def print_graph_coverage(graph: dict[str, Any]) -> None:
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
