"""The release flow: the warehouse's cleaned benchmark as a versioned, checksummed, audited
release folder that others can load.

Nothing reaches ``releases/<version>/`` before the privacy audit has passed: the release is built
in a sibling folder and renamed into place. A published release is immutable: a new version
supersedes it (it stays published and readable) and ``LATEST`` names the newest published one;
a rejected one keeps its folder, marked by a ``REJECTED`` file (who, when, why) outside its manifest;
only a release not yet published is built again, with ``replace``, which keeps the old one under
``releases/.replaced/``. Every file is checked against the manifest, and the manifest against the
digest the warehouse recorded, before a release is published, compared or reported. The same
warehouse state, settings and code give byte-identical files and manifest.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import RevbenchError, UsageError
from revbench.files import write_atomic
from revbench.flows.common import RUN_LOG_ONLY, Run, code_version, flow_run, publish_markdown, publish_table, revbench_flow, stage
from revbench.flows.curator import DecidedElsewhere, Waiting, decision_made, mark_outcome, wait_for_curator
from revbench.flows.pieces import prefect_active
from revbench.flows.results import ConfiguredEvaluation, FlowResult
from revbench.release_checks import ReleaseState, recorded_state, verify_recorded
from revbench.release_files import write_rejection
from revbench.schemas.tables import RATING_FLAGS, RATINGS, RELEASES, SURVEY_EVENTS
from revbench.settings import Settings
from revbench.stages import stages_before
from revbench.tasks import privacy, rating_stats
from revbench.tasks import release as tasks
from revbench.tasks import release_card as card_text
from revbench.templates import bars_scale
from revbench.warehouse import utcnow
from revbench.warehouse.migrations import LATEST_VERSION

log = logging.getLogger("revbench.release")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SOURCE_FLOWS = stages_before("release")
"""Flows whose latest run the manifest names (the evaluations and releases themselves are not inputs)."""


class PrivacyAuditFailed(RevbenchError):
    """The audit found identifiers in what would be released; nothing was written."""

    exit_code = 6

    def __init__(self, hits: list[privacy.AuditHit]):
        self.hits = hits
        # The line goes to logs: an address shows its first letter and domain (the audit artifact has it whole).
        shown = "; ".join(f"{h.table} row {h.row} field {h.field}: {h.kind}{' (' + h.form + ')' if h.form else ''} "
                          f"{h.redacted()!r}{' of ' + h.person if h.person else ''}" for h in hits[:5])
        more = f" (and {len(hits) - 5} more, every one in the 'release-audit' artifact)" if len(hits) > 5 else ""
        super().__init__(f"privacy audit: {len(hits)} identifiers in the release, nothing was written: {shown}{more}"
                         f"{audit_way_out(hits)}")


def audit_way_out(hits: list[privacy.AuditHit]) -> str:
    """What resolves the hits, by what they are and where they stand: a setting that redacts
    identifiers written in papers' text, or a look at the rows for what no setting redacts."""
    in_text = [h for h in hits if h.field.rsplit(".", 1)[-1] in ("abstract", "title")]
    ways = []
    if any(h.kind == "email" and h.form == "plain" and not h.person for h in in_text):
        ways.append("REVBENCH_RELEASE__REDACT_ADDRESSES=true replaces addresses written in papers' text by [email]")
    if any(h.kind == "person_name" or h.person or h.kind == "orcid" for h in in_text):
        ways.append("REVBENCH_RELEASE__REDACT_NAMES=true replaces the raters' names, addresses and ORCIDs written "
                    "there by [name], [email], [orcid]")
    if len(in_text) < len(hits) or any(h.kind not in ("email", "person_name", "orcid") for h in hits):
        ways.append("other hits are in data no setting rewrites: remove them at the source (the paper's text in "
                    "the warehouse) or drop the rating with `revbench ratings --decide drop`")
    return "; " + "; ".join(ways) if ways else ""


def audit_markdown(hits: list[privacy.AuditHit], strings: int) -> str:
    """The curator's view of the audit: every hit with its file, row, field, kind, form, the
    text found (whole) and whose it is; the notes (a rater's institution in public text) after
    it, which never stop a release."""
    blocking, notes = [h for h in hits if h.blocks], [h for h in hits if not h.blocks]

    def table(rows: list[privacy.AuditHit]) -> str:
        return "| file | row | field | kind | form | found | person |\n|---|---|---|---|---|---|---|\n" + "\n".join(
            f"| data/{h.table}.parquet | {h.row} | {h.field} | {h.kind} | {h.form} | `{h.found}` | {h.person} |" for h in rows)

    head = (f"Privacy audit FAILED: {len(blocking)} identifiers in {strings} strings. What resolves them:"
            f"{audit_way_out(blocking)[1:]}\n\n{table(blocking)}" if blocking
            else f"Privacy audit passed: {strings} strings scanned, no identifiers of the people who rated.")
    if notes:
        head += (f"\n\nNotes (not blocking): {len(notes)} strings name an institution a rater was affiliated with; "
                 f"an institution alone identifies nobody, but read them with the rows around them.\n\n{table(notes)}")
    return head


@dataclass(frozen=True, kw_only=True)
class ReleaseResult(FlowResult):
    """What a release run made, read from the release's manifest: its version and parent, where
    it is, its status (``built`` while it waits for a curator's go; None when ``unchanged``: nothing
    changed since the latest release, which is named, and nothing was written), who decided, its
    counts and files, the strings audited (when this run built it) and the evaluation of the
    configured scorers once it is published."""

    version: str
    parent: str | None
    dir: str
    run_id: str
    status: str | None
    decided_by: str | None
    counts: dict[str, int]
    files: list[dict[str, Any]]
    audit_strings: int | None = None
    unchanged: bool = False
    evaluation: ConfiguredEvaluation | None = None


@dataclass(frozen=True)
class Draft:
    """A release built in memory: its parent, the last published release (and the parent
    verified, when its folder is there), the warehouse inputs, the release tables and RATE's JSON."""

    parent: str | None
    parent_release: tasks.VerifiedRelease | None
    inputs: dict[str, Any]
    tables: dict[str, pl.DataFrame]
    rate: dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class Written:
    """A release written in its building folder: the folder, its manifest, its statistics."""

    dir: Path
    manifest: dict[str, Any]
    statistics: str


def _id_key(settings: Settings, approve: str | None) -> bytes:
    """The key release ids are derived with, once the arguments are checked."""
    if approve is not None and approve not in ("yes", "no"):
        raise UsageError(f"--approve {approve!r}: expected yes or no")
    key = settings.release.id_key
    if key is None or len(key.get_secret_value()) < 16:
        raise UsageError("REVBENCH_RELEASE__ID_KEY is not set (or shorter than 16 characters): release ids are derived "
                         "with it, and the same key must serve every release")
    return key.get_secret_value().encode()


@revbench_flow("release")
def release_flow(settings: Settings, version: str | None = None, replace: bool = False,
                 only_if_changed: bool = False, approve: str | None = None, approver: str = "",
                 force: bool = False) -> ReleaseResult:
    """Build release ``version`` (default: the next ``vN``) from the warehouse's kept ratings,
    then publish it on a curator's go (``approve`` yes or no, the auto-approve setting, or the
    Prefect UI form). Nothing is built, nor put to a curator, when every table equals the last
    published release's (a rejected or merely built one is no reference), unless ``force``;
    ``only_if_changed`` says the same explicitly (kept for scripts). A release that is built but
    not yet decided takes ``approve`` alone (same ``version``, no rebuild). Once published, the
    configured scorers are evaluated on it."""
    key = _id_key(settings, approve)
    root = settings.releases_dir
    version = version or _next_version(root)
    if not VERSION.match(version):
        raise UsageError(f"--version {version!r}: letters, digits, '.', '_' and '-' only (at most 64)")
    final = root / version
    decide_only = final.exists() and not replace and approve is not None
    if final.exists() and not replace and not decide_only:
        raise UsageError(f"release {version} exists at {final}: pass --replace to build it again (the old one is kept "
                         f"under {root / '.replaced'}), --approve yes|no to decide on it, or choose another --version")
    if decide_only:
        return _decide_only(settings, version, approve, approver)
    _refuse_published(root, version, recorded_state(settings, version))  # before the run: a refusal writes nothing
    params = {"version": version, "replace": replace, "only_if_changed": only_if_changed, "approve": approve,
              "force": force}
    with flow_run(settings, "release", params) as run:
        _refuse_published(root, version, ReleaseState.of(run.wh.release.release_state(version)))
        draft = _build_stage(run, version, key)
        same = None if force else _unchanged_since(draft)
        if same is not None:
            log.info("nothing changed since the published release %s: no release built, none put to a curator "
                     "(--force builds one anyway)", same, extra=RUN_LOG_ONLY)  # `revbench release` prints it
            return _result(root / same, run.run_id, status=None, decided_by=None, unchanged=True)
        strings = _audit_stage(run, draft)
        _write_stage(run, version, draft, strings)
        status, who = _ask(run, version, approve, approver, audit_markdown([], strings))
        result = _result(final, run.run_id, status=status, decided_by=who, audit_strings=strings)
        return _evaluate_if_published(settings, result)


def _build_stage(run: Run, version: str, key: bytes) -> Draft:
    """The release tables from the warehouse, with the parent they are compared against."""
    root = run.settings.releases_dir
    recorded = run.wh.release.releases()
    parent = tasks.choose_parent(recorded, version)
    # CHANGES.md is written against the parent: it is checked before anything is written.
    parent_release = verify_recorded(run.settings, root / parent, run.wh) if parent and (root / parent).exists() else None
    with stage(run, "build") as st:
        inputs = run.wh.release.release_inputs()
        if inputs["ratings"].height == 0:
            raise UsageError("the warehouse holds no kept ratings: run `revbench ratings` first")
        # The graph around every paper the release could carry (build_tables keeps the released ones).
        inputs["graph"] = run.wh.ratings.benchmark_graph(
            sorted(set(inputs["papers"]["paper_id"]) | set(inputs["profiles"]["paper_id"])),
            sorted(set(inputs["ratings"]["reviewer_id"]))) if run.wh.graph.has_graph() else None
        r = run.settings.release
        tables = tasks.build_tables(inputs, key, r.profile_years, r.redact_addresses, r.redact_names)
        rate = tasks.rate_json(tables)
        st.result.rows_in, st.result.rows_out = inputs["ratings"].height, sum(t.height for t in tables.values())
    return Draft(parent, parent_release, inputs, tables, rate)


def _unchanged_since(draft: Draft) -> str | None:
    """The last published release (the draft's parent, verified when the draft was built) when
    its tables equal the draft's, else None. A rejected or merely built release is no reference:
    what was never published is no reason to withhold a release."""
    if draft.parent_release is None:
        return None
    diff = tasks.changes(draft.tables, tasks.read_tables(draft.parent_release))
    return None if tasks.changed(diff) else draft.parent


def _audit_stage(run: Run, draft: Draft) -> int:
    """The privacy audit of the draft; returns the strings scanned, raises on any hit."""
    with stage(run, "audit") as st:
        hits, strings = privacy.privacy_audit(draft.tables, draft.inputs["people"], draft.inputs["affiliations"])
        publish_markdown("release-audit", audit_markdown(hits, strings), "Privacy audit of the release")
        blocking = [h for h in hits if h.blocks]
        st.result.rows_in, st.result.rejected = strings, len(blocking)
        if blocking:
            raise PrivacyAuditFailed(blocking)
    return strings


def _write_stage(run: Run, version: str, draft: Draft, strings: int) -> None:
    """Write the release beside its place, rename it into place (a rebuilt one's predecessor kept
    aside), record it as built and show its files, manifest and statistics."""
    root = run.settings.releases_dir
    final = root / version
    with stage(run, "write") as st:
        out = _write(run, version, draft, strings)
        st.result.rows_out = len(out.manifest["files"])
    if final.exists():
        (root / ".replaced").mkdir(parents=True, exist_ok=True)
        aside = root / ".replaced" / f"{version}-{len(list((root / '.replaced').glob(f'{version}-*'))) + 1}"
        final.rename(aside)
        log.warning("release %s was rebuilt; the previous one is kept at %s", version, aside)
    out.dir.rename(final)
    run.wh.release.upsert(RELEASES, pl.DataFrame([{
        "version": version, "parent": draft.parent, "status": "built",
        "counts": json.dumps(out.manifest["counts"], sort_keys=True),
        "manifest_sha256": tasks.sha256_file(final / "manifest.json"), "run_id": run.run_id, "built_at": utcnow(),
        "superseded_by": None}]), only_if="releases.status <> 'published'")
    publish_table("release-files", out.manifest["files"], f"Release {version}: files with rows, bytes and sha256")
    publish_markdown("release-manifest", "```json\n" + (final / "manifest.json").read_text() + "```",
                     f"Release {version}: manifest.json")
    publish_markdown("release-statistics", out.statistics, f"Release {version}: counts and agreement")


def _ask_in_ui(run: Run, version: str, audit: str) -> Any:
    """The release form's answer: the run waits, the audit result and the changes against the
    parent (``CHANGES.md``) shown with it, publishing off until switched on."""
    from revbench.flows.release_input import ReleaseApproval
    from revbench.tasks.curator_forms import release_form_markdown

    folder = run.settings.releases_dir / version
    parent = json.loads((folder / "manifest.json").read_text()).get("parent")
    changes = (folder / "CHANGES.md").read_text() if (folder / "CHANGES.md").exists() else "(no CHANGES.md)"
    form = ReleaseApproval.with_initial_data(description=release_form_markdown(
        version, parent, audit or "see the 'release-audit' artifact", changes))
    return wait_for_curator(run, form, Waiting(f"a curator's go to publish release {version}",
                                               f"revbench release --version {version} --approve yes|no",
                                               run.settings.release.approval_timeout_seconds, f"release:{version}"))


def _ask(run: Run, version: str, approve: str | None, approver: str, audit: str = "") -> tuple[str, str | None]:
    """The curator's go on a built release: given, automatic by setting, or asked in the Prefect
    UI (the run lets go of the warehouse while it waits); in-process with none, it stays built."""
    reason = ""
    if approve is not None:
        status, who = ("published" if approve == "yes" else "rejected"), approver or "command line"
    elif run.settings.release.auto_approve:
        status, who = "published", "REVBENCH_RELEASE__AUTO_APPROVE"
    elif prefect_active():
        answer = _ask_in_ui(run, version, audit)
        recorded = run.wh.release.release_state(version)
        if recorded is not None and recorded["status"] != "built":  # decided by another run while this one waited
            log.warning("release %s was %s by %s while this run waited; this run finishes with that decision",
                        version, recorded["status"], recorded["decided_by"])
            _show_rejection(run, version, recorded["status"], recorded["decided_by"], recorded.get("reason") or "")
            return recorded["status"], recorded["decided_by"]
        if isinstance(answer, DecidedElsewhere):  # its release was rebuilt meanwhile: nothing to adopt
            return "built", None
        status, who, reason = ("published" if answer.publish else "rejected"), answer.approver or "Prefect UI", answer.reason
    else:
        log.warning("release %s is built and waits for a curator's go: `revbench release --version %s --approve yes` "
                    "(or no), or run tracked and answer in the Prefect UI", version, version)
        return "built", None
    root = run.settings.releases_dir
    verify_recorded(run.settings, root / version, run.wh)  # as built, also after a wait of days for the go
    run.wh.release.set_release_status(version, status, who, reason, run.run_id)
    if status == "published":
        _advance_latest(root, run.wh.release.releases())
    else:
        # After the warehouse's record: a marker never stands for a decision that was not recorded.
        decided_at = (run.wh.release.release_state(version) or {}).get("decided_at") or utcnow()
        write_rejection(root / version, version, who, decided_at, reason)
    decision_made(run, f"release:{version}", who, f"release {version} {status} by {who}",
                  {"publish": status == "published", "approver": who, "reason": reason}, {"status": status})
    _show_rejection(run, version, status, who, reason)
    return status, who


def _show_rejection(run: Run, version: str, status: str, who: str | None, reason: str) -> None:
    """A rejected release shows on its run: a Completed state named Rejected, the run's name, a
    log line and an ``outcome`` artifact, not a plain green Completed."""
    if status == "rejected":
        mark_outcome(run, f"release {version} rejected", f"## Release {version} rejected\n\nBy {who}"
                     f"{': ' + reason if reason else ''}. Its folder stays, marked rejected (its REJECTED file); "
                     "nothing was published and "
                     "`LATEST` did not move.", state="Rejected")


def _next_version(root: Path) -> str:
    """``v<N+1>`` after the highest ``vN`` folder in ``root``."""
    return tasks.next_version(d.name for d in root.glob("v*"))


def _refuse_published(root: Path, version: str, state: ReleaseState | None) -> None:
    if state is not None and state.status == "published":
        raise UsageError(f"{version} is published and cannot be replaced; make a new version, e.g. --version "
                         f"{_next_version(root)}, which supersedes it")


def _advance_latest(root: Path, releases: pl.DataFrame) -> None:
    """``LATEST`` names the newest published release by build; publishing an older one leaves it."""
    published = releases.filter(pl.col("status") == "published")
    if published.height == 0:
        return
    newest = published["version"][-1]
    latest = root / "LATEST"
    if latest.exists() and latest.read_text().strip() == newest:
        return
    write_atomic(latest, newest + "\n")  # readers see the old name or the new one, never an empty file


def _decide_only(settings: Settings, version: str, approve: str | None, approver: str) -> ReleaseResult:
    """Record the decision on a release built earlier (no rebuild)."""
    root = settings.releases_dir
    with flow_run(settings, "release", {"version": version, "approve": approve}) as run:
        state = ReleaseState.of(run.wh.release.release_state(version))
        if state is None:
            raise UsageError(f"release {version} at {root / version} is not recorded in this warehouse")
        if state.status != "built":
            raise UsageError(f"release {version} is already {state.status} (by {state.decided_by}); "
                             "build a new version to change what is published")
        status, who = _ask(run, version, approve, approver)
        result = _result(root / version, run.run_id, status=status, decided_by=who)
        return _evaluate_if_published(settings, result)


def _result(release_dir: Path, run_id: str, status: str | None, decided_by: str | None, audit_strings: int | None = None,
            unchanged: bool = False) -> ReleaseResult:
    """What a release run reports, read from the release's manifest."""
    manifest = json.loads((release_dir / "manifest.json").read_text())
    return ReleaseResult(version=manifest["version"], parent=manifest.get("parent"), dir=str(release_dir), run_id=run_id,
                         status=status, decided_by=decided_by, counts=manifest["counts"], files=manifest["files"],
                         audit_strings=audit_strings, unchanged=unchanged)


def _evaluate_if_published(settings: Settings, result: ReleaseResult) -> ReleaseResult:
    """Every configured scorer on a newly published release; results kept per release version.
    Called inside the release's run, which keeps the warehouse meanwhile (see ``flow_run``): no
    other command can fail it halfway, and the run is not completed when its evaluation failed."""
    if result.status != "published" or not settings.release.evaluate_after:
        return result
    from revbench.flows.evaluate import evaluate_configured

    return dataclasses.replace(result, evaluation=evaluate_configured(
        settings, f"release={result.dir}", settings.data_dir / "reports" / "releases" / result.version))


def _write(run: Run, version: str, draft: Draft, strings: int) -> Written:
    """Every file of the release in a building folder beside its final place."""
    settings = run.settings
    building = settings.releases_dir / f".building-{version}"
    if building.exists():
        shutil.rmtree(building)  # left by an interrupted build: never a finished release
    rows = tasks.write_files(building, draft.tables, draft.rate)
    parent_tables = tasks.read_tables(draft.parent_release) if draft.parent_release else None
    (building / "CHANGES.md").write_text(tasks.changes_markdown(version, draft.parent,
                                                                tasks.changes(draft.tables, parent_tables)))
    ratings = run.wh.read(RATINGS)
    counts = tasks.release_counts(run.wh.read(SURVEY_EVENTS), ratings, run.wh.count(RATING_FLAGS), draft.tables)
    stats = rating_stats.statistics(ratings)
    figure = (rating_stats.plot_distributions(stats, building / "figures" / "distributions.png", draft.inputs["synthetic"])
              if stats.ratings else None)
    published = ratings["rated_at"].max() if ratings.height else None  # from the data: the same state, the same date
    card_version = _describe(run, version, draft, building, rows, counts, stats.markdown(), strings,
                             published.date() if published else None,
                             "figures/distributions.png" if figure else None)
    r, synthetic = settings.release, draft.inputs["synthetic"]
    manifest = {"name": r.name, "version": version, "parent": draft.parent, "schema_version": LATEST_VERSION,
                "synthetic": synthetic, "title": card_text.title(r.name, version, synthetic),
                **({"notice": card_text.SYNTHETIC_NOTICE} if synthetic else {}),
                "code_version": code_version(), "card_template": card_version,
                "runs": {f: run_id for f, run_id in draft.inputs["runs"].items() if f in SOURCE_FLOWS}, "counts": counts,
                "files": tasks.listed_files(building, rows)}
    (building / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return Written(building, manifest, stats.markdown())


def _describe(run: Run, version: str, draft: Draft, building: Path, rows: dict[str, int], counts: dict[str, int],
              statistics: str, strings: int, published: date | None, figure: str | None) -> str:
    """The dataset card (``README.md``) and ``croissant.json`` of a release in ``building``: both
    say SYNTHETIC when an ingest run recorded a simulated world. Returns the card template's version."""
    r, s = run.settings.release, run.settings.survey
    synthetic = draft.inputs["synthetic"]
    curators = card_text.Curators(s.team, s.lab, s.institution)
    citation = card_text.citation(r.name, version, synthetic, curators, published.year if published else None, r.url)
    card, card_version = card_text.render_card(
        name=r.name, version=version, parent=draft.parent, license=r.license, synthetic=synthetic, curators=curators,
        collection=draft.inputs["collection"], counts=counts, files=tasks.file_docs(rows), profile_years=r.profile_years,
        audit_strings=strings, levels=bars_scale()["levels"], statistics=statistics, figure=figure,
        size_category=tasks.size_category(counts["pointwise"]), citation=citation,
        related=card_text.related_citations(draft.inputs.get("derived_from", [])))
    (building / "README.md").write_text(card)
    meta = tasks.croissant(building, r.name, version, r.license,
                           card_text.croissant_description(version, counts["pointwise"], synthetic),
                           published.isoformat() if published else None,
                           title=card_text.title(r.name, version, synthetic), cite_as=citation, url=r.url)
    (building / "croissant.json").write_text(json.dumps(meta, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return card_version
