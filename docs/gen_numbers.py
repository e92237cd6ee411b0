"""Numbers in the pages, rendered from the benchmarks' results files, never typed.

A page marks a generated block with ``<!-- numbers:NAME -->`` and ``<!-- /numbers -->`` (HTML
comments: neither GitHub nor mkdocs shows them); everything between is the output of
``RENDERERS[NAME]`` on ``benchmarks/results/``. After a benchmark run:

    .venv/bin/python docs/gen_numbers.py           # rewrite every block from the results files
    .venv/bin/python docs/gen_numbers.py --check   # exit 1 naming each block that differs

``tests/app/test_docs_numbers.py`` runs the check, so a hand-edited number, or a results file
updated without its pages, fails the suite.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python docs/gen_numbers.py`: the benchmarks' own renderers
    sys.path.insert(0, str(ROOT))
from benchmarks.bulk_report import bulk_graph  # noqa: E402
RESULTS = ROOT / "benchmarks" / "results"
PAGES = ("README.md", "docs/getting-started.md", "docs/benchmarks.md", "docs/rebuild.md")
BLOCK = re.compile(r"(<!-- numbers:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /numbers -->)", re.S)
SCORER_WORDS = {"embedding:pooling=mean": "embedding", "bm25:pooling=mean": "bm25"}


def load(results: Path, name: str) -> dict[str, Any]:
    path = results / name
    if not path.exists():
        raise FileNotFoundError(f"{path}: no results file (run its benchmark: benchmarks/README.md)")
    return json.loads(path.read_text())


def _n(x: float | int) -> str:
    return f"{x:,}"


def _pct(x: float, places: int = 0) -> str:
    return f"{100 * x:.{places}f}%"


def _losses(facts: dict[str, Any], scorers: tuple[str, ...]) -> str:
    got = [(SCORER_WORDS.get(s, s), facts["losses"][s]) for s in scorers if s in facts["losses"]]
    return ", ".join(f"{w} {v:.3f}" for w, v in sorted(got, key=lambda x: x[1]))


TEXT = ("embedding:pooling=mean", "tpms", "bm25:pooling=mean", "trivial")
GRAPH = ("cof", "topic", "citation")


def demo_readme(results: Path) -> str:
    """The README's paragraph on what the demo does, with its numbers."""
    d = load(results, "demo.json")
    f, w, p, s, r = d["facts"], d["facts"]["world"], d["facts"]["pools"], d["facts"]["survey"], d["facts"]["ratings"]["counts"]
    return (
        f"The demo generates a seeded SYNTHETIC world ({_n(w['papers'])} papers in cs.AI, cs.CL, cs.CV, cs.IR and "
        f"cs.LG, {_n(w['persons'])} people, homonyms, institution aliases, missing emails and {w['bad_records']} "
        "deliberately bad records, calibrated to the real benchmarks: [How real the world is]"
        "(docs/benchmarks.md#how-real-the-world-is)) behind one local replay server that answers as arXiv, Semantic "
        "Scholar, OpenAlex, arxiv.org PDFs, GROBID and an OpenAI-compatible LLM would, with 5% of requests failing "
        "transiently. Through the real clients it ingests the world and its citation graph, disambiguates its "
        f"authors, builds round 1 of the candidate pools ({p['queries']} queries, {p['invitations']} invitations; "
        f"a COI audit against the hidden truth: {p['coi_audit']}), sends {s['sent']} survey invitations through a "
        "local SMTP server to a SYNTHETIC panel that answers over HTTP (link scanners in front of some mailboxes "
        f"record nothing), turns {_n(r['events'])} survey events into {_n(r['kept'])} kept ratings and "
        f"{_n(r['paper_centric_tuples'])} paper-centric and {_n(r['reviewer_centric_tuples'])} reviewer-centric "
        f"tuples, evaluates {len(f['losses'])} scorers on that benchmark (average loss "
        f"{_losses(f, TEXT)}; the graph's {_losses(f, GRAPH)}), and exports, publishes and evaluates release "
        f"`v1`. On {d['machine'].split(',')[0]} a first `make demo` took {d['first']['seconds']:.0f} s (after "
        f"`.venv` is built, about 4 minutes once); a second, a cheap refresh that fetches and embeds nothing and "
        f"emails nobody twice, {d['second']['seconds']:.0f} s. What it prints, step by step: "
        "[Getting started](docs/getting-started.md).\n")


def demo_story(results: Path) -> str:
    """Getting started's account of the demo's survey, ratings and evaluation, with their numbers."""
    d = load(results, "demo.json")
    f = d["facts"]
    p, s, r, q = f["pools"], f["survey"], f["ratings"]["counts"], f["ratings"]["flags"]
    caught = [x for x in p["planted"] if x["caught"]]
    planted = (f"; its planted conflicts ({len(p['planted'])}) are caught, as "
               + ", ".join(sorted({", ".join(x["reasons"]) for x in caught})) if caught else "")
    lab = f["labels"]
    agree = (f"Kendall tau {lab['kendall_tau']:.2f}, AUC {lab['auc']:.2f}" if lab.get("auc") is not None
             else "too few to measure")
    return (
        f"Round 1 of the candidate pools has {p['queries']} queries and {p['invitations']} invitations to "
        f"{p['candidates']} candidates (by recall path: "
        + ", ".join(f"{k} {v}" for k, v in sorted(p["invitations_by_path"].items()))
        + f"); the COI audit against the truth finds {p['coi_audit']}{planted}. "
        f"The survey sends {s['sent']} invitations; the SYNTHETIC panel reads {s['emails']} emails, answers "
        f"{s['answered']} ({s['ratings']} ratings, {s['skips']} skipped papers, {s['changes']} changed ratings), "
        f"stays silent on {s['silent']} and opts out of {s['opt_outs']}; the link scanners make "
        f"{_n(s['scanner_requests'])} requests on {s['scanned_mailboxes']} mailboxes and record "
        f"{s['scanner_recorded']}. The ratings flow turns {r['events']} survey events into {r['ratings']} ratings "
        f"({r['duplicates']} duplicate answers superseded, {r['skips']} skips); the quality rules flag "
        f"{q['flagged']} respondents (the demo's curator policy drops them), judged against the panel's "
        f"{q['planted']} planted low-effort respondents: precision {q['precision']:.2f}, recall {q['recall']:.2f}. "
        f"The {r['kept']} kept ratings become {r['paper_centric_tuples']} paper-centric and "
        f"{r['reviewer_centric_tuples']} reviewer-centric tuples, and {len(f['losses'])} scorers are evaluated "
        f"on them: average loss {_losses(f, TEXT)} (text), {_losses(f, GRAPH)} (the graph's), over the "
        f"pointwise and paper-centric splits, each on the {_pct(f['coverage'], 1)} of pairs every scorer covers "
        "or more. The citation weak labels (exHarmony-style, the demo's 3 experts a paper) hold "
        f"{lab['positives']} weak positives on {lab['pairs']} surveyed pairs: {agree}. The realism table at the "
        f"end: {f['realism']['hold']} of {f['realism']['targets']} targets hold.\n")


def demo_timing(results: Path) -> str:
    """Getting started's line on how long the demo takes."""
    d = load(results, "demo.json")
    first, second = d["first"], d["second"]
    widest = (f", the widest {first['widest_text']} characters outside paths and URLs" if "widest_text" in first
              else f", the widest {first['widest']} characters")
    full = f"; its full output, {_n(first['full_lines'])} lines, went to `data/reports/demo.txt`" if first.get("full_lines") else ""
    return (f"Measured by `python -m benchmarks.demo_bench` ({d['when'][:10]}, {d['machine']}; "
            f"`benchmarks/results/demo.json`): a first `make demo` in a fresh folder took "
            f"{first['seconds']:.0f} s and printed {_n(first['lines'])} lines at 80 columns{widest}{full}; the "
            f"second {second['seconds']:.0f} s ({_n(second['lines'])} lines, "
            f"{second['invitations_sent']} invitations sent). Building `.venv` the first time takes about "
            "4 minutes more.\n")


def world_realism(results: Path) -> str:
    """The realism table: each target, its real figure and tolerance, the world's value."""
    from revbench.synth.realism import fmt

    d = load(results, "world_realism.json")
    before = d.get("format7_before") or {}
    # a target added with a later format: its value on the format before it, marked with that format
    later = {k: f"{fmt(v)} (format 8)" for k, v in (d.get("format8_before") or {}).items()}
    head = "| target | real | tolerance | world | holds |" + (" before (format 7) |" if before else "")
    lines = [f"Measured {d['measured']} ({d['machine']}): {d['command']}.", "", head,
             "|---" * (5 + bool(before)) + "|"]
    for r in d["rows"]:
        real = r["target"] if isinstance(r["target"], str) else fmt(r["target"])
        cells = [r["what"], real, r["tolerance"], fmt(r["world"]), {True: "yes", False: "**no**", None: "-"}[r["holds"]]]
        if before:
            cells.append(fmt(before[r["id"]]) if r["id"] in before else later.get(r["id"], "-"))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _interval(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    mark = "**" if d["hi"] < 0 or d["lo"] > 0 else ""
    return f"{mark}{d['value']:+.3f}{mark} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


GRAPH_ROWS = ("tpms", "bm25:pooling=mean", "embedding:pooling=topk_mean:3", "citation", "coupling", "cocitation", "topic", "cof", "cof[-citation]",
              "cof:pooling=mean", "cof:pooling=mean[-citation]", "cof:fusion=weights,pooling=mean",
              "truth-cites-corpus", "truth-cites", "truth-affinity")


def graph_worth(results: Path) -> str:
    """The scorers against ``embedding`` on the calibrated world, pooled over seeds."""
    d = load(results, "graph_worth.json")
    at = d["pooled"].get("1")
    if not at:
        return "No point at the calibrated link (1) in graph_worth.json.\n"
    seeds = ", ".join(str(s) for s in at["seeds"])
    lines = [f"Seeds {seeds} ({d['when'][:10]}, {d['machine']}; `{d['command']}`). Each cell: the loss "
             f"minus `{d['baseline']}`'s on the pairs both cover, pooled over the seeds (inverse-variance "
             "weights of each seed's paired bootstrap difference), with its 95% interval; bold where the "
             "interval excludes 0 (negative: better than embedding). Then in how many seeds the scorer was "
             "significantly better / worse.", "",
             "| scorer | pointwise (= reviewer-centric) | seeds better / worse | paper-centric | seeds better / worse |",
             "|---|---|---|---|---|"]
    for name in GRAPH_ROWS:
        pw, pc = at["splits"].get("pointwise", {}).get(name), at["splits"].get("paper_centric", {}).get(name)
        if not pw and not pc:
            continue
        lines.append(f"| `{name}` | {_interval(pw)} | {pw['seeds_better'] if pw else '-'} / {pw['seeds_worse'] if pw else '-'} "
                     f"| {_interval(pc)} | {pc['seeds_better'] if pc else '-'} / {pc['seeds_worse'] if pc else '-'} |")
    return "\n".join(lines) + "\n"


def graph_worth_points(results: Path) -> str:
    """Per seed and link: the recall paths, the flags and the weak labels, and the truth's citations."""
    d = load(results, "graph_worth.json")
    lines = ["| link | seed | cites by true level 1-5 (%) | coupling tau | invitees' mean rating: semantic / both / "
             "citation (rated) | citation - semantic [95%] | flags: precision / recall | weak labels: positives, AUC |",
             "|---|---|---|---|---|---|---|---|"]
    for p in sorted(d["points"], key=lambda x: (x["link"], x["seed"])):
        t, rc, fl, wk = p["truth"], p["recall"], p.get("flags") or {}, p["weak"]
        paths = " / ".join(f"{rc['paths'][k]['mean']:.2f} ({rc['paths'][k]['rated']})" if rc["paths"][k]["mean"] is not None
                           else "- (0)" for k in ("semantic", "both", "citation"))
        cms = rc.get("citation_minus_semantic")
        diff = f"{cms['value']:+.2f} [{cms['lo']:+.2f}, {cms['hi']:+.2f}]" if cms else "-"
        flags = f"{fl['precision']:.2f} / {fl['recall']:.2f}" if fl else "-"
        weak = f"{wk['positives']}, {wk['auc']:.2f}" if wk.get("auc") is not None else f"{wk['positives']}, -"
        lines.append(f"| {p['link']:g} | {p['seed']} | {'/'.join(f'{100 * x:.0f}' for x in t['cites_by_level'])} | "
                     f"{t['coupling_tau']:.2f} | {paths} | {diff} | {flags} | {weak} |")
    return "\n".join(lines) + "\n"


def graph_worth_links(results: Path) -> str:
    """``cof`` and its citation factor against embedding at each link strength (pooled over seeds)."""
    d = load(results, "graph_worth.json")
    lines = ["| link | seeds | coupling tau (truth) | `citation` | `cof:pooling=mean` | `cof:fusion=weights,pooling=mean` |",
             "|---|---|---|---|---|---|"]
    for link, at in sorted(d["pooled"].items(), key=lambda x: float(x[0])):
        taus = [p["truth"]["coupling_tau"] for p in d["points"] if f"{p['link']:g}" == link]
        pw = at["splits"].get("pointwise", {})
        lines.append(f"| {link} | {len(at['seeds'])} | {sum(taus) / len(taus):.2f} | {_interval(pw.get('citation'))} | "
                     f"{_interval(pw.get('cof:pooling=mean'))} | {_interval(pw.get('cof:fusion=weights,pooling=mean'))} |")
    return "\n".join(lines) + "\n"


def _mean_cell(a: dict[str, Any], metric: str, pct: bool = False) -> str:
    v = a.get(metric)
    return "-" if v is None else (f"{100 * v:.0f}%" if pct else f"{v:.2f}")


def _rating_diff(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    mark = "**" if d["hi"] < 0 or d["lo"] > 0 else ""
    return f"{mark}{d['value']:+.2f}{mark} [{d['lo']:+.2f}, {d['hi']:+.2f}]"


def judged_assignment(results: Path) -> str:
    """Each scorer's assignment over the rated candidates and over the pool, pooled over seeds."""
    d = load(results, "judged.json")
    s = d["summary"]["assignment"]
    lines = [f"Seeds {', '.join(map(str, d['seeds']))} ({d['generated'][:10]}; `python -m benchmarks.judged_bench`), the "
             "settings' defaults: 3 reviewers per paper, at most 6 papers per reviewer, objective `sum` (`embedding` "
             "pools by max, its default). Each number is "
             "the mean over seeds; a difference is the scorer's minus "
             f"`{d['baseline']}`'s, pooled over seeds (inverse-variance weights of each seed's paired bootstrap over "
             "papers), bold where its 95% interval excludes 0.", "",
             "| scorer | rated candidates: mean rating assigned | difference | papers with an expert (≥4) | pool: mean rating "
             "(known pairs) | difference | pairs with a rating |", "|---|---|---|---|---|---|---|"]
    for scorer in d["scorers"]:
        c, p = s.get("candidates", {}).get(scorer, {}), s.get("pool", {}).get(scorer, {})
        lines.append(f"| `{scorer}` | {_mean_cell(c, 'assigned_rating')} | {_rating_diff(c.get('diff_rating'))} | "
                     f"{_mean_cell(c, 'papers_with_expert', True)} | {_mean_cell(p, 'assigned_rating')} | "
                     f"{_rating_diff(p.get('diff_rating'))} | {_mean_cell(p, 'known_share', True)} |")
    return "\n".join(lines) + "\n"


def judged_attack(results: Path) -> str:
    """The collusion attack's success by the paper's starting rank and kept papers, pairs pooled over seeds."""
    d = load(results, "judged.json")
    att = d["summary"]["attack"]
    ranks = sorted({int(r) for scorers in att.values() for cells in scorers.values() for r in cells})
    starts: dict[int, set[int]] = {}
    pairs = 0
    for scorers in att.values():
        for cells in scorers.values():
            for r, c in cells.items():
                starts.setdefault(int(r), set()).update(c["starts"])
                pairs = max(pairs, c["pairs"])

    def here(r: int) -> str:
        lo, hi = min(starts[r]), max(starts[r])
        return f"{lo}" if lo == hi else f"{lo}-{hi}"

    lines = [f"Share of attacked pairs whose reviewer reaches the assignment's top 3, with the median rank after "
             f"(every seed's pairs together, {pairs} per cell). Columns: the paper's starting rank among 7,900 reviewers, "
             "and the rank it scales to in each seed's pool of about 95.", "",
             "| scorer | papers kept | " + " | ".join(f"from {r} (here {here(r)})" for r in ranks) + " |",
             "|---|---|" + "---|" * len(ranks)]
    for mp in sorted(att, key=int):
        for scorer in d["scorers"]:
            cells = att[mp].get(scorer)
            if not cells:
                continue
            row = [f"{100 * cells[str(r)]['success_at_k']:.0f}% (→{cells[str(r)]['median_rank_after']:g})"
                   if str(r) in cells else "-" for r in ranks]
            lines.append(f"| `{scorer}` | {mp} | " + " | ".join(row) + " |")
    for scorer, why in sorted(d["summary"].get("immune", {}).items()):
        lines.append(f"| `{scorer}` | - | immune: {why} |" + " |" * (len(ranks) - 1))
    return "\n".join(lines) + "\n"


def judged_cost(results: Path) -> str:
    """What the two judgements cost against the plain evaluation, measured in the same runs."""
    d = load(results, "judged.json")
    c = d["summary"]["cost"]
    lines = [f"On the calibrated demo's warehouse ({len(d['scorers'])} scorers, {d['cpus']} CPUs): the plain evaluation "
             f"{c['plain_seconds']:.1f} s, with `--assignment --attack` {c['judged_seconds']:.1f} s: "
             f"{c['ratio']:.2f}x (at most {c['ratio_max']:.2f}x over the seeds; the goal is at most 3x)."]
    for kind, r in sorted(d.get("references", {}).items()):
        forced = " (every paper's candidates fit its 3 places: the assignment is forced, the same for every scorer)" \
            if r.get("forced") else ""
        lines.append(f"On the {kind} sample, `--assignment`: {r['plain_seconds']:.1f} s plain, "
                     f"{r['judged_seconds']:.1f} s judged, {r['ratio']:.2f}x{forced}.")
    return "\n".join(lines) + "\n"


def cli_cold(results: Path) -> str:
    """The one-off commands' cold times (``cli_bench``): the table, the LR command against the bare
    baseline, and against RATE's own script, its goal (no slower) met or missed; the gold standard's
    evaluation against the gold standard's own script, its goal (at least 30x faster) met or missed,
    and whether their values agree."""
    d = load(results, "cli.json")
    c, gold, g = d["cold_evaluate_rate"], d["gold_tpms_bootstrap_in_process"], d.get("cold_evaluate_gold")
    base, script, rate = c["baseline"], c.get("console_script"), c.get("rate_script")
    met = {True: "met", False: "missed", None: "not judged: RATE's script not timed"}[c["goal_met"]]
    gold_rows = []
    if g:
        gold_rows = [f"| `{g['command'].removeprefix('python -m revbench ')}` (real gold standard, see below) | "
                     f"**{g['median_s']:.2f} s** (goal: at least {g['goal_ratio']:.0f}x faster than its script: "
                     f"{'met' if g['goal_met'] else 'missed'}) | |",
                     f"| the gold standard's `evaluation_script.py`, same files | {g['reference_script']['median_s']:.2f} s | |"]
    lines = ["| command | in-process | `--track` (temporary server) |", "|---|---|---|",
             f"| `{c['command'].removeprefix('python -m revbench ')}` | **{c['median_s']:.3f} s** "
             f"(goal: no slower than RATE's script: {met}) | {d['lr_tracked']['median_s']:.1f} s |",
             f"| `evaluate -b goldstandard=<58 reviewers, 10 draws> -s tpms --bootstrap 1000` | "
             f"**{gold['median_s']:.2f} s** (target 3.0) | {d['gold_tpms_bootstrap_tracked']['median_s']:.1f} s |",
             f"| baseline: bare Python, same LR files | {base['median_s']:.3f} s | |",
             *([f"| RATE's `evaluation_script.py --pred_paths`, same files | {rate['median_s']:.3f} s | |"] if rate else []),
             *gold_rows,
             "",
             f"The in-process LR command is {c['ratio_vs_baseline']}x the bare baseline ({c['median_s']:.3f} s against "
             f"{base['median_s']:.3f} s, median of {d['repeat']}, load average {c['load_average_1m']} as the timing ended; "
             f"CPU time {c['cpu_median_s']:.3f} s against {base['cpu_median_s']:.3f} s"
             + (f"; the console script `revbench`: {script['median_s']:.3f} s" if script else "")
             + f"); a bare `python -c pass` took {d['python_startup']['median_s']:.3f} s."]
    if rate:
        verdict = "no slower than it, as the goal asks" if c["goal_met"] else "slower than it: the goal is missed"
        lines += ["", f"Against RATE's own `evaluation_script.py` on the same two files, timed in the same turns "
                  f"(`--rate-script`): {c['median_s']:.3f} s against {rate['median_s']:.3f} s ({c['ratio_vs_rate_script']}x), "
                  f"{verdict} (CPU time {c['cpu_median_s']:.3f} s against {rate['cpu_median_s']:.3f} s)."]
    else:
        lines += ["", "RATE's own `evaluation_script.py` was not timed in this run (`--rate-script PATH` times it)."]
    if g:
        v = g["values"]
        ref, ours, printed = v["reference_functions"], v["ours"], v["reference_printed"]
        verdict = (f"at least {g['goal_ratio']:.0f}x faster, as the goal asks" if g["goal_met"]
                   else f"short of the {g['goal_ratio']:.0f}x the goal asks: the goal is missed")
        same = ("the same values" if g["values_agree"] else
                "values that DISAGREE (see `values` in `cli.json`)")
        lines += ["", "Against the gold standard's own `evaluation_script.py` "
                  "(github.com/niharshah/goldstandard-reviewer-paper-match, kept outside this repository; "
                  f"`--gold-script PATH`), on the real gold standard (`goldstandard-full`: {g['participants']} participants, "
                  f"{g['ratings']} ratings, {ours['pairs']:,} rated pairs of papers), its one shared draw d_20_1 standing in "
                  f"for each of the {g['draws']} draws the script requires, and revbench's TPMS on d_20_1 (computed once, "
                  f"untimed) written as each of the {g['draws']} files `tpms_d_20_<x>_ta.json` it reads: both compute the "
                  "loss of each file and 1,000 reviewer resamples for a 95% interval, which the script always does "
                  "(revbench also computes accuracy and easy and hard "
                  "accuracy with their intervals and writes its report, storing nothing: a look at prediction files "
                  "alone, taken by its lean lane), timed in the same turns: "
                  f"{g['median_s']:.2f} s against {g['reference_script']['median_s']:.2f} s, the script taking "
                  f"{g['ratio_reference_vs_ours']}x revbench's time, {verdict} (CPU time {g['cpu_median_s']:.2f} s against "
                  f"{g['reference_script']['cpu_median_s']:.2f} s, {g['cpu_ratio_reference_vs_ours']}x; median of {d['repeat']}, "
                  f"load average {g['load_average_1m']} as the timing ended; revbench at `--bootstrap 0`, which the script "
                  f"cannot skip: {g['bootstrap_0']['median_s']:.2f} s).",
                  "", f"The two give {same}: loss {ours['loss']:.6f} (the script's own functions: {ref['loss']:.6f}; it prints "
                  f"{printed['loss']:.2f} [{printed['ci95'][0]:.2f}; {printed['ci95'][1]:.2f}], revbench "
                  f"{ours['loss']:.3f} [{ours['ci95'][0]:.2f}, {ours['ci95'][1]:.2f}], the intervals from different random "
                  f"resamples), easy accuracy {ours['easy_pairs']} (script {ref['easy_pairs']}), hard accuracy "
                  f"{ours['hard_pairs']} (script {ref['hard_pairs']})."]
    else:
        lines += ["", "The gold standard's own `evaluation_script.py` was not timed in this run (`--gold-script PATH` times it)."]
    return "\n".join(lines) + "\n"


def rebuild_product_pools(results: Path) -> str:
    """What the product's pools recall of the LR-bench sample's rated pairs at each tau tried."""
    d = load(results, "rebuild.json").get("product_pools")
    if not d:
        return "No `product_pools` in rebuild.json: run `python -m benchmarks.rebuild_bench --pool-taus 0.6,0.5,0.4`.\n"
    runs = sorted(d["by_tau"].items(), key=lambda x: -float(x[0]))
    first = runs[0][1]
    strata = sorted(first["by_stratum_fitted"])
    lines = [f"Measured {d['when'][:10]} ({d['machine']}; `python -m benchmarks.rebuild_bench --pool-taus "
             f"{','.join(t for t, _ in runs)}`), the other settings the product's (candidates_per_query "
             f"{first['settings']['candidates_per_query']}, max_queries_per_candidate "
             f"{first['settings']['max_queries_per_candidate']}, min_recent_papers {first['settings']['min_recent_papers']}); "
             f"the fitted pools: tau {first['fitted']['tau']}, {first['fitted']['candidates_per_query']} a query, "
             f"{first['fitted']['max_queries_per_candidate']} a candidate, {first['fitted']['min_recent_papers']} recent papers.",
             "", "| tau | recalled | missed | " + " | ".join(f"cosine {k}" for k in strata) + " |",
             "|---" * (3 + len(strata)) + "|"]
    pairs = {k: v["pairs"] for k, v in first["by_stratum_fitted"].items()}
    lines.append("| (rated pairs) | | | " + " | ".join(str(pairs[k]) for k in strata) + " |")
    for tau, r in runs:
        rc = r["recall"]
        missed = ", ".join(f"{k} {v}" for k, v in sorted(rc["missed_by_reason"].items())) or "-"
        cells = [f"{r['by_stratum'].get(k, {}).get('recalled', 0)}" for k in strata]
        lines.append(f"| {tau} | {rc['recalled']}/{rc['pairs']} ({_pct(rc['recall'])}) | {missed} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


RENDERERS: dict[str, Callable[[Path], str]] = {
    "rebuild-product-pools": rebuild_product_pools, "bulk-graph": bulk_graph,
    "judged-assignment": judged_assignment, "judged-attack": judged_attack, "judged-cost": judged_cost, "cli-cold": cli_cold,
    "demo-readme": demo_readme, "demo-story": demo_story, "demo-timing": demo_timing, "world-realism": world_realism,
    "graph-worth": graph_worth, "graph-worth-points": graph_worth_points, "graph-worth-links": graph_worth_links,
}


def refresh(text: str, results: Path = RESULTS, where: str = "") -> str:
    """``text`` with every block rendered anew; an unknown block name is an error naming it."""
    def one(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in RENDERERS:
            raise KeyError(f"{where}: unknown numbers block {name!r}; known: {', '.join(RENDERERS)}")
        return m.group(1) + RENDERERS[name](results) + m.group(4)

    return BLOCK.sub(one, text)


def stale(root: Path = ROOT, results: Path = RESULTS) -> list[str]:
    """``page: block`` for every block whose text is not what its results file renders."""
    out = []
    for page in PAGES:
        text = (root / page).read_text()
        for m in BLOCK.finditer(text):
            if m.group(1) + RENDERERS[m["name"]](results) + m.group(4) != m.group(0):
                out.append(f"{page}: {m['name']}")
    return out


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    if "--check" in argv:
        found = stale()
        for line in found:
            print(f"stale numbers block (run: python docs/gen_numbers.py): {line}")
        return 1 if found else 0
    for page in PAGES:
        path = ROOT / page
        text = path.read_text()
        new = refresh(text, RESULTS, page)
        if new != text:
            path.write_text(new)
            print(f"rewrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
