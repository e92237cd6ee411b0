"""The operator's commands: serving the schedules, the warehouse's status, the doctor, backups
and restores (registered on the application by ``revbench.app.cli``, in the order ``--help`` shows)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from revbench.app.cli_common import Track, setup
from revbench.app.console import console, print_labels, print_status
from revbench.app.entry import build_settings, check_output_dir, resolve_track
from revbench import objectives
from revbench.errors import UsageError
from revbench.settings import Settings


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


def graph(
    openalex: Annotated[bool | None, typer.Option("--openalex/--no-openalex", help="Ask OpenAlex too (default: REVBENCH_OPENALEX__ENABLED)")] = None,
    track: Track = None,
) -> None:
    """Fetch references, topics and affiliations for papers not asked yet, and resolve cited works to our papers."""
    settings = setup(**({"openalex.enabled": openalex} if openalex is not None else {}))
    from revbench.app.console import print_graph
    from revbench.flows.graph import graph_flow

    print_graph(graph_flow.run(settings, track=resolve_track(track, long_flow=True)))


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
    from revbench.app.console import print_doctor

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


def backup(
    to: Annotated[Path | None, typer.Option("--to", metavar="DIR", help="Folder the snapshot goes to, as DIR/revbench-backup-<UTC time>/ (default: REVBENCH_BACKUP__DIR, else data/backups); it may hold only revbench's snapshots")] = None,
    keep: Annotated[int | None, typer.Option(min=0, help="Keep the newest N snapshots in DIR, removing older ones of revbench's (default: REVBENCH_BACKUP__KEEP; 0: keep all)")] = None,
) -> None:
    """Snapshot the warehouse and the survey store with a manifest of checksums, authenticated with REVBENCH_BACKUP__KEY (safe while the survey server runs)."""
    if to is not None:
        check_output_dir(to, "--to")
    settings = setup()
    from revbench.app.console import print_backup
    from revbench.flows.backup import backup_flow

    print_backup(backup_flow.fn(settings, to=to, keep=keep))


def restore(
    from_: Annotated[Path, typer.Option("--from", metavar="DIR", help="A snapshot folder `revbench backup` wrote (DIR/revbench-backup-<UTC time>/)", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Restore over live data the snapshot lacks (it is set aside; answers, opt-outs and messages sent are kept)")] = False,
) -> None:
    """Check a snapshot against its manifest (verified with REVBENCH_BACKUP__KEY), then restore the warehouse and the survey store from it, keeping every answer given since."""
    settings = setup()
    from revbench.app.console import print_restore
    from revbench.backup.restore import restore as restore_snapshot

    print_restore(restore_snapshot(settings, from_, force=force))


def labels(
    from_: Annotated[str, typer.Option("--from", metavar="SOURCE", help="authorship (a paper's own authors) or citations (authors of the corpus papers it cites)", show_default=False)],
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Folder the weak benchmark goes to (new, empty, or an earlier weak benchmark)", show_default=False)],
    experts: Annotated[int, typer.Option("--experts", min=0, help="Keep only reviewers with more than N corpus papers (exHarmony's experts)")] = 15,
    negatives: Annotated[int, typer.Option("--negatives", min=0, help="Sampled non-positive candidates per submission")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the sampled candidates")] = 0,
    min_positives: Annotated[int, typer.Option("--min-positives", min=1, help="Weak positives among the rated pairs below which the agreement with the survey is not computed (too few to measure)")] = 30,
) -> None:
    """Write a weak benchmark from the graph (exHarmony) that `revbench evaluate -b weak=DIR` reads, with its agreement with the survey's ratings."""
    from revbench.tasks.weak_labels import SOURCES

    if from_ not in SOURCES:
        raise UsageError(f"--from {from_!r}: expected one of {', '.join(SOURCES)}")
    check_output_dir(out, "--out")
    settings = build_settings()
    from revbench.flows.labels import write_labels

    print_labels(write_labels(settings, from_, out, experts=experts, negatives=negatives, seed=seed,
                              min_positives=min_positives))


def models(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per recipe, for a machine to read")] = False,
) -> None:
    """The encoders by their published recipes (embedding:model=NAME), and whether their weights are here."""
    import json

    from rich.table import Table as RichTable

    from revbench.ml.models import model_ref
    from revbench.ml.recipes import MODELS_SUBDIR, RECIPES, missing_line

    settings = build_settings()
    models_dir = settings.cache_dir / MODELS_SUBDIR
    rows = []
    for r in RECIPES.values():
        lacking = missing_line(r, models_dir)
        ref = model_ref(r.name, models_dir=models_dir) if lacking is None else None
        # files that are not the published model are not that recipe "here": say what they are
        mismatch = ref.refusal if ref is not None and ref.mismatch else None
        rows.append({"name": r.name, "weights": r.repo, "adapter": r.adapter, "pooling": r.pooling, "input": r.input,
                     "max_tokens": r.max_tokens, "normalise": r.normalise, "here": lacking is None and mismatch is None,
                     "missing": lacking, "mismatch": mismatch, "digest": ref.short if ref is not None else None,
                     "source": r.source})
    if as_json:
        for row in rows:
            console.print(json.dumps(row), markup=False, highlight=False, soft_wrap=True)
        return
    table = RichTable(title="Model recipes (embedding:model=NAME; two joined by + are OpenReview's ensemble)")
    for col in ("name", "weights", "pooling", "input", "tokens", "here"):
        table.add_column(col, overflow="fold")
    for row in rows:
        weights = row["weights"] + (f" + adapter {row['adapter']}" if row["adapter"] else "")
        table.add_row(row["name"], weights, str(row["pooling"]).upper() if row["pooling"] == "cls" else str(row["pooling"]),
                      str(row["input"]), str(row["max_tokens"]),
                      f"yes ({row['digest']})" if row["here"] else "other weights" if row["mismatch"] else "no")
    console.print(table)
    console.print(f"Weights are read from {models_dir}/<org>__<name> or the Hugging Face cache (HF_HOME); "
                  "nothing is downloaded. `revbench models --json` gives each recipe's source.", soft_wrap=True)


def train(
    name: Annotated[str | None, typer.Option(help="Model folder under DATA_DIR/models/ (default: the objective's name)")] = None,
    objective: Annotated[str, typer.Option(help=objectives.help_text())] = objectives.OBJECTIVE_NAMES[0],
    base_model: Annotated[str | None, typer.Option(help="Model to adapt or whose vectors to attend over (default: REVBENCH_TRAIN__BASE_MODEL)")] = None,
    max_steps: Annotated[int | None, typer.Option(min=0, help="Stop after this many steps (0: all epochs)")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Train again over a model trained with other settings (the old folder is kept under models/.replaced/)")] = False,
    track: Track = None,
) -> None:
    """Train a model on the warehouse by one of the training objectives (--objective); resumes a killed run."""
    if objective not in objectives.OBJECTIVE_NAMES:
        raise UsageError(f"--objective {objective!r}: expected {objectives.choices()}")
    changes = {k: v for k, v in {"train.base_model": base_model, "train.max_steps": max_steps}.items() if v is not None}
    settings = setup(**changes)
    from revbench.app.console import print_train

    flow = objectives.objective(objective).runner()
    print_train(flow.run(settings, name=name or objective, replace=replace, track=resolve_track(track, long_flow=True)))
