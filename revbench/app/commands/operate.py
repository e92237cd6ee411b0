"""The operator's commands: ``refresh`` (every configured stage in order), ``serve`` (the schedules
on a Prefect server), ``status`` (the warehouse's counts and runs), ``doctor`` (every service a run
needs, probed) and ``env-example`` (every setting), with what each prints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table as RichTable

from revbench.app.cli_common import MixWorlds, Track, fetching, mixed, parse_date, setup
from revbench.app.commands.corpus import print_graph_coverage
from revbench.app.console import console
from revbench.app.entry import build_settings, resolve_track
from revbench.errors import UsageError
from revbench.settings import Settings, render_env_example

if TYPE_CHECKING:  # the flow loads only when the command runs it
    from revbench.flows.refresh import RefreshResult


@fetching(None)
def refresh(
    stages: Annotated[str | None, typer.Option(help="Comma-separated stages to run (default: REVBENCH_REFRESH__STAGES)")] = None,
    until: Annotated[str | None, typer.Option(help="Last day of the ingest window, YYYY-MM-DD (default: yesterday, UTC)")] = None,
    runner: Annotated[str | None, typer.Option(help="Task runner of tracked runs: threads or dask")] = None,
    mix_worlds: MixWorlds = False,
    track: Track = None,
) -> None:
    """Every configured stage in order, each skipped (with its reason) when its inputs did not change."""
    changes: dict[str, Any] = {}
    if stages is not None:
        changes["refresh.stages"] = [x.strip() for x in stages.split(",") if x.strip()]
    if until is not None:
        changes["refresh.until"] = parse_date(until, "--until")
    if runner is not None:
        changes["runner.kind"] = runner
    settings = setup(**changes, **mixed(mix_worlds))
    from revbench.flows.refresh import refresh_flow

    print_refresh(refresh_flow.run(settings, track=resolve_track(track, long_flow=True)))


@fetching(None, flag=False)
def serve() -> None:
    """Serve the scheduled refresh, ratings pull and backup (REVBENCH_SCHEDULE__*) on a Prefect server until Ctrl-C."""
    settings = setup()
    from revbench.app.entry import prefect_api_configured

    if not prefect_api_configured():
        raise UsageError("serving needs a Prefect server: start one with `prefect server start` and set "
                         "PREFECT_API_URL=http://127.0.0.1:4200/api")
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL
    from rich.markup import escape

    from revbench.app.deployments import deployments, next_run, schedule_of
    from revbench.app.deployments import serve as serve_deployments
    from revbench.errors import ServiceUnavailable

    url = str(PREFECT_API_URL.value())
    with get_client(sync_client=True) as client:
        failure = client.api_healthcheck()
        if failure is None:
            _check_prefect_credentials(client, url)
    if failure is not None:
        raise ServiceUnavailable("the Prefect API", url, f"{type(failure).__name__}: {failure}")
    served = deployments(settings)
    console.print(f"Serving on the Prefect API at {url}:")
    for d in served:
        cron, tz = schedule_of(d)
        console.print(f"  [cyan]{d.flow_name}/{d.name}[/]  cron '{cron}' ({tz}), next run "
                      f"{next_run(cron, tz):%Y-%m-%d %H:%M %Z}")
    if not settings.schedule.ratings_cron:
        console.print("  (no ratings pull: REVBENCH_SCHEDULE__RATINGS_CRON is empty)")
    if not settings.schedule.backup_cron:
        console.print("  (no scheduled backup: REVBENCH_SCHEDULE__BACKUP_CRON is empty)")
    names = " or ".join(f"prefect deployment run '{d.flow_name}/{d.name}'" for d in served)
    console.print(escape(f"Run one now: {names} (the refresh takes -p 'stages=[\"ratings\"]' for some stages)")
                  + (f", or from {PREFECT_UI_URL.value()}/deployments" if PREFECT_UI_URL.value() else "") + ".",
                  highlight=False, soft_wrap=True)
    console.print("Ctrl-C stops serving.")
    serve_deployments(settings)
    console.print("Stopped serving; the schedules stay paused until `revbench serve` runs again.")


def _check_prefect_credentials(client: Any, url: str) -> None:
    """One line, before anything is served, when the Prefect API wants credentials revbench lacks
    (its health answers anyone; every other path wants PREFECT_SERVER_API_AUTH_STRING's value)."""
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.settings import PREFECT_API_AUTH_STRING

    try:
        client.read_flows(limit=1)
    except PrefectHTTPStatusError as exc:
        if exc.response.status_code not in (401, 403):
            raise
        given = "was refused" if PREFECT_API_AUTH_STRING.value() else "is not set"
        raise UsageError(f"the Prefect API at {url} answered HTTP {exc.response.status_code}: PREFECT_API_AUTH_STRING "
                         f"{given}; give it the server's PREFECT_SERVER_API_AUTH_STRING (docs/going-live.md)") from None


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as one JSON object, for a machine to read")] = False,
) -> None:
    """Warehouse counts by table, rejects by reason and the latest runs (never disturbs a running flow)."""
    settings = build_settings()
    import dataclasses
    import json

    from revbench.stages import STAGES
    from revbench.warehouse.status import read_status

    st = read_status(settings.warehouse_path)
    if st.missing:  # the first stage needs no other stage before it
        console.print(f"No warehouse at {settings.warehouse_path}; run `revbench demo` or `{STAGES[0].command}`.")
        raise typer.Exit(1)
    if as_json:
        console.print(json.dumps(dataclasses.asdict(st), default=str, indent=1), markup=False, highlight=False,
                      soft_wrap=True)
        return
    print_status(st)


def doctor(
    only: Annotated[str | None, typer.Option("--only", metavar="SERVICE[,SERVICE]", help="Probe only these: settings, data, warehouse, store, grobid, arxiv, pdf, s2, openalex, llm, smtp, survey, prefect; isolation (run from the survey server's side: fails when the curator's plane is reachable)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON instead of a table")] = False,
    timeout: Annotated[float | None, typer.Option(min=0.1, max=60, help="Seconds each service has to answer, at most 60 (default: REVBENCH_HTTP__PROBE_TIMEOUT_SECONDS)")] = None,
) -> None:
    """Check every service the configured stages need, with its own protocol, before a run.

    GROBID (isalive, and a version not older than 0.6.1, the oldest our TEI parser is tested on);
    arXiv (a one-result query, parsed); arXiv's PDFs (the headers of one); Semantic Scholar (a
    one-paper batch with the key, and the pace it implies); the LLM (its model list holds
    REVBENCH_LLM__MODEL); SMTP (connect, EHLO, STARTTLS, AUTH, QUIT: nothing is sent); the survey
    server's public URL (/healthz over HTTPS with the certificate verified, REVBENCH_HTTP__CA_BUNDLE
    trusted too, and a link signed with this configuration's key verifying there); the Prefect API
    (PREFECT_API_URL: health, its version against the installed prefect, and with
    PREFECT_API_AUTH_STRING a request without it refused); the data folder
    (writable, free space), the warehouse and the survey store (readable, schema against this
    code's; a warehouse a run holds passes); the settings (secrets set where a stage needs them, no
    placeholders or example hosts).

    Probes run at once, so a dead service costs one timeout. A service no stage in
    REVBENCH_REFRESH__STAGES needs is shown as not needed. Exit 0 when everything needed answers,
    1 when something failed (one line each after the table: the service, its URL, what to fix),
    2 for a wrong --only. Nothing is sent, recorded or locked, and no secret is printed."""
    from revbench.app.doctor import failed, parse_only, run_probes

    wanted = parse_only(only)  # a wrong name is one line before anything is probed
    settings = build_settings()
    probes = run_probes(settings, _prefect_api_url(settings), wanted,
                        timeout if timeout is not None else settings.http.probe_timeout_seconds,
                        prefect_auth=_prefect_setting(settings, "PREFECT_API_AUTH_STRING"))
    print_doctor(probes, as_json=json_out)
    raise typer.Exit(1 if failed(probes) else 0)


def _prefect_api_url(settings: Settings) -> str | None:
    """PREFECT_API_URL as a run of this configuration would find it: the environment, else the
    active profile under PREFECT_HOME (the data folder's, as ``prepare_process`` sets it; the
    doctor does not call it, as it must not write into a data folder it is checking)."""
    return _prefect_setting(settings, "PREFECT_API_URL")


def _prefect_setting(settings: Settings, name: str) -> str | None:
    """A Prefect client setting as a run of this configuration would find it (see ``_prefect_api_url``)."""
    from revbench.app.entry import prefect_setting

    return prefect_setting(name, Path(os.environ.get("PREFECT_HOME") or settings.data_dir / "prefect").expanduser())


def env_example() -> None:
    """Print a .env.example listing every setting with its description and default."""
    console.print(render_env_example(), markup=False, highlight=False, soft_wrap=True, end="")


def print_refresh(out: RefreshResult) -> None:
    """Each stage of a refresh: ran or skipped, why, and how long it took."""
    t = RichTable(title=f"Refresh {out.run_id[:8]} over {out.since}..{out.until} ({out.status})")
    for col in ("stage", "status", "why", "seconds"):
        t.add_column(col, justify="right" if col == "seconds" else "left")
    for r in out.stages:
        colour = {"ran": "green", "skipped": "dim", "failed": "red"}.get(r.status, "")
        t.add_row(r.stage, f"[{colour}]{r.status}[/]", r.reason, f"{r.seconds:.1f}")
    console.print(t)


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
        print_graph_coverage(st.graph)
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
