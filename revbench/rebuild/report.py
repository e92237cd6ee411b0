"""A rebuild's report: its comparison (``revbench.rebuild.compare``) written whole as
``rebuild.json``, ``rebuild.md`` and ``rebuild.png``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from revbench.files import write_atomic


def loss_cell(x: float | None, ci: list[Any]) -> str:
    """A loss with its 95% interval where it has one (``-`` for none), as the tables show it."""
    return "-" if x is None else f"{x:.3f} ({ci[0]:.3f}-{ci[1]:.3f})" if ci[0] is not None else f"{x:.3f}"


def _yes(x: bool | None) -> str:
    return "n/a (nothing compared)" if x is None else str(x)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _markdown(r: dict[str, Any]) -> str:
    p, t = r["pool_recall"], r["tuples"]
    b = r["benchmark"]
    lines = [f"# Rebuild of {b['kind']} ({b['source']}, version {b['version']})", "",
             f"Pool recall of the original's rated pairs at tau {p['tau']}: **{p['recalled']}/{p['pairs']}**"
             + (f" ({p['recall']:.1%})" if p["recall"] is not None else ""), "",
             "| similarity stratum | pairs | recalled | recall |", "|---|---|---|---|"]
    lines += [f"| {x['stratum']}{' (below tau)' if x['below_tau'] else ''} | {x['pairs']} | {x['recalled']} | "
              f"{_share(x['recall'])} |" for x in p["by_stratum"]]
    lines += ["", "| original rating | pairs | recalled |", "|---|---|---|"]
    lines += [f"| {x['rating']:g} | {x['pairs']} | {x['recalled']} |" for x in p["by_rating"]]
    lines += ["", "Missed, by reason: " + (", ".join(f"{k} {n}" for k, n in p["missed_by_reason"].items() if n) or "none"), ""]
    if p["missed"]:
        lines += ["| reviewer | paper | rating | similarity | reason | detail |", "|---|---|---|---|---|---|"]
        lines += [f"| {m['reviewer_id']} | {m['paper_id']} | {m['rating']:g} | "
                  f"{'-' if m['similarity'] is None else format(m['similarity'], '.2f')} | {m['reason']} | {m['detail']} |"
                  for m in p["missed"]]
    lines += ["", f"## Tuples ({b['split']} against the release's {b['compared_with']})", "",
              f"Original {t['original']}, rebuilt {t['rebuilt']}. Of the {t['recalled']} original tuples whose two pairs "
              f"the rebuild rated: {t['matched']} with the same label, {t['reversed']} reversed, {t['tied']} tied by the "
              f"survey's 1-5 scale, {t['unpaired']} never paired (a reviewer split over two authors); "
              f"{t['extra']} rebuilt tuples pair ratings the original never paired. "
              f"Labels identical: **{_yes(t['labels_identical'])}**; every rebuilt rating equals the original's level: "
              f"**{_yes(t['ratings_identical'])}** ({t['ratings_compared']} ratings).", "",
              "## Scorers", "", "| scorer | loss on the original (95% CI) | pairs | loss on the rebuild (95% CI) | pairs |",
              "|---|---|---|---|---|"]
    lines += [f"| {s['name']} | {loss_cell(s['original_loss'], s['original_ci'])} | {s['original_n']} | "
              f"{loss_cell(s['rebuilt_loss'], s['rebuilt_ci'])} | {s['rebuilt_n']} |" for s in r["scorers"]]
    tau = r["kendall_tau"]
    lines += ["", f"Kendall tau between the scorers' orderings: **{'-' if tau is None else f'{tau:.2f}'}** "
              "(the two columns rest on different numbers of pairs: see the pairs columns).", ""]
    if "defaults" in r:
        lines += _defaults_markdown(r)
    return "\n".join(lines)


def _defaults_markdown(r: dict[str, Any]) -> list[str]:
    """The pools section: which settings the comparison uses and why, the product's settings
    beside them, and the pooling bias the difference measures."""
    pools, d, bias = r["pools"], r["defaults"], r["pooling_bias"]
    f, p = pools["fitted"], pools["defaults"]
    dp, dt = d["pool_recall"], d["tuples"]
    lines = ["## Our pipeline or our settings", "", f"The comparison above uses the **{pools['used']}** pools: {pools['why']}.",
             "", "| setting | product (as configured) | fitted to the original | fitted how |", "|---|---|---|---|"]
    lines += [f"| {k} | {p[k]} | {f[k]} | {pools['fit'][k]} |" for k in ("tau", "candidates_per_query",
                                                                       "max_queries_per_candidate", "min_recent_papers")]
    lines += ["", f"With the product's settings the pools recall **{dp['recalled']}/{dp['pairs']}**"
              + (f" ({dp['recall']:.1%})" if dp["recall"] is not None else "") + " of the original's rated pairs; missed: "
              + (", ".join(f"{k} {n}" for k, n in dp["missed_by_reason"].items() if n) or "none") + ".",
              "", f"Tuples with the product's settings: {dt['rebuilt']} rebuilt; of the {dt['recalled']} original tuples "
              f"whose pairs were both rated, {dt['matched']} with the same label, {dt['reversed']} reversed, {dt['tied']} tied.",
              "", "### Pooling bias", "", "Recall of the original's rated pairs by its rating and by the similarity of the "
              "reviewer's closest paper, with each configuration:", "",
              "| original rating | pairs | fitted | product |", "|---|---|---|---|"]
    fr, pr = bias["recall_by_rating"]["fitted"], bias["recall_by_rating"]["defaults"]
    lines += [f"| {k} | {fr[k]['pairs']} | {_share(fr[k]['recall'])} | {_share(pr.get(k, {}).get('recall'))} |" for k in fr]
    lines += ["", "| similarity stratum | pairs | fitted | product |", "|---|---|---|---|"]
    fs, ps = bias["recall_by_stratum"]["fitted"], bias["recall_by_stratum"]["defaults"]
    lines += [f"| {k} | {fs[k]['pairs']} | {_share(fs[k]['recall'])} | {_share(ps.get(k, {}).get('recall'))} |" for k in fs]
    lines += ["", "Each scorer's loss on the rebuilt tuples each configuration keeps (the product's: the tuples whose two "
              "pairs its pools invited; fewer pairs, so compare with the pairs columns):", "",
              "| scorer | loss, fitted pools (95% CI) | pairs | loss, product's pools (95% CI) | pairs |", "|---|---|---|---|---|"]
    dd = {x["name"]: x for x in d["scorers"]}
    lines += [f"| {x['name']} | {loss_cell(x['rebuilt_loss'], x['rebuilt_ci'])} | {x['rebuilt_n']} | "
              f"{loss_cell(dd[x['name']]['rebuilt_loss'], dd[x['name']]['rebuilt_ci'])} | {dd[x['name']]['rebuilt_n']} |"
              for x in r["scorers"]]
    tau = d["kendall_tau"]
    lines += ["", f"Kendall tau between the original's ordering and the product's pools' ordering: "
              f"**{'-' if tau is None else f'{tau:.2f}'}**.", ""]
    return lines


def _figure(r: dict[str, Any], path: Path) -> None:
    # Loaded here, as the evaluation's report does: the backend is chosen before pyplot loads, and
    # the comparison (and its markdown) is read without matplotlib.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    strata = r["pool_recall"]["by_stratum"]
    names = [x["stratum"] for x in strata]
    a.bar(names, [x["pairs"] for x in strata], color=["#f4c7c3" if x["below_tau"] else "#d0d7de" for x in strata],
          label="rated pairs (red: below tau)")
    a.bar(names, [x["recalled"] for x in strata], color="#2f81f7", label="invited")
    a.set_xlabel("similarity of the reviewer's closest paper to the query")
    a.set_ylabel("original rated pairs")
    a.set_title(f"Pool recall {r['pool_recall']['recalled']}/{r['pool_recall']['pairs']} (tau {r['pool_recall']['tau']})")
    a.tick_params(axis="x", rotation=30)
    a.legend()
    sc = [s for s in r["scorers"] if s["original_loss"] is not None and s["rebuilt_loss"] is not None]
    for s in sc:
        xo, yo = s["original_loss"], s["rebuilt_loss"]
        xe = [[xo - s["original_ci"][0]], [s["original_ci"][1] - xo]] if s["original_ci"][0] is not None else None
        ye = [[yo - s["rebuilt_ci"][0]], [s["rebuilt_ci"][1] - yo]] if s["rebuilt_ci"][0] is not None else None
        b.errorbar([xo], [yo], xerr=xe, yerr=ye, fmt="o", capsize=3, label=s["name"])
    lo = min([0.0, *[min(s["original_loss"], s["rebuilt_loss"]) for s in sc]])
    b.plot([lo, 0.75], [lo, 0.75], ls="--", color="grey", lw=1)
    b.set_xlabel("loss on the original")
    b.set_ylabel("loss on the rebuild")
    tau = r["kendall_tau"]
    b.set_title(f"Scorers (Kendall tau {'-' if tau is None else f'{tau:.2f}'})")
    if sc:
        b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(result: dict[str, Any], out: Path) -> list[Path]:
    """``rebuild.json``, ``rebuild.md`` and ``rebuild.png`` in ``out``, each written whole."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "rebuild.json", out / "rebuild.md", out / "rebuild.png"]
    write_atomic(paths[0], json.dumps(result, indent=1, default=str) + "\n")
    write_atomic(paths[1], _markdown(result))
    _figure(result, out / "rebuild.png.tmp.png")
    (out / "rebuild.png.tmp.png").replace(paths[2])
    return paths
