"""The bulk graph benchmark's results (``benchmarks/results/bulk*.json``, written by
:mod:`benchmarks.bulk_bench`) as the docs' ``bulk-graph`` block, rendered by
``docs/gen_numbers.py``: beside the benchmark that writes them, so the docs' generator stays one
page of renderers per results file it has room for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _n(x: float | int) -> str:
    return f"{x:,}"


def _same(t: dict[str, Any]) -> str:
    rows = ("the same rows" if t["only_api"] == t["only_bulk"] == 0 else
            f"{_n(t['only_api'])} rows only over the API, {_n(t['only_bulk'])} only from the files")
    differ = t.get("columns_differing") or {}
    if not differ:
        return f"{rows}, every value the same"
    return f"{rows}; values differing in " + ", ".join(f"`{c}` {_n(n)}" for c, n in differ.items())


def _bulk_row(name: str, r: dict[str, Any]) -> str:
    if "exit_code" in r:
        why = " (killed for memory)" if r["exit_code"] == -9 else ""
        return f"| {name} | stopped after {r['seconds']:.0f}: exit {r['exit_code']}{why} | | | | | | |"
    req = ", ".join(f"{k} {_n(v)}" for k, v in sorted(r.get("requests", {}).items())) or "0"
    cpu = f"{r['cpu_s']:.0f}" if "cpu_s" in r else "-"
    avg = " to ".join(f"{x:.1f}" for x in r["load_average_1m"]) if "load_average_1m" in r else "-"
    stages = ", ".join(f"{k.removeprefix('graph-')} {v:.1f}" for k, v in r.get("stages_s", {}).items()) or "-"
    return (f"| {name} | {r['seconds']:.1f} | {stages} | {cpu} | {r['peak_rss_mb'] / 1024:.1f} GB | "
            f"{_n(r['papers_asked'])} | {req} | {avg} |")


STEP_NAMES = {
    "s2ag_release": "S2AG's release brought up to date", "s2ag_answers": "S2's answers read from it",
    "openalex_files": "OpenAlex's snapshot read", "saving_files_answers": "the files' answers resolved and saved",
    "re_resolution": "older references resolved again", "match_rates": "match rates",
}
"""What each timed step of ``bulk_bench.STEPS`` is, in words."""


def _steps(name: str, r: dict[str, Any]) -> str | None:
    steps = r.get("steps_s")
    if not steps or "exit_code" in r:
        return None
    rest = r["seconds"] - sum(steps.values())
    return (f"Of {name}'s {r['seconds']:.1f} s: " + ", ".join(f"{STEP_NAMES.get(k, k)} {v:.2f}" for k, v in steps.items())
            + f"; the rest ({rest:.1f} s) finding the references to patch, the API pieces past the save they run beside, "
              "reading the papers, coverage and the flow's own steps.")


OUTSIDE_SQL = "outside SQL: resolving in polars, the flow's steps, the API pieces past the save"


def _stands_on(first: dict[str, Any], later: dict[str, Any]) -> list[str]:
    """A table of what each run's SQL stood on (``sql_s``: ``benchmarks.steps.STORES``), the day
    later's share of the first run's beside each, and the day later's longest statements."""
    a, b = first.get("sql_s"), later.get("sql_s")
    if not a or not b or "exit_code" in first or "exit_code" in later:
        return []
    rows = [(k, a.get(k, 0.0), b.get(k, 0.0)) for k in dict.fromkeys([*a, *b])]
    rows.append((OUTSIDE_SQL, first["seconds"] - sum(a.values()), later["seconds"] - sum(b.values())))
    share = (lambda x, y: f"{y / x:.1%}" if x > 0 and y >= 0 else "-")
    # SQL run on several threads at once can add up to more than the wall time: nothing is left outside it to show
    cell = (lambda x: f"{x:.2f}" if x >= 0 else "- (SQL on several threads at once)")
    lines = ["", "What each run's time stood on (SQL summed over the threads that ran it; the last row is the wall time "
             "less that sum):", "", "| | the first bulk run (s) | the day later (s) | the day later's share |",
             "|---|---:|---:|---:|"]
    lines += [f"| {k} | {cell(x)} | {cell(y)} | {share(x, y)} |" for k, x, y in rows]
    stored = b.get("commits", 0.0) + b.get("references table", 0.0)
    lines += ["", f"The day later's commits and statements over the references table alone took {stored:.1f} s, "
              f"{stored / first['seconds']:.1%} of the first run's time."]
    top = later.get("sql_top") or []
    if top:
        lines[-1] += " Its longest statements: " + "; ".join(
            f"{t['seconds']:.2f} s ({t['runs']}x, {t['store']}) `{t['statement']}`" for t in top[:5]) + "."
    return lines + [""]


def _work_share(first: dict[str, Any], later: dict[str, Any]) -> list[str]:
    """A line setting the day later's work in rows beside the first run's (what a run recorded them)."""
    if "references_saved" not in first or "references_saved" not in later:
        return []
    saved, checked, base = later["references_saved"], later["re_checked"], first["references_saved"] + first["re_checked"]
    if not base:
        return []
    return [f"Its work in rows: {_n(saved)} references saved (those of the new papers and of the papers the increments "
            f"changed) and {_n(checked)} older references checked again, {_n(later['re_resolved'])} "
            f"of them resolved otherwise: together {(saved + checked) / base:.1%} of the first run's "
            f"{_n(base)} references saved and checked; its time, {later['seconds'] / first['seconds']:.1%} of the first run's."]


def _idle(first: dict[str, Any], later: dict[str, Any]) -> list[str]:
    """A line on the day later's run again at once (``idle``): what a day later costs with nothing
    new, against the first run, and whether it changed anything."""
    idle = later.get("idle")
    if not idle or "exit_code" in first:
        return []
    names = {"papers_asked": "papers asked", "references_saved": "references saved", "re_checked": "references checked again"}
    did = {name: idle[k] for k, name in names.items() if idle.get(k)}
    what = ("it asked, saved and checked nothing (a re-run is idempotent)" if not did else
            "yet it did work: " + ", ".join(f"{name} {_n(v)}" for name, v in did.items()))
    rest = later["seconds"] - idle["seconds"]
    return [f"The day later's stage run again at once, with nothing new to read, took {idle['seconds']:.1f} s "
            f"({idle['seconds'] / first['seconds']:.1%} of the first run; the process and the page cache warm): "
            f"{what}. What a day later costs whatever the day holds is that much; the day's own work, the other "
            f"{rest:.1f} s ({rest / first['seconds']:.1%})."]


def _bulk_one(d: dict[str, Any]) -> list[str]:
    later = d.get("day_later")
    lines = [f"Measured {d['when'][:10]} ({d['machine']}; `{d['command']}`): a SYNTHETIC world of "
             f"{_n(d['world']['papers'])} papers and {_n(d['world']['references'])} references, {_n(d['corpus_papers'])} "
             f"of them in the corpus."]
    if "files" in d:
        lines[0] += (f" Writing the files took {d['files_written_s']:.0f} s (S2AG {d['files_mb']['s2ag']:.0f} MB, "
                     f"the OpenAlex snapshot {d['files_mb']['openalex']:.0f} MB, gzipped).")
    lines += ["", "| graph stage | seconds | of which, per step (s) | CPU seconds | peak memory | papers asked over HTTP | "
                  "requests | load average |", "|---|---|---|---|---|---|---|---|"]
    lines += [_bulk_row(name, d[k]) for k, name in (("api", "over the APIs"), ("bulk", "from the bulk files"),
                                                   ("day_later", "a day later, bulk")) if k in d]
    lines.append("")
    again = d.get("bulk", {}).get("measured_again")
    runs = len(d.get("bulk", {}).get("seconds_each", []))
    repeat = f" --repeat {runs}" if runs > 1 else ""
    if again:
        on = f" {again[:10]}" if isinstance(again, str) else ""
        api_again = d.get("api", {}).get("measured_again")
        # One invocation's --api measures the API run on the bulk runs' commit; one of another
        # commit came from an earlier invocation, named by its own time, not by this command.
        same = api_again and d.get("api", {}).get("code") == d["bulk"].get("code")
        flag = " --api" if same else ""
        api = (f"the API run measured again before them, once, {api_again[:10]}" if same
               else f"the API run measured again earlier, once, {api_again[:16].replace('T', ' ')} UTC (with --api)"
               if api_again else "the API run as first measured")
        lines.append(f"The bulk run and its day later measured again{on} on commit "
                     f"`{d['bulk'].get('code', '?')}` (`{d['command'].replace('bulk_bench', 'bulk_again')}{repeat}{flag}`), "
                     f"over the same world and files; {api}, on commit `{d.get('api', {}).get('code', '?')}`.")
        each = [(name, d[k]["seconds_each"]) for k, name in (("bulk", "the first bulk run"), ("day_later", "the day later"))
                if "seconds_each" in d.get(k, {})]
        if each:
            lines[-1] += (f" Each phase ran {len(each[0][1])} times, from the same state, and the run of median time is "
                          "the one shown (" + "; ".join(f"{name}: {', '.join(f'{x:.1f}' for x in xs)} s" for name, xs in each)
                          + "): one run's time moves with the shared machine's pace.")
    s2 = d.get("api", {}).get("requests", {}).get("s2")
    if s2:
        lines.append(f"At Semantic Scholar's pace for a key (one request a second) the API path's {_n(s2)} requests "
                     f"to it alone would take {s2 / 3600:.1f} hours.")
    if "bulk_over_api" in d:
        goal = "at most a tenth: met" if d["bulk_over_api"] <= 0.1 else "the goal is at most a tenth: missed"
        cpu = (f"; in CPU time {d['bulk']['cpu_s'] / d['api']['cpu_s']:.1%}, the API path's not counting the replay server's"
               if "cpu_s" in d["bulk"] and "cpu_s" in d["api"] else "")
        lines.append(f"The bulk path took {d['bulk_over_api']:.1%} of the API path's time ({goal}{cpu}).")
    if "day_later_over_bulk" in d:
        goal = "at most 5%: met" if d["day_later_over_bulk"] <= 0.05 else "the goal is at most 5%: missed"
        diff = later["files"]["s2ag"]
        lines.append(f"A day later ({_n(later['new_papers'])} new papers; S2AG's diff: {_n(diff.get('papers_updates', 0))} "
                     f"papers and {_n(diff.get('citations_updates', 0))} citations updated, "
                     f"{_n(diff.get('papers_deletes', 0))} and {_n(diff.get('citations_deletes', 0))} deleted) took "
                     f"{d['day_later_over_bulk']:.1%} of the first bulk run ({goal}).")
        lines += _work_share(d["bulk"], later) + _idle(d["bulk"], later)
    lines += [line for k, name in (("bulk", "the first bulk run"), ("day_later", "the day later"))
              if k in d and (line := _steps(name, d[k]))]
    if "bulk" in d and later:
        lines += _stands_on(d["bulk"], later)
    fresh = (later or {}).get("fresh_run")
    if fresh:
        tables = fresh["s2_tables"]
        cells = [f"{name} {'the same' if t['same'] else 'NOT the same'} ({_n(t['day_later_rows'])} rows"
                 + (f"; {_n(t['only_day_later'])} only a day later, {_n(t['only_fresh'])} only afresh, differing in "
                    + ", ".join(f"`{c}` {_n(n)}" for c, n in t["columns_differing"].items()) if not t["same"] else "") + ")"
                 for name, t in tables.items()]
        lines.append(f"A fresh bulk run over the day-later world (S2AG's newest release read whole; {fresh['seconds']:.1f} s) "
                     "and the day later from the increments, S2's rows joined on their keys (the stamps left out): "
                     + "; ".join(cells) + ". OpenAlex's are not compared: the SYNTHETIC snapshot writes a grown world's "
                     "older works again into their old partitions, which a day later rightly does not read.")
        odd = fresh.get("found_differs") or {}
        if odd.get("papers"):
            lines.append(f"S2 found {_n(odd['papers'])} papers in one run and not in the other; the first release held "
                         f"{_n(odd['held_by_first_release'])} of them under their arXiv id before they joined the corpus "
                         "(an untyped record of another work, linked to the id by mistake): a day later keeps only the "
                         "corpus papers' citations, so it asks the API for a paper the kept release held uncovered, where "
                         "a fresh run takes that record.")
    same = d.get("same_tables")
    if same:
        cells = [f"{name} {_same(t)} ({_n(t['api_rows'])} rows)" for name, t in same.items()
                 if isinstance(t, dict) and "api_rows" in t]
        lines.append("The tables of the two runs joined on their keys (the columns each run stamps left out): "
                     + "; ".join(cells) + ".")
        why = same.get("s2ag_carries_otherwise") or {}
        if why:
            lines.append("Where they may differ on this SYNTHETIC world, and why: " + "; ".join(
                f"`{c}`: {w}" for c, w in why.items()) + "; a difference in any other column would fail the comparison.")
    return lines


def bulk_graph(results: Path) -> str:
    """The graph stage from bulk files against the same stage over the APIs (``bulk_bench``): the
    comparison at each size measured (20k with a day later, 80k, LR-bench's 160k where it ran)."""
    out: list[str] = []
    for name in ("bulk-20k.json", "bulk-80k.json", "bulk.json"):
        if (results / name).exists():
            out += (["", ""] if out else []) + _bulk_one(json.loads((results / name).read_text()))
    if not out:
        return "No `bulk*.json`: run `python -m benchmarks.bulk_bench`.\n"
    return "\n".join(out) + "\n"
