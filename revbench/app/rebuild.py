"""Rebuild a published benchmark from its real text (``revbench demo --world KIND=PATH``): a world
imported from the benchmark's files behind the replay server, the whole loop on it (ingest,
identities, pools with the real embedding model, survey, ratings, release, evaluation), and the
comparison with the original written to ``reports/rebuild/``.

This is the application's part: the command's ``--world``, the run's order with its progress and
printed results, the demo's survey round and settings. What the rebuild fixes, measures, compares
and writes lives below, in ``revbench.rebuild``."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table as RichTable

from revbench.app.commands.corpus import print_disambiguation, print_ingest_summary
from revbench.app.commands.pools import print_pools
from revbench.app.commands.ratings import print_ratings
from revbench.app.commands.release import print_release
from revbench.app.console import console
from revbench.app.demo import (
    DEMO_KEY_FILES,
    DEMO_PACE_SECONDS,
    DEMO_RATINGS,
    demo_settings,
    demo_warehouse_for,
    print_scanners,
    survey_round,
)
from revbench.app.entry import DEMO_SINCE, DEMO_UNTIL, save_demo_settings
from revbench.errors import UsageError
from revbench.evaluation.importers.registry import load_benchmark
from revbench.evaluation.model import Benchmark
from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.pools import pools_flow
from revbench.flows.ratings import ratings_flow
from revbench.flows.release import release_flow
from revbench.rebuild.compare import comparison
from revbench.rebuild.pools import PoolsChoice, defaults_copy, fit_from_world, product_settings
from revbench.rebuild.report import loss_cell, write_report
from revbench.rebuild.run import REBUILD_SCORERS, evaluate_both, rebuild_queries, rebuild_release_key
from revbench.replay import spawn_replay
from revbench.schemas.tables import AUTHOR_LINKS
from revbench.settings import ReplaySettings, Settings
from revbench.synth.benchmark_panel import answer_held, held_levels
from revbench.synth.imported import (
    PROFILE_CATEGORY,
    QUERY_CATEGORY,
    WORLD_KINDS,
    ensure_imported_world,
    held_ratings,
    world_key,
)
from revbench.synth.truth import disambiguation_quality, load_truth
from revbench.warehouse import Warehouse

REBUILD_RATINGS = {**DEMO_RATINGS, "unattended_decision": "keep", "evaluate_after": False}
"""The demo's rules on its fast clock; the answers are the benchmark's own, so flags are
reported and nothing is dropped (the comparison evaluates the release on its own)."""
REBUILD_SCAN_LINKS = 250
"""Links a mail scanner opens of one rebuild invitation (fifty papers' five levels): the fitted
pools can put hundreds of papers in one email, and every link opened twice cost the gold
standard's rebuild nine minutes of its thirteen for the same proof (nothing recorded)."""
STAGES = ("world", "ingest", "identities", "pools", "survey", "ratings", "release", "evaluation", "comparison")


def parse_world(text: str) -> tuple[str, Path]:
    """``KIND=PATH`` of ``--world``: a kind a world can be imported from and an existing path."""
    kind, sep, path = text.partition("=")
    if not sep or not path:
        raise UsageError(f"--world {text!r}: expected KIND=PATH, e.g. lrbench=../shared/external/lrbench-sample")
    if kind not in WORLD_KINDS:
        raise UsageError(f"--world {text!r}: a world can be imported from {', '.join(WORLD_KINDS)}, not {kind!r}")
    if not Path(path).exists():
        raise UsageError(f"--world {text!r}: {path} does not exist")
    return kind, Path(path)


def load_source(text: str) -> tuple[str, Path, Benchmark]:
    """``--world KIND=PATH`` read and checked (strictly: what a world needs) before any work."""
    kind, source = parse_world(text)
    return kind, source, load_benchmark(kind, source, strict=True)


@dataclass(frozen=True)
class Stages:
    """Progress over the rebuild's stages, one line each, with the time since the start."""

    t0: float

    def __call__(self, name: str, note: str = "") -> None:
        i = STAGES.index(name) + 1
        console.rule(f"[bold]rebuild {i}/{len(STAGES)}: {name}[/] ({time.monotonic() - self.t0:.0f} s){' - ' + note if note else ''}")


def run_rebuild(settings: Settings, world: tuple[str, Path, Benchmark], seed: int, replay: ReplaySettings,
                track: bool) -> dict[str, Any]:
    """The whole loop on a world imported from ``world`` (kind, path and the benchmark read from
    it by :func:`load_source`), then the comparison with the original (printed, and written to
    ``<data>/reports/rebuild/``). Returns the comparison."""
    kind, source, bench = world
    t0 = time.monotonic()
    step = Stages(t0)
    step("world", f"{kind} from {source}")
    held = held_ratings(bench)
    data = settings.data_dir / "rebuild" / kind
    base = settings.with_overrides(data_dir=data)
    world_dir = base.worlds_dir / world_key(kind, bench, seed)

    def progress(what: str, done: int, total: int) -> None:
        console.print(f"  {what}: {done}/{total}")

    manifest = ensure_imported_world(world_dir, kind, source, bench, seed, DEMO_SINCE, DEMO_UNTIL, progress)
    demo_warehouse_for(base, manifest)
    save_demo_settings(data, {"ratings": REBUILD_RATINGS, "pools": rebuild_queries(held)}, DEMO_KEY_FILES)
    imp = manifest["imported"]
    console.print(f"world from {kind}: {imp['queries']} query papers, {imp['reviewers']} reviewers with "
                  f"{imp['publications']} publications, {imp['rated_pairs']} rated pairs -> {world_dir}")
    s, release_dir, pools = _loop(base, world_dir, manifest, rebuild_queries(held), replay, seed, track, step, kind)
    step("evaluation", ", ".join(REBUILD_SCORERS))
    report = settings.data_dir / "reports" / "rebuild"
    rows = evaluate_both(s, kind, source, release_dir, report / kind / "evaluation", track)
    step("comparison")
    result = comparison(s, world_dir, bench, kind, source, release_dir, rows, pools, rebuild_release_key(manifest),
                        report / kind / "evaluation")
    result["seconds"] = round(time.monotonic() - t0, 1)
    paths = write_report(result, report / kind)
    for p in paths:  # the latest rebuild also at the top of reports/rebuild/
        shutil.copyfile(p, report / p.name)
    _print_comparison(result, report)
    return result


def _loop(base: Settings, world_dir: Path, manifest: dict[str, Any], queries: dict[str, Any],
          replay: ReplaySettings, seed: int, track: bool, step: Stages, kind: str) -> tuple[Settings, Path, PoolsChoice]:
    """Ingest, identities, pools, survey, ratings and release on the imported world (of ``kind``,
    which the ingest records so the release cites the benchmark it was rebuilt from)."""
    truth = load_truth(world_dir)
    with spawn_replay(world_dir, replay) as url:
        s = demo_settings(base, url).with_overrides(arxiv={"categories": [QUERY_CATEGORY, PROFILE_CATEGORY]})
        step("ingest", f"replay server on {url}")
        print_ingest_summary(ingest_flow.run(s, DEMO_SINCE, DEMO_UNTIL, synthetic=True, derived_from=kind, track=track))
        step("identities")
        for decider in ("fallback", "llm"):
            dis = disambiguate_flow.run(s.with_overrides(disambiguate={"use_llm": decider == "llm"}), track=track)
            with Warehouse.open(s.warehouse_path, read_only=True) as wh:
                links = wh.read(AUTHOR_LINKS)
            print_disambiguation(dis, disambiguation_quality(truth, links))
        pools = _pools(s.with_overrides(pools=queries), world_dir, track, step)
        s = s.with_overrides(pools={**queries, **pools.fitted})
    step("survey")
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        corpus = wh.ingest.corpus_papers()
    held = held_levels(world_dir, corpus)
    wave, panel, counts, _ = survey_round(s, lambda messages, recorded: answer_held(
        held, messages, seed, s.data_dir / "survey" / "rebuild-panel", recorded, pace_seconds=DEMO_PACE_SECONDS,
        scan_links=REBUILD_SCAN_LINKS), track)
    console.print(f"Survey round 1: {wave.sent} invitations sent; the panel answered {panel['ratings']} papers the "
                  f"benchmark rates, left {panel['unheld']} it does not unanswered ({panel['silent']} emails silent). "
                  f"In the survey store: {counts.get('ratings', 0)} ratings.")
    print_scanners(panel, REBUILD_SCAN_LINKS)
    step("ratings")
    s = s.with_overrides(ratings=REBUILD_RATINGS)
    print_ratings(ratings_flow.run(s, track=track))
    step("release")
    # Real abstracts carry their authors' addresses ("Correspondence to: ... <x@lab.org>").
    out = release_flow.run(s.with_overrides(release={"id_key": rebuild_release_key(manifest), "auto_approve": True,
                                                     "redact_addresses": True}),
                           only_if_changed=True, track=track)
    print_release(out)
    return s, Path(out.dir), pools


def _pools(s: Settings, world_dir: Path, track: bool, step: Stages) -> PoolsChoice:
    """Round 1 of the pools twice: with the product's settings on a copy of the warehouse (what
    revbench would invite), then with the settings fitted to the original's rated pairs on the
    warehouse itself (what the rest of the rebuild uses: its misses are the pipeline's, not the
    settings'). Both share the embedding cache."""
    p = s.pools
    copy_dir = defaults_copy(s)
    step("pools", f"the product's settings (tau {p.tau}, {p.candidates_per_query} a query, {p.max_queries_per_candidate} "
                  f"a candidate, {p.min_recent_papers} recent papers), model {p.model}")
    # The copy of a warehouse that already holds the fitted round (a rebuild run again) replaces it.
    print_pools(pools_flow.run(s.with_overrides(data_dir=copy_dir), round=1, replace=True, track=track))
    fit = fit_from_world(s, world_dir)
    step("pools", f"fitted to the original's rated pairs: tau {fit.tau} ({fit.below_tau} of {fit.pairs} rated pairs "
                  f"below it), {fit.candidates_per_query} a query, {fit.max_queries_per_candidate} a candidate, "
                  f"{fit.min_recent_papers} recent papers")
    print_pools(pools_flow.run(s.with_overrides(pools=fit.settings()), round=1, track=track))
    return PoolsChoice(product_settings(s), fit.settings(), fit, copy_dir / "warehouse.duckdb")


def _print_comparison(result: dict[str, Any], report: Path) -> None:
    r = result["pool_recall"]
    console.print(f"Pool recall of the original's rated pairs: {r['recalled']}/{r['pairs']} "
                  f"({(r['recall'] or 0):.0%}) at tau {r['tau']}; missed: "
                  + (", ".join(f"{n} {k}" for k, n in r["missed_by_reason"].items() if n) or "none")
                  + " (pools fitted to the original's rated pairs)")
    if "defaults" in result:
        d = result["defaults"]["pool_recall"]
        console.print(f"With the product's pool settings (tau {d['tau']}): {d['recalled']}/{d['pairs']} "
                      f"({(d['recall'] or 0):.0%}); missed: "
                      + (", ".join(f"{n} {k}" for k, n in d["missed_by_reason"].items() if n) or "none"))
    t = result["tuples"]
    console.print(f"Tuples: original {t['original']}, rebuilt {t['rebuilt']}; of the {t['recalled']} original tuples "
                  f"whose pairs were both rated, {t['matched']} rebuilt with the same label, {t['reversed']} reversed, "
                  f"{t['tied']} tied by the 1-5 scale, {t['unpaired']} never paired: labels identical: "
                  f"{'n/a (none compared)' if t['labels_identical'] is None else t['labels_identical']}")
    table = RichTable(title="Loss (95% interval) on the original and on the rebuild", title_justify="left")
    for col in ("scorer", "original", "pairs", "rebuilt", "pairs "):
        table.add_column(col)
    for sc in result["scorers"]:
        table.add_row(sc["name"], loss_cell(sc["original_loss"], sc["original_ci"]), str(sc["original_n"]),
                      loss_cell(sc["rebuilt_loss"], sc["rebuilt_ci"]), str(sc["rebuilt_n"]))
    console.print(table)
    tau = result["kendall_tau"]
    console.print(f"Kendall tau between the two orderings: {'-' if tau is None else f'{tau:.2f}'}; "
                  f"rebuild finished in {result['seconds']:.0f} s. Report: [cyan]{report}[/] (rebuild.json, rebuild.md, rebuild.png)")
