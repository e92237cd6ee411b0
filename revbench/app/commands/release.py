"""The release's commands: ``release`` (the cleaned benchmark as a versioned, audited, checksummed
release folder, published on a curator's go), ``release verify`` (one checked against its manifest)
and ``report`` (results across releases, or a page to share), with what each prints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table as RichTable

from revbench.app.cli_common import Track, setup
from revbench.app.commands.evaluate import print_evaluation
from revbench.app.console import console
from revbench.app.entry import check_output_dir, resolve_track
from revbench.errors import UsageError

if TYPE_CHECKING:  # the flow loads only when the command runs it
    from revbench.flows.release import ReleaseResult

release_app = typer.Typer(help="Export the cleaned benchmark as a versioned, audited, checksummed release folder, "
                                "published on a curator's go; `release verify PATH` checks one.",
                           invoke_without_command=True)


@release_app.callback()
def release(
    ctx: typer.Context,
    version: Annotated[str | None, typer.Option("--version", help="Release name (default: the next vN)")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Build an unpublished release again (the old one is kept under releases/.replaced/); a published one is never replaced")] = False,
    only_if_changed: Annotated[bool, typer.Option("--only-if-changed", help="Make no release when nothing changed since the last published one (the default unless --force; kept for scripts)")] = False,
    force: Annotated[bool, typer.Option("--force", help="Build the release even when it equals the last published one")] = False,
    approve: Annotated[str | None, typer.Option(help="The curator's go: yes publishes, no rejects; with an existing --version, decides on it without a rebuild")] = None,
    approver: Annotated[str, typer.Option(help="Who decides (recorded with the decision)")] = "",
    track: Track = None,
) -> None:
    """Export the cleaned benchmark as a versioned, audited, checksummed release folder, published on a curator's go."""
    if ctx.invoked_subcommand is not None:
        given = [f for f, v in (("--version", version), ("--replace", replace), ("--only-if-changed", only_if_changed),
                                ("--force", force), ("--approve", approve), ("--approver", approver), ("--track", track))
                 if v]
        if given:
            raise UsageError(f"{given[0]} belongs to `revbench release`, not to `revbench release {ctx.invoked_subcommand}`")
        return
    if approve is not None and approve not in ("yes", "no"):
        raise UsageError(f"--approve {approve!r}: expected yes or no")
    if force and only_if_changed:
        raise UsageError("--force builds a release even when nothing changed, --only-if-changed only when something "
                         "did; give one")
    settings = setup()
    from revbench.flows.release import release_flow

    out = release_flow.run(settings, version=version, replace=replace, only_if_changed=only_if_changed, approve=approve,
                           approver=approver or (os.environ.get("USER", "") if approve else ""), force=force,
                           track=resolve_track(track, long_flow=True))
    print_release(out)


@release_app.command("verify")
def release_verify(
    path: Annotated[Path, typer.Argument(help="The release folder (holding manifest.json)")],
) -> None:
    """Check a release: each file against manifest.json (size, sha256), nothing unlisted, the manifest against the warehouse; a rejected one exits 8."""
    settings = setup()
    from revbench.release_checks import verify_recorded
    from revbench.release_files import refuse_rejected

    release = verify_recorded(settings, path)
    refuse_rejected(release, "its files match its manifest, but")
    print_release_verified(release)


def report(
    releases: Annotated[bool, typer.Option("--releases", help="Each metric of each scorer across the published releases")] = False,
    metric: Annotated[str, typer.Option(help="The metric to follow (loss, accuracy, easy_accuracy, hard_accuracy, ...)")] = "loss",
    split: Annotated[str, typer.Option(help="The split (average, pointwise, paper_centric, reviewer_centric)")] = "average",
    html: Annotated[Path | None, typer.Option("--html", metavar="DIR", help="Write DIR/index.html: every benchmark x scorer x version evaluated, one self-contained page to share")] = None,
    evaluation_report: Annotated[list[Path], typer.Option("--evaluation-report", metavar="DIR", help="With --html: a folder `revbench evaluate --report` wrote; its scorer pairs (separation.json) join the page")] = [],  # noqa: B006
) -> None:
    """Results across releases: a table, and a plot in data/reports/releases/; with --html, a page to share."""
    if evaluation_report and html is None:
        raise UsageError("--evaluation-report adds the scorer pairs to the page: give --html DIR too")
    if not releases and html is None:
        raise UsageError("say what to report: --releases, or --html DIR")
    if html is not None:
        check_output_dir(html, "--html")
        from revbench.app.results_page import read_evaluation_report, write_results_page

        pairs = [read_evaluation_report(d) for d in evaluation_report]
    settings = setup()
    if html is not None:
        write_results_page(settings, html.expanduser(), pairs)
        if not releases:
            return
    from revbench.evaluation.report import plot_across_releases
    from revbench.release_checks import release_report

    rows = release_report(settings, metric, split)
    if rows.height == 0:
        raise UsageError(f"no release has results for metric {metric!r} on split {split!r}: publish a release "
                         "(`revbench release --approve yes`), or check --metric and --split")
    png = plot_across_releases(rows, metric, split, settings.data_dir / "reports" / "releases" / f"{metric}-{split}.png")
    print_release_report(rows, metric, split, png)


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
        print_evaluation(out.evaluation)


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
