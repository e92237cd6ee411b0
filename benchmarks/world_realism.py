"""How like the real world the SYNTHETIC demo world is: one row per target of
``revbench/reference/world_targets.txt`` (the real figure, its source and tolerance), the world's
value, and whether it holds.

What the world's truth gives is measured on the demo world itself (generated, or reused, under the
data folder's ``worlds/``, as the demo does); what only the pipeline gives (kept ratings, profile
sizes, the scorers' losses) is read from the data folder a demo filled, when it did.

    .venv/bin/python -m benchmarks.world_realism                       # ./data, the default demo world
    REVBENCH_DATA_DIR=/tmp/demo .venv/bin/python -m benchmarks.world_realism
    .venv/bin/python -m benchmarks.world_realism --world DIR --data DIR --out FILE
    .venv/bin/python -m benchmarks.world_realism --real                # recount the real graph figures

``--real`` recounts, from the recorded answers in ``../shared/external/real-responses``, the two
graph targets taken from them (references per paper; references GROBID reads an identifier from).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from revbench.app.demo import demo_measures, print_realism_rows
from revbench.synth.realism import realism_rows, world_measures, write_report

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = ROOT.parent / "shared" / "external" / "real-responses"
WORK_TYPES = ("article", "preprint", "review")
"""OpenAlex work types counted: research papers (paratext, books and dissertations are not)."""


def demo_world(settings: Any, papers: int = 300, seed: int = 7) -> Path:
    """The demo's world under ``settings``' worlds folder, generated if it is not there yet."""
    from revbench.app.entry import DEMO_SINCE, DEMO_UNTIL
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import ensure_world

    world = settings.worlds_dir / f"demo-{papers}-{seed}"
    ensure_world(world, WorldSpec(n_papers=papers, seed=seed, start=DEMO_SINCE, end=DEMO_UNTIL))
    return world


def real_figures(external: Path = EXTERNAL) -> dict[str, Any]:
    """The graph targets' figures from the recorded real answers: references per distinct work
    (OpenAlex ``referenced_works`` of research papers with at least one, GROBID full-text reference
    lists, Semantic Scholar reference pages) and the references GROBID, without consolidation, reads a
    DOI or an arXiv id from."""
    from revbench.clients.tei import parse_tei_references
    from revbench.replay.cassettes import load_cassette

    counts: dict[str, int] = {}
    read_ids = total = 0
    consolidated = ("grobid-0.6.1", "grobid-0.6.2")  # asked with consolidateCitations (their PROVENANCE)
    for f in sorted((external / "grobid-fulltext").glob("*.tei.xml")):
        refs = parse_tei_references(f.read_bytes())
        paper = f.name.split("__")[1].split(".grobid")[0].split(".tei")[0]
        counts[f"pdf:{paper}"] = len(refs)  # one PDF through two GROBID versions counts once
        if not any(c in f.name for c in consolidated):
            read_ids += sum(bool(r.doi or r.arxiv) for r in refs)
            total += len(refs)
    for f in sorted((external / "openalex").iterdir()):
        bodies = [f.read_bytes()] if f.suffix == ".json" else []
        if f.suffix in (".yaml", ".yml"):
            bodies = [r.body for r in load_cassette(f)]
        for body in bodies:
            try:
                doc = json.loads(body)
            except ValueError:
                continue
            for w in doc.get("results", [doc]) if isinstance(doc, dict) else []:
                if isinstance(w, dict) and w.get("type") in WORK_TYPES and w.get("referenced_works"):
                    counts[f"openalex:{w['id']}"] = len(w["referenced_works"])
    cassette = external / "s2-graph" / "semanticscholar__test_get_paper_references.yaml"
    if cassette.exists():
        counts["s2:ssrn.2250500"] = sum(len(json.loads(r.body).get("data") or []) for r in load_cassette(cassette))
    paper = external / "s2-graph" / "semanticscholar__Paper.json"
    if paper.exists():
        counts["s2:turing-1950"] = len(json.loads(paper.read_text())["references"])
    values = np.array(sorted(counts.values()))
    return {"references_per_paper": {"works": len(values), "median": float(np.median(values)),
                                     "p25": float(np.percentile(values, 25)), "p75": float(np.percentile(values, 75))},
            "ids_grobid": {"references": total, "with_id": read_ids, "share": round(read_ids / total, 3) if total else None},
            "counts": counts}


def main(argv: list[str] | None = None) -> int:
    from revbench.settings import Settings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=Path, help="a SYNTHETIC world folder (default: the demo's, made if absent)")
    ap.add_argument("--data", type=Path, help="a data folder a demo filled (default: the settings' data folder)")
    ap.add_argument("--out", type=Path, help="the JSON report (default: <data>/reports/world_realism.json)")
    ap.add_argument("--real", action="store_true", help="recount the real graph figures from ../shared/external and stop")
    args = ap.parse_args(argv)
    if args.real:
        if not EXTERNAL.is_dir():
            print(f"{EXTERNAL} is not here: the recorded real answers sit beside the project in its workspace")
            return 1
        print(json.dumps(real_figures(), indent=1))
        return 0
    settings = Settings() if args.data is None else Settings(data_dir=args.data)
    world = args.world or demo_world(settings)
    measures = {**world_measures(world), **demo_measures(settings)}
    rows = realism_rows(measures)
    out = args.out or settings.data_dir / "reports" / "world_realism.json"
    write_report(rows, out, world)
    print_realism_rows(rows)
    print(f"report: {out}")
    return 0 if all(r.holds is not False for r in rows) else 2


if __name__ == "__main__":
    sys.exit(main())
