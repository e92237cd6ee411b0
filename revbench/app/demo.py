"""The offline demo: a SYNTHETIC world behind the local replay server, through every stage."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from revbench.app.commands.corpus import print_disambiguation, print_graph, print_ingest_summary
from revbench.app.commands.pools import print_pools
from revbench.app.commands.ratings import print_labels, print_ratings
from revbench.app.commands.release import print_release
from revbench.app.console import console
from revbench.app.entry import DEMO_SINCE, DEMO_UNTIL
from revbench.settings import ReplaySettings, Settings

DEMO_HTTP = {"timeout_seconds": 2, "backoff_initial_seconds": 0.05, "backoff_max_seconds": 1}
DEMO_PACE_SECONDS = 0.25
"""The SYNTHETIC panel reads an abstract in 0.25 s of its simulated clock (the times its answers
carry): the demo's clock runs about 20 times fast."""
DEMO_RATINGS = {"burst_window_seconds": 0.3, "min_seconds_per_paper": 0.12, "unattended_decision": "drop"}
"""The ratings rules on the demo's fast clock (0.3 s stands for about 6 s) and its curator's
policy: drop what the rules flag."""
DEMO_POOLS = {"queries_per_category": 10, "same_affiliation_coi": True}
DEMO_KEY_FILES = {"survey.signing_key": ".survey-demo-key", "release.id_key": ".release-demo-key"}
"""The demo's own keys (see :func:`demo_key`), by the setting each stands in for."""


DEMO_EXPERTS = 3
"""``revbench labels --experts`` in the demo (see ``run_demo``), and the attention training's
candidates on the demo's data: a 300-paper world has no author of more than 15 papers."""


def keep_demo_settings(settings: Settings) -> None:
    """Store with the demo's data what later commands on it need to decide as the demo did
    (a plain ``revbench ratings`` after the demo raises the flags the demo raised)."""
    from revbench.app.entry import save_demo_settings

    save_demo_settings(settings.data_dir, {"ratings": DEMO_RATINGS, "pools": DEMO_POOLS,
                                           "train": {"attention_experts": DEMO_EXPERTS}}, DEMO_KEY_FILES)


def demo_settings(settings: Settings, replay_base: str) -> Settings:
    """The user's settings with every client pointed at the replay server and demo-fast timeouts."""
    from revbench.replay.server import replay_overrides

    overrides = replay_overrides(replay_base)
    overrides["grobid"]["timeout_seconds"] = 2
    return settings.with_overrides(**overrides, http=DEMO_HTTP)


def demo_scorers(configured: list[str]) -> list[str]:
    """What the demo evaluates on its warehouse and on its release: the ``configured`` scorers, then
    the graph's citation and topic, and UniPR's fusion ``cof`` where this revbench registers it (the
    demo runs the graph stage, so its warehouse and its release carry a graph; the rebuild does not)."""
    from revbench.evaluation.scorers.base import SCORER_MODULES

    graph = ["citation", "topic"] + (["cof"] if "cof" in SCORER_MODULES else [])
    return [*configured, *(g for g in graph if g not in configured)]


def demo_warehouse_for(settings: Settings, manifest: dict[str, Any]) -> None:
    """The demo's warehouse belongs to one demo world: when the world changed (another seed,
    size or generator version) or the pool settings it runs with, the old demo warehouse is set
    aside, not mixed in. A world grown
    by days past its window is the same world, so it keeps its warehouse."""
    from revbench.worlds import DEMO_WORLD

    # The marker also says the folder is SYNTHETIC: commands that fetch from real services refuse it.
    marker = settings.data_dir / DEMO_WORLD
    # The pool settings the demo runs with are part of the key: round 1 cannot be re-run under
    # others (a changed default or REVBENCH_POOLS__ setting), so such a folder starts afresh too.
    pools = json.dumps(settings.with_overrides(pools=DEMO_POOLS).pools.model_dump(mode="json"), sort_keys=True)
    key = (f"{manifest.get('base_key', manifest['spec_key'])}-format{manifest['format']}"
           f"-pools{hashlib.sha256(pools.encode()).hexdigest()[:12]}")
    # The survey store and the releases go with the warehouse: they hold the old world's answers
    # and benchmark, and a store alone would be pulled into the new world's warehouse.
    store = settings.survey_store_path
    held = [*settings.data_dir.glob("warehouse.duckdb*"), *store.parent.glob(f"{store.name}*")]
    if settings.releases_dir.is_dir():
        held.append(settings.releases_dir)
    if held and (not marker.exists() or marker.read_text() != key):
        aside = settings.data_dir / f"previous-demo-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.mkdir(parents=True)
        for p in held:
            p.rename(aside / p.name)
        console.tell(f"the demo world or the demo's pool settings changed; the previous demo warehouse, survey store "
                     f"and releases were moved to {aside}")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(key)


def demo_key(settings: Settings, name: str, derived_from: str | None = None) -> str:
    """One of the demo's own keys (link signing, release ids), made once and kept in the data
    folder so links and release ids stay the same across demo runs; a real survey and release set
    REVBENCH_SURVEY__SIGNING_KEY and REVBENCH_RELEASE__ID_KEY. With ``derived_from`` (the world's
    key) a new folder's key is derived from it, not drawn: the release ids, which the bootstrap
    resamples in their order, and so every interval the demo prints are the same in every fresh
    folder (its people are SYNTHETIC: nobody can be linked back). A folder keeps the key it has."""
    import hashlib
    import secrets

    path = settings.data_dir / f".{name}-demo-key"
    if not path.exists():
        made = (hashlib.sha256(f"revbench-demo-{name}\x1f{derived_from}".encode()).hexdigest() if derived_from
                else secrets.token_urlsafe(32))
        path.write_text(made)
        path.chmod(0o600)
    return path.read_text().strip()


def survey_round(settings: Settings, panel: Callable[[list[Any], Callable[[], int]], dict[str, int]],
                 track: bool) -> tuple[Any, dict[str, int], dict[str, int], Settings]:
    """Round 1's invitations through a local SMTP server and the survey server, answered by
    ``panel`` (the captured messages, and the survey store's count of what it recorded, which the
    panel's scanners must not move). Returns the wave, the panel's counts, the survey store's
    counts and the settings the round ran with."""
    from revbench.flows.survey import survey_flow
    from revbench.replay.mailsink import MailSink
    from revbench.replay.server import AppServer, free_port
    from revbench.survey.server import create_app
    from revbench.warehouse.status import survey_counts
    from revbench.warehouse.store import SurveyStore

    port = free_port()

    def recorded() -> int:  # what the panel's scanners must not move
        with SurveyStore(settings.survey_store_path) as store:
            return store.max_event_id() + len(store.opted_out())

    with MailSink() as sink:
        s = settings.with_overrides(smtp=sink.smtp_overrides(), survey={
            "signing_key": demo_key(settings, "survey"), "base_url": f"http://127.0.0.1:{port}", "auto_approve": True,
            "messages_per_minute": 60000, "team": "the revbench demo team", "lab": "SYNTHETIC demo lab",
            "institution": "revbench", "sender_email": "survey@revbench.example",
            # The panel's answers carry their time on its simulated clock: the flags on pace read
            # the same times on an idle machine and a loaded one.
            "simulated_answer_times": True})
        with AppServer(create_app(s), port=port):
            wave = survey_flow.run(s, round=1, track=track)
            answered = panel(list(sink.messages), recorded)
    return wave, answered, survey_counts(s.warehouse_path, s.survey_store_path), s


def print_scanners(panel: dict[str, int], links: int | None = None) -> None:
    """What the mail scanners in front of the panel did (on at most ``links`` links a message),
    and what they recorded (nothing, rightly)."""
    which = "every link" if links is None else f"the first {links} links of each message"
    console.print(
        f"Link scanners: {panel['scanner_requests']} requests on {panel['scanned_mailboxes']} mailboxes "
        f"({which}, HEAD and GET, before the person), {panel['scanner_recorded']} recorded anything.")


def run_survey_round(settings: Settings, truth: Any, corpus: Any, seed: int, track: bool, story: Any) -> dict[str, Any]:
    """Round 1's invitations through a local SMTP server, the survey server, and a SYNTHETIC
    panel that reads the emails and follows their links (told to ``story``, a
    ``demo_story.Story``); its numbers for ``reports/demo.json``."""
    from revbench.synth.respondents import answer

    wave, panel, counts, _ = survey_round(settings, lambda messages, recorded: answer(
        truth, messages, corpus, seed, settings.data_dir / "survey" / "demo-panel", recorded,
        pace_seconds=DEMO_PACE_SECONDS), track)
    console.print(
        f"Survey round 1: {wave.sent} invitations sent now ({wave.rendered} rendered, {len(wave.left_out)} left out); "
        f"the [yellow]SYNTHETIC[/] panel read {panel['emails']} emails: {panel['answered']} answered "
        f"({panel['ratings']} ratings, {panel['skips']} skipped papers, {panel['changes']} changed ratings), "
        f"{panel['silent']} silent, {panel['opt_outs']} opted out. In the survey store: "
        f"{counts.get('ratings', 0)} ratings from {counts.get('invitations with answers', 0)} invitations, "
        f"{counts.get('skipped papers', 0)} skips, {counts.get('opted out', 0)} opt-outs.")
    print_scanners(panel)
    story.survey(wave.sent, panel)
    return {"sent": wave.sent, **{k: v for k, v in panel.items() if isinstance(v, int)}}


def run_ratings(settings: Settings, track: bool, story: Any) -> tuple[dict[str, Any], Path | None]:
    """The ratings flow on the survey's answers (flags decided by the demo's policy), with the
    flags judged against the panel's planted low-effort respondents, then the evaluation of the
    demo's scorers on its own benchmark (told to ``story``); its numbers for ``reports/demo.json``
    and the evaluation's report folder."""
    import polars as pl

    from revbench.flows.ratings import ratings_flow
    from revbench.schemas.tables import RATINGS, SURVEY_INVITATIONS
    from revbench.synth.truth import flag_quality
    from revbench.warehouse import Warehouse

    out = ratings_flow.run(settings.with_overrides(ratings=DEMO_RATINGS), track=track)
    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        email_of = dict(wh.read(SURVEY_INVITATIONS).select("invitation_id", "email").iter_rows())
        rated = wh.read(RATINGS).select("invitation_id", "reviewer_id").unique().rows()
    respondents = pl.read_parquet(settings.data_dir / "survey" / "demo-panel" / "respondents.parquet")
    by_reviewer: dict[str, set[str]] = {}
    for inv, reviewer in rated:
        by_reviewer.setdefault(reviewer, set()).add(email_of[inv].lower())
    flagged = {e for f in out.flag_list for e in by_reviewer.get(f["reviewer_id"], set())}
    quality = flag_quality(respondents, flagged, {email_of[i].lower() for i, _ in rated})
    (settings.data_dir / "reports" / "ratings").mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "reports" / "ratings" / "flag_quality.json").write_text(json.dumps(quality, indent=1))
    print_ratings(out, quality)
    story.ratings(out, quality)
    from revbench.flows.ratings import COUNTS

    return ({"counts": {field: getattr(out, field) for _, field in COUNTS}, "flags": quality},
            Path(out.evaluation.report_dir) if out.evaluation else None)


def print_encodes() -> None:
    """How many texts the stages asked to embed and how many the model encoded."""
    from revbench.ml.embeddings import EmbeddingCache

    asked, encoded, by_cut = EmbeddingCache.totals()
    if asked:
        console.print(f"embeddings: {asked} texts asked for by the pools and the evaluation, {encoded} encoded "
                      f"({1 - encoded / asked:.0%} saved: repeated texts, {by_cut} cut alike at the token limit, "
                      "vectors kept from earlier runs)")


def print_realism_rows(rows: list[Any]) -> None:
    """The realism rows (``revbench.synth.realism.Row``) as one compact table: target, real figure,
    the world's value, tolerance, whether it holds."""
    from rich.table import Table

    from revbench.synth.realism import fmt

    t = Table(title="The SYNTHETIC world against real data (docs/benchmarks.md: how real the world is)", title_justify="left")
    for col in ("target", "real", "world", "tolerance", "holds"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.id, r.target if isinstance(r.target, str) else fmt(r.target), fmt(r.world), r.tolerance,
                  {True: "yes", False: "NO", None: "-"}[r.holds])
    console.print(t)


def demo_measures(settings: Settings) -> dict[str, Any]:
    """What the pipeline made of the world in this data folder, for the realism rows: the warehouse
    benchmark's kept ratings and profiles, and the evaluation's losses (none where a demo has not
    filled the folder, or its warehouse is busy)."""
    from revbench.errors import RevbenchError
    from revbench.synth.realism import pipeline_measures
    from revbench.warehouse import Warehouse

    frames = None
    if settings.warehouse_path.exists():
        try:
            with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
                frames = wh.ratings.benchmark_frames(settings.ratings.profile_max_papers)
        except RevbenchError as exc:  # busy or not a warehouse: the rows say they have no value
            console.print(f"realism: the warehouse was not read ({exc})")
    return pipeline_measures(settings.data_dir, frames)


def print_realism(settings: Settings, world_dir: Path) -> dict[str, int]:
    """The world against the real figures it is calibrated on (revbench/reference/world_targets.txt):
    what its truth gives and what this demo's pipeline made of it, in a table and in
    ``reports/world_realism.json``; how many targets hold."""
    from revbench.synth.realism import realism_rows, world_measures, write_report

    rows = realism_rows({**world_measures(world_dir), **demo_measures(settings)})
    out = settings.data_dir / "reports" / "world_realism.json"
    write_report(rows, out, world_dir)
    print_realism_rows(rows)
    held = sum(r.holds is True for r in rows)
    console.print(f"{held} of {len(rows)} targets hold ({sum(r.holds is False for r in rows)} do not); report: {out}")
    return {"targets": len(rows), "hold": held, "fail": sum(r.holds is False for r in rows)}


def write_demo_facts(settings: Settings, facts: dict[str, Any]) -> Path:
    """``reports/demo.json``: the run's numbers the README and Getting started quote (rendered
    into them by ``docs/gen_numbers.py`` from ``benchmarks/results/demo.json``, never typed), with
    the average loss of each scorer on the warehouse benchmark and the pairs it rests on."""
    results = settings.data_dir / "reports" / "warehouse" / "results.json"
    rows = json.loads(results.read_text()) if results.exists() else []
    facts["losses"] = {r["scorer"]: round(r["value"], 4) for r in rows
                       if r["split"] == "average" and r["metric"] == "loss" and r["value"] is not None}
    facts["coverage"] = min((r["coverage"] for r in rows if r["metric"] == "loss" and r.get("coverage") is not None
                             and r["split"] in ("pointwise", "paper_centric")), default=None)
    out = settings.data_dir / "reports" / "demo.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(facts, indent=1, default=str))
    return out


def run_demo(settings: Settings, papers: int, seed: int, replay: ReplaySettings, track: bool,
             cassettes: Path | None = None, citation_link: float = 1.0) -> None:
    """Generate (or reuse) the world, serve it, and run ingest, disambiguation (the offline
    fallback, then the LLM), pools, a survey round answered by a SYNTHETIC panel, the ratings with
    their evaluation, and a release, each stage audited against the truth. The screen gets a short
    account (``revbench.app.demo_story``); every stage's full output goes to ``reports/demo.txt``
    (and the screen too with ``-v``). Recorded answers in ``cassettes`` are given before the
    world's (see ``revbench.replay.cassettes``)."""
    from revbench.app.demo_story import Story, told
    from revbench.app.entry import VERBOSE

    story = Story(VERBOSE[0])
    with told(story, settings.data_dir / "reports" / "demo.txt", VERBOSE[0], track):
        _run_demo(story, settings, papers, seed, replay, track, cassettes, citation_link)


def _run_demo(story: Any, settings: Settings, papers: int, seed: int, replay: ReplaySettings, track: bool,
              cassettes: Path | None, citation_link: float) -> None:
    from revbench.flows.disambiguate import disambiguate_flow
    from revbench.flows.graph import graph_flow
    from revbench.flows.ingest import ingest_flow
    from revbench.flows.pools import pools_flow
    from revbench.replay import spawn_replay
    from revbench.schemas.tables import ASSIGNMENTS, AUTHOR_LINKS, POOL_EVIDENCE, POOL_EXCLUSIONS
    from revbench.synth.truth import (
        coi_violations,
        disambiguation_quality,
        graph_conflicts_caught,
        load_truth,
        planted_conflicts_caught,
    )
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import ensure_world
    from revbench.warehouse import Warehouse

    t0 = time.monotonic()
    world_dir = settings.worlds_dir / (f"demo-{papers}-{seed}" + ("" if citation_link == 1.0 else f"-link{citation_link:g}"))
    with console.status("generating the SYNTHETIC demo world"):
        manifest = ensure_world(world_dir, WorldSpec(n_papers=papers, seed=seed, start=DEMO_SINCE, end=DEMO_UNTIL,
                                                     citation_link=citation_link))
    demo_warehouse_for(settings, manifest)
    keep_demo_settings(settings)
    truth = load_truth(world_dir)
    c = manifest["counts"]
    console.print(
        f"[yellow]SYNTHETIC[/] demo world: {c['papers']} papers, {c['mentions']} mentions, "
        f"{c['persons']} people, {c['bad_records']} deliberately bad records -> {world_dir}"
    )
    story.world(world_dir.name, c, replay.fault_rate)
    with spawn_replay(world_dir, replay, fixtures_dir=cassettes) as base:
        console.print(f"replay server on {base} (faults: {replay.fault_rate:.0%} of requests, all transient)")
        s = demo_settings(settings, base)
        s = s.with_overrides(ratings={"evaluate_scorers": demo_scorers(s.ratings.evaluate_scorers)})
        ingested = ingest_flow.run(s, DEMO_SINCE, DEMO_UNTIL, synthetic=True, track=track)
        print_ingest_summary(ingested)
        story.ingest(ingested)
        # The world serves OpenAlex too: its affiliations with years are what the institution COI reads.
        s = s.with_overrides(openalex={"enabled": True})
        graphed = graph_flow.run(s, track=track)
        print_graph(graphed)
        story.graph(graphed)
        # Nothing fetched: the same mentions and graph, so the same authors and pools as last time.
        fetched_nothing = not story.new_work
        deciders = []
        for decider in ("fallback", "llm"):
            dis = disambiguate_flow.run(s.with_overrides(disambiguate={"use_llm": decider == "llm"}), track=track)
            with Warehouse.open(s.warehouse_path, read_only=True, lock_wait=s.warehouse.lock_wait_seconds) as wh:
                links = wh.read(AUTHOR_LINKS)
            deciders.append((dis, disambiguation_quality(truth, links)))
            print_disambiguation(*deciders[-1])
        story.authors(deciders, fetched_nothing)
        stats = pools_flow.run(s.with_overrides(pools=DEMO_POOLS), round=1, track=track)
    with Warehouse.open(s.warehouse_path, read_only=True, lock_wait=s.warehouse.lock_wait_seconds) as wh:
        assignments = wh.pools.read_round(ASSIGNMENTS, stats.round)
        evidence, exclusions = wh.pools.read_round(POOL_EVIDENCE, stats.round), wh.pools.read_round(POOL_EXCLUSIONS, stats.round)
        # The conflict only the graph reveals is audited apart, after the ones the PDFs show.
        planted = (planted_conflicts_caught(truth, evidence, exclusions, assignments, links)
                   + graph_conflicts_caught(truth, evidence, exclusions, assignments, links))
        corpus = wh.ingest.corpus_papers()
    audit = coi_violations(truth, assignments, links)
    print_pools(stats, audit, planted=planted)
    story.pools(stats, audit, planted, fetched_nothing)
    facts: dict[str, Any] = {
        "papers": papers, "seed": seed, "world": {**c, "spec_key": manifest["spec_key"], "format": manifest.get("format")},
        "ingest": {"fetched": next((x["rows_out"] for x in ingested.stages if x["stage"] == "crawl"), 0),
                   **ingested.totals},
        "graph": {"papers_asked": graphed.papers_asked, "references_saved": graphed.references_saved,
                  "coverage": {x["source"]: x["papers_with_references"] for x in graphed.coverage["sources"]}},
        "authors": [{"decider": d.decider, "mentions": d.mentions, "merges": sum(d.merges.values()), "authors": d.authors,
                     "llm_calls": d.llm_calls, "precision": q["pairwise_precision"], "recall": q["pairwise_recall"]}
                    for d, q in deciders],
        "pools": {"queries": stats.queries, "invitations": stats.assignments, "candidates": stats.invited_candidates,
                  "exclusions": stats.exclusions, "coi_audit": audit,
                  "planted": [{"kind": p["kind"], "caught": p["caught"], "reasons": p.get("reasons", [])} for p in planted],
                  "invitations_by_path": stats.invitations_by_path},
        "survey": run_survey_round(s, truth, corpus, seed, track, story)}
    facts["ratings"], report_dir = run_ratings(s, track, story)
    from revbench.flows.release import release_flow

    # The demo's curator publishes what the audit passed.
    key = demo_key(settings, "release", derived_from=manifest["spec_key"])
    released = release_flow.run(s.with_overrides(release={"id_key": key, "auto_approve": True}), only_if_changed=True,
                                track=track)
    print_release(released)
    story.release(released)
    facts["release"] = {"version": released.version, "built": not released.unchanged, "status": released.status}
    # Weak labels from the citations (exHarmony): the demo world's people write a few papers each,
    # so its experts are those with more than 3 (exHarmony's 15 is for a real corpus).
    from revbench.flows.labels import write_labels

    labels = write_labels(s, "citations", Path(s.data_dir) / "weak-citations", experts=DEMO_EXPERTS)
    print_labels(labels)
    story.labels(labels)
    print_encodes()
    story.embeddings()
    realism = print_realism(settings, world_dir)
    facts["evaluation"] = story.evaluation(report_dir) if report_dir else {}
    story.realism(realism)
    seconds = time.monotonic() - t0
    a = labels.agreement
    write_demo_facts(settings, {**facts, "labels": {"positives": a.n_positive, "pairs": a.n_pairs, "kendall_tau": a.kendall_tau,
                                                    "auc": a.auc}, "realism": realism, "seconds": round(seconds, 1)})
    story.ending(seconds, settings.data_dir, track)
