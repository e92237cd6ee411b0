"""The pools' command: ``pools`` (a sampling round: query papers, their recalled candidates,
conflicts filtered, screening and invitations), with what it prints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table as RichTable

from revbench.app.cli_common import MixWorlds, Track, fetching, mixed, setup
from revbench.app.console import console
from revbench.app.entry import resolve_track
from revbench.errors import UsageError
from revbench.settings import Settings

if TYPE_CHECKING:  # the flow loads only when the command runs it
    from revbench.flows.pools import PoolsResult


@fetching(("pools",))
def pools(
    round: Annotated[int, typer.Option("--round", min=1, help="Sampling round (re-running a round reproduces it)")] = 1,
    per_category: Annotated[int | None, typer.Option(help="Query papers per category")] = None,
    tau: Annotated[float | None, typer.Option(help="Similarity threshold of neighbours, 0 < tau <= 1")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Rebuild a round that has invitations with other parameters (the current version is kept as superseded)")] = False,
    target_from_report: Annotated[Path | None, typer.Option(help="Size the round from an evaluation report folder (its separation.json): the query papers per category that would separate the closest scorer pair on paper-centric tuples, at the yield of the rounds so far")] = None,
    target_pair: Annotated[str | None, typer.Option(help="With --target-from-report: the scorer pair A,B to separate (default: the one needing the fewest more anchors)")] = None,
    mix_worlds: MixWorlds = False,
    track: Track = None,
) -> None:
    """Sample query papers, recall candidates, filter conflicts, screen and assign invitations."""
    if target_from_report is not None and per_category is not None:
        raise UsageError("--per-category and --target-from-report both size the round; give one")
    if target_pair is not None and target_from_report is None:
        raise UsageError("--target-pair needs --target-from-report DIR")
    changes = {k: v for k, v in {"pools.queries_per_category": per_category, "pools.tau": tau}.items() if v is not None}
    settings = setup(**changes, **mixed(mix_worlds))
    if target_from_report is not None:
        settings = settings.with_overrides(pools={"queries_per_category": _round_target(settings, target_from_report, target_pair)})
    from revbench.flows.pools import pools_flow

    stats = pools_flow.run(settings, round=round, replace=replace, track=resolve_track(track, long_flow=True))
    print_pools(stats, tau_report=True)


def _round_target(settings: Settings, report: Path, pair: str | None) -> int:
    """Query papers per category for the next round, from a report's scorer pairs (says how)."""
    from rich.markup import escape

    from revbench.evaluation.separation import next_round_pair, read_separation
    from revbench.tasks.pools import round_target
    from revbench.warehouse import Warehouse

    if pair is not None and "," not in pair:
        raise UsageError(f"--target-pair {pair!r}: give two scorer names as A,B")
    chosen = next_round_pair(read_separation(report.expanduser()), pair)
    if not settings.warehouse_path.exists():
        raise UsageError(f"no warehouse at {settings.warehouse_path}: run `revbench ingest` and a first round first")
    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        queries, anchors = wh.pools.round_yield()
    try:
        target = round_target(chosen["more_clusters"], anchors, queries, len(settings.arxiv.categories))
    except ValueError as exc:
        raise UsageError(f"--target-from-report: {exc}") from None
    console.print(f"Round size from {escape(str(report))}: {escape(chosen['scorer_a'])} vs {escape(chosen['scorer_b'])} "
                  f"need {target.line()}; "
                  "that separates them about half the time if their difference is the true one (x2.04 for 80%)")
    return target.per_category


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
