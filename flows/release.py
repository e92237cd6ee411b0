"""The release flow: the warehouse's cleaned benchmark as a versioned, checksummed, audited
release folder that others can load.

Nothing reaches ``releases/<version>/`` before the privacy audit has passed: the release is built
in a sibling folder and renamed into place. An existing release is never overwritten without
``replace``, which keeps the old one under ``releases/.replaced/``. The same warehouse state,
settings and code give byte-identical files and manifest.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import RevbenchError, UsageError
from revbench.flows.common import (
    Run,
    code_version,
    flow_run,
    prefect_active,
    publish_markdown,
    publish_table,
    revbench_flow,
    stage,
)
from revbench.schemas.release import RELEASE_TABLES
from revbench.schemas.tables import RATING_FLAGS, RATINGS, RELEASES, SURVEY_EVENTS
from revbench.settings import Settings
from revbench.tasks import ratings as rating_tasks
from revbench.tasks import release as tasks
from revbench.templates import bars_scale, render
from revbench.warehouse import utcnow
from revbench.warehouse.migrations import LATEST_VERSION

log = logging.getLogger("revbench.release")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SOURCE_FLOWS = ("ingest", "disambiguate", "pools", "survey", "ratings")
"""Flows whose latest run the manifest names (the evaluations and releases themselves are not inputs)."""


class PrivacyAuditFailed(RevbenchError):
    """The audit found identifiers in what would be released; nothing was written."""

    exit_code = 6

    def __init__(self, hits: list[tasks.AuditHit]):
        self.hits = hits
        shown = "; ".join(f"{h.table} row {h.row} field {h.field}: {h.kind} {h.found!r}" for h in hits[:5])
        more = f" (and {len(hits) - 5} more)" if len(hits) > 5 else ""
        super().__init__(f"privacy audit: {len(hits)} identifiers in the release, nothing was written: {shown}{more}")


def audit_markdown(hits: list[tasks.AuditHit], strings: int) -> str:
    if not hits:
        return f"Privacy audit passed: {strings} strings scanned, no identifiers."
    rows = "\n".join(f"| {h.table} | {h.row} | {h.field} | {h.kind} | `{h.found}` |" for h in hits)
    return f"Privacy audit FAILED: {len(hits)} hits\n\n| table | row | field | kind | found |\n|---|---|---|---|---|\n{rows}"


def _size_category(n: int) -> str:
    return "n<1K" if n < 1000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "100K<n<1M"


@revbench_flow("release")
def release_flow(settings: Settings, version: str | None = None, replace: bool = False,
                 only_if_changed: bool = False, approve: str | None = None, approver: str = "") -> dict[str, Any]:
    """Build release ``version`` (default: the next ``vN``) from the warehouse's kept ratings,
    then publish it on a curator's go (``approve`` yes or no, the auto-approve setting, or the
    Prefect UI form); with ``only_if_changed``, nothing is written when every table equals the
    latest release's. A release that is built but not yet decided takes ``approve`` alone
    (same ``version``, no rebuild). Once published, the configured scorers are evaluated on it."""
    if approve is not None and approve not in ("yes", "no"):
        raise UsageError(f"--approve {approve!r}: expected yes or no")
    key = settings.release.id_key
    if key is None or len(key.get_secret_value()) < 16:
        raise UsageError("REVBENCH_RELEASE__ID_KEY is not set (or shorter than 16 characters): release ids are derived "
                         "with it, and the same key must serve every release")
    root = settings.releases_dir
    latest = (root / "LATEST").read_text().strip() if (root / "LATEST").exists() else None
    if version is None:
        n = 1 + max((int(m.group(1)) for d in root.glob("v*") if (m := re.fullmatch(r"v(\d+)", d.name))), default=0)
        version = f"v{n}"
    if not VERSION.match(version):
        raise UsageError(f"--version {version!r}: letters, digits, '.', '_' and '-' only (at most 64)")
    final = root / version
    decide_only = final.exists() and not replace and approve is not None
    if final.exists() and not replace and not decide_only:
        raise UsageError(f"release {version} exists at {final}: pass --replace to build it again (the old one is kept "
                         f"under {root / '.replaced'}), --approve yes|no to decide on it, or choose another --version")
    if decide_only:
        return _decide_only(settings, version, approve, approver)
    parent = latest if latest != version else json.loads((final / "manifest.json").read_text()).get("parent")
    params = {"version": version, "replace": replace, "only_if_changed": only_if_changed, "approve": approve}
    with flow_run(settings, "release", params) as run:
        with stage(run, "build") as st:
            inputs = run.wh.release_inputs()
            if inputs["ratings"].height == 0:
                raise UsageError("the warehouse holds no kept ratings: run `revbench ratings` first")
            tables = tasks.build_tables(inputs, key.get_secret_value().encode(), settings.release.profile_years)
            rate = tasks.rate_json(tables)
            st.result.rows_in, st.result.rows_out = inputs["ratings"].height, sum(t.height for t in tables.values())
        if only_if_changed and latest and (root / latest / "data").exists():
            diff = tasks.changes(tables, tasks.read_tables(root / latest))
            if not any(d["added"] or d["removed"] for d in diff.values()):
                log.info("nothing changed since release %s: no new release", latest)
                return _result(root / latest, run.run_id, status=None, decided_by=None, unchanged=True)
        with stage(run, "audit") as st:
            hits, strings = tasks.privacy_audit(tables, inputs["names"], inputs["affiliations"])
            publish_markdown("release-audit", audit_markdown(hits, strings), "Privacy audit of the release")
            st.result.rows_in, st.result.rejected = strings, len(hits)
            if hits:
                raise PrivacyAuditFailed(hits)
        with stage(run, "write") as st:
            out = _write(run, settings, version, parent, tables, rate, inputs, strings)
            st.result.rows_out = len(out["manifest"]["files"])
        if final.exists():
            (root / ".replaced").mkdir(parents=True, exist_ok=True)
            aside = root / ".replaced" / f"{version}-{len(list((root / '.replaced').glob(f'{version}-*'))) + 1}"
            final.rename(aside)
            log.warning("release %s was rebuilt; the previous one is kept at %s", version, aside)
        out["dir"].rename(final)
        (root / "LATEST").write_text(version + "\n")
        run.wh.upsert(RELEASES, pl.DataFrame([{
            "version": version, "parent": parent, "status": "built", "counts": json.dumps(out["manifest"]["counts"], sort_keys=True),
            "manifest_sha256": tasks.sha256_file(final / "manifest.json"), "run_id": run.run_id, "built_at": utcnow()}]))
        publish_table("release-files", out["manifest"]["files"], f"Release {version}: files with rows, bytes and sha256")
        publish_markdown("release-manifest", "```json\n" + (final / "manifest.json").read_text() + "```",
                         f"Release {version}: manifest.json")
        publish_markdown("release-statistics", out["statistics"], f"Release {version}: counts and agreement")
        status, who = _ask(run, version, approve, approver)
        result = _result(final, run.run_id, status=status, decided_by=who, audit_strings=strings)
    return _evaluate_if_published(settings, result)


def _ask(run: Run, version: str, approve: str | None, approver: str) -> tuple[str, str | None]:
    """The curator's go on a built release: given, automatic by setting, or asked in the Prefect
    UI (the run lets go of the warehouse while it waits); in-process with none, it stays built."""
    reason = ""
    if approve is not None:
        status, who = ("published" if approve == "yes" else "rejected"), approver or "command line"
    elif run.settings.release.auto_approve:
        status, who = "published", "REVBENCH_RELEASE__AUTO_APPROVE"
    elif prefect_active():
        from prefect.flow_runs import pause_flow_run

        from revbench.flows.release_input import ReleaseApproval

        form = ReleaseApproval.with_initial_data(description=(
            f"Publish release {version}? Review the 'release-files', 'release-audit' and 'release-statistics' artifacts."))
        timeout = run.settings.release.approval_timeout_seconds
        with run.released(timeout):
            answer = pause_flow_run(wait_for_input=form, timeout=timeout, poll_interval=2)
        status, who, reason = ("published" if answer.publish else "rejected"), answer.approver or "Prefect UI", answer.reason
    else:
        log.warning("release %s is built and waits for a curator's go: `revbench release --version %s --approve yes` "
                    "(or no), or run tracked and answer in the Prefect UI", version, version)
        return "built", None
    run.wh.set_release_status(version, status, who, reason, run.run_id)
    return status, who


def _decide_only(settings: Settings, version: str, approve: str | None, approver: str) -> dict[str, Any]:
    """Record the decision on a release built earlier (no rebuild)."""
    root = settings.releases_dir
    with flow_run(settings, "release", {"version": version, "approve": approve}) as run:
        state = run.wh.release_state(version)
        if state is None:
            raise UsageError(f"release {version} at {root / version} is not recorded in this warehouse")
        if state["status"] != "built":
            raise UsageError(f"release {version} is already {state['status']} (by {state['decided_by']}); "
                             "build a new version to change what is published")
        if state["manifest_sha256"] != tasks.sha256_file(root / version / "manifest.json"):
            raise UsageError(f"release {version}: its manifest.json changed since it was built; rebuild it with --replace")
        status, who = _ask(run, version, approve, approver)
        result = _result(root / version, run.run_id, status=status, decided_by=who)
    return _evaluate_if_published(settings, result)


def _result(release_dir: Path, run_id: str, status: str | None, decided_by: str | None, audit_strings: int | None = None,
            unchanged: bool = False) -> dict[str, Any]:
    """What a release run reports, read from the release's manifest."""
    manifest = json.loads((release_dir / "manifest.json").read_text())
    return {"version": manifest["version"], "parent": manifest.get("parent"), "dir": str(release_dir), "run_id": run_id,
            "status": status, "decided_by": decided_by, "counts": manifest["counts"], "files": manifest["files"],
            "audit_strings": audit_strings, "unchanged": unchanged}


def _evaluate_if_published(settings: Settings, result: dict[str, Any]) -> dict[str, Any]:
    """Every configured scorer on a newly published release; results kept per release version."""
    if result["status"] != "published" or not settings.release.evaluate_after:
        return result
    from revbench.flows.evaluate import evaluate_configured

    return {**result, "evaluation": evaluate_configured(settings, f"release={result['dir']}",
                                                        settings.data_dir / "reports" / "releases" / result["version"])}


def _write(run: Run, settings: Settings, version: str, parent: str | None, tables: dict[str, pl.DataFrame],
           rate: dict[str, list[dict[str, Any]]], inputs: dict[str, Any], strings: int) -> dict[str, Any]:
    """Every file of the release in a building folder beside its final place."""
    root = settings.releases_dir
    building = root / f".building-{version}"
    if building.exists():
        shutil.rmtree(building)  # left by an interrupted build: never a finished release
    rows = tasks.write_files(building, tables, rate)
    parent_tables = tasks.read_tables(root / parent) if parent and (root / parent / "data").exists() else None
    (building / "CHANGES.md").write_text(tasks.changes_markdown(version, parent, tasks.changes(tables, parent_tables)))
    ratings = run.wh.read(RATINGS)
    events = run.wh.read(SURVEY_EVENTS)
    disp = dict(events.group_by("disposition").len().iter_rows()) if events.height else {}
    stats = rating_tasks.statistics(ratings)
    figure = rating_tasks.plot_distributions(stats, building / "figures" / "distributions.png") if stats.ratings else None
    counts = {"events": events.height, "ratings": ratings.height, "duplicates": disp.get("superseded", 0),
              "skips": disp.get("skip", 0), "flags": run.wh.count(RATING_FLAGS),
              "kept": ratings.filter(pl.col("status") == "kept").height,
              "dropped": ratings.filter(pl.col("status") == "dropped").height,
              **{t.name: tables[t.name].height for t in RELEASE_TABLES}}
    docs = {t.name: t.doc for t in RELEASE_TABLES} | {"evaluations_pc": "paper-centric tuples in LR-bench's JSON layout",
                                                      "evaluations_rc": "reviewer-centric tuples in LR-bench's JSON layout"}
    files_doc = [{"path": p, "rows": n, "doc": docs[p.rsplit("/", 1)[-1].split(".")[0]]} for p, n in sorted(rows.items())]
    card, card_version = render("release/card.md.j2", name=settings.release.name, version=version, parent=parent,
                                license=settings.release.license, tables=[t.name for t in RELEASE_TABLES],
                                size_category=_size_category(counts["pointwise"]), files=files_doc,
                                profile_years=settings.release.profile_years, audit_strings=strings,
                                levels=bars_scale()["levels"], counts=counts, statistics=stats.markdown(),
                                figure="figures/distributions.png" if figure else None)
    (building / "README.md").write_text(card)
    published = ratings["rated_at"].max() if ratings.height else None  # from the data: the same state, the same date
    meta = tasks.croissant(building, settings.release.name, version, settings.release.license,
                           f"Reviewer-expertise benchmark {version}: {counts['pointwise']} self-assessed ratings (1-5 BARS) "
                           "of recent arXiv papers by candidate reviewers, with paper-centric and reviewer-centric tuples.",
                           published.date().isoformat() if published else None)
    (building / "croissant.json").write_text(json.dumps(meta, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    files = []
    for path in sorted(p for p in building.rglob("*") if p.is_file()):
        rel = path.relative_to(building).as_posix()
        files.append({"path": rel, "rows": rows.get(rel), "bytes": path.stat().st_size, "sha256": tasks.sha256_file(path)})
    manifest = {"name": settings.release.name, "version": version, "parent": parent, "schema_version": LATEST_VERSION,
                "code_version": code_version(), "card_template": card_version,
                "runs": {f: r for f, r in inputs["runs"].items() if f in SOURCE_FLOWS}, "counts": counts, "files": files}
    (building / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return {"dir": building, "manifest": manifest, "statistics": stats.markdown()}
