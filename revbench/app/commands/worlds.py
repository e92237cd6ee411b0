"""The SYNTHETIC worlds' commands: ``demo`` (the offline end-to-end run through every stage, or a
published benchmark rebuilt from its files with --world) and ``world`` (a SYNTHETIC world written to
a folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from revbench.app.cli_common import Track, parse_date
from revbench.app.console import console
from revbench.app.entry import DEMO_SINCE, DEMO_UNTIL, build_settings, check_output_dir, prepare_process, resolve_track
from revbench.errors import UsageError
from revbench.settings import ReplaySettings


def demo(
    papers: Annotated[int | None, typer.Option(min=20, help="Papers in the synthetic demo world (default 300)")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic world")] = 7,
    fault_rate: Annotated[float, typer.Option(help="Share of replayed requests that fail transiently (0 to 1)")] = 0.05,
    cassettes: Annotated[Path | None, typer.Option(help="Directory of recorded real answers (routes.json and/or VCR *.yaml cassettes) the replay server gives before the world's")] = None,
    world: Annotated[str | None, typer.Option(help="KIND=PATH: rebuild a published benchmark (lrbench or goldstandard) from its files instead of a SYNTHETIC world, and compare the rebuild with it")] = None,
    citation_link: Annotated[float, typer.Option(min=0.0, max=8.0, help="How strongly the SYNTHETIC world's citations follow subject and expertise (1: calibrated to real data; 0: blind to both); for measuring what the graph is worth")] = 1.0,
    track: Track = None,
) -> None:
    """Offline end-to-end run: a SYNTHETIC world behind a local replay server, through every stage;
    with --world, a world imported from LR-bench or the gold standard, compared with the original."""
    try:
        replay = ReplaySettings(fault_rate=fault_rate, fault_seed=seed, timeout_delay_seconds=3.0, retry_after_seconds=1)
    except ValueError as exc:
        raise UsageError(f"--fault-rate {fault_rate}: expected a share from 0 to 1 ({exc.errors()[0]['msg']})") from None  # type: ignore[attr-defined]
    # The demo sets its own values; the ones it stored for later commands are not for it.
    settings = build_settings(demo_data=False)
    from revbench.worlds import check_demo_folder

    check_demo_folder(settings)  # a real warehouse is never set aside for a SYNTHETIC world
    if world is not None:
        from revbench.app.rebuild import load_source, run_rebuild

        if cassettes is not None or papers is not None or citation_link != 1.0:
            flag = "--cassettes" if cassettes is not None else "--papers" if papers is not None else "--citation-link"
            raise UsageError(f"{flag}: not with --world (the benchmark's files make the whole world)")
        source = load_source(world)  # a wrong --world or a bad file is one line before anything starts
        prepare_process(settings)
        run_rebuild(settings, source, seed, replay, track=resolve_track(track, long_flow=True))
        return
    prepare_process(settings, run_lines=False)  # the demo tells its own short story
    from revbench.app.demo import run_demo

    if cassettes is not None:
        from revbench.replay.cassettes import load_recordings

        load_recordings(cassettes)  # a bad recording is one line here, not a dead replay process later
    run_demo(settings, 300 if papers is None else papers, seed, replay, track=resolve_track(track, long_flow=True), cassettes=cassettes,
             citation_link=citation_link)


def world(
    out: Annotated[Path, typer.Option(help="Directory to write the world to")],
    papers: Annotated[int, typer.Option(min=1, help="Number of papers")] = 300,
    seed: Annotated[int, typer.Option(help="Seed")] = 7,
    since: Annotated[str, typer.Option(help="Window start YYYY-MM-DD")] = DEMO_SINCE.isoformat(),
    until: Annotated[str, typer.Option(help="Window end YYYY-MM-DD")] = DEMO_UNTIL.isoformat(),
    documents: Annotated[bool, typer.Option(help="Also write PDFs and TEI")] = True,
    extra_days: Annotated[int, typer.Option(min=0, help="Growth days after --until, each adding new papers")] = 0,
    graph: Annotated[bool, typer.Option(help="Also draw the scholarly graph (--no-graph: a world as before it)")] = True,
    bulk: Annotated[Path | None, typer.Option(help="Also write the world as bulk files: DIR/s2ag (S2AG papers and citations) and DIR/openalex (the OpenAlex snapshot), for REVBENCH_S2__BULK_DIR and REVBENCH_OPENALEX__SNAPSHOT_DIR")] = None,
) -> None:
    """Generate a SYNTHETIC world (services' answers plus hidden truth)."""
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import generate_world

    s, u = parse_date(since, "--since"), parse_date(until, "--until")
    if u < s:
        raise UsageError(f"--until {until} is before --since {since}")
    check_output_dir(out, "--out")
    if bulk is not None:
        check_output_dir(bulk, "--bulk")
        if bulk.is_dir() and any(bulk.iterdir()):
            # another world's partitions would stay beside this one's and be read as one snapshot
            raise UsageError(f"--bulk {bulk} is not empty; give an empty or new folder")
    spec = WorldSpec(n_papers=papers, seed=seed, start=s, end=u, documents=documents, extra_days=extra_days,
                     graph=graph)
    with console.status(f"generating {papers} SYNTHETIC papers"):
        manifest = generate_world(out, spec)
    console.print_json(json.dumps(manifest["counts"]))
    if bulk is not None:
        from revbench.replay.snapshot import write_snapshot
        from revbench.synth.bulk_files import write_s2ag

        with console.status("writing the world as bulk files"):
            s2ag, snapshot = write_s2ag(out, bulk / "s2ag"), write_snapshot(out, bulk / "openalex")
        console.print(f"bulk files: {bulk / 's2ag'} ({s2ag['papers']} papers, {s2ag['citations']} citations; "
                      f"REVBENCH_S2__BULK_DIR), {bulk / 'openalex'} ({snapshot['works']} works in {snapshot['partitions']} "
                      f"partitions, {snapshot['authors']} authors; REVBENCH_OPENALEX__SNAPSHOT_DIR)", highlight=False)
