"""Institution diversity@k of a ranked reviewer list (exHarmony's diversity, by institution).

For a paper q, let T_k(q) be the scorer's top min(k, n_q) scored candidates of q (n_q: how many
of q's rated candidates it scored; tied scores broken by reviewer id) and K_k(q) those of them
with a known institution::

    InstitutionDiversity@k(q) = |{ inst(r, year(q)) : r in K_k(q) }| / |K_k(q)|

and the metric is the mean over the papers where K_k(q) is not empty (their count is ``n``).

- A list shorter than k is divided by its own length, not by k: the value measures how varied
  the recommended reviewers are, not how many there were (the ranking metrics tell that).
- A reviewer without a known institution counts in neither the numerator nor the denominator:
  missing data is neither a shared nor a distinct institution, and counting it as either would
  reward or punish a scorer for recommending people the graph knows less about. A paper whose
  top k holds no known institution has no value (never 0).
- ``inst(r, y)`` is the institution current at the paper's year: among the reviewer's spells
  (``institution_key, first_year, last_year``; a null bound is open) that began by ``y``, the
  one that lasted latest (then the one begun latest, then the smallest key), so a reviewer
  whose last known spell ended before ``y`` keeps it. Spells that began after ``y`` are never
  used; a paper without a year uses all of them. One institution per reviewer, so a reviewer
  with two affiliations at once neither counts twice nor doubles a list's diversity.
"""

from __future__ import annotations

import math

import polars as pl

NAME = "InstitutionDiversity"


def institution_at(spells: list[tuple[str, int | None, int | None]], year: int | None) -> str | None:
    """The institution of ``spells`` (``key, first_year, last_year``) current at ``year`` (see
    the module), or None when no spell began by then."""
    began = [s for s in spells if year is None or s[1] is None or s[1] <= year]
    if not began:
        return None
    key, _, _ = min(began, key=lambda s: (-(s[2] if s[2] is not None else math.inf),
                                          -(s[1] if s[1] is not None else -math.inf), s[0]))
    return key


def institution_diversity(ranked: dict[str, list[str]], years: dict[str, int | None],
                          institutions: pl.DataFrame, cutoffs: tuple[int, ...]) -> dict[str, tuple[float | None, int]]:
    """``{InstitutionDiversity@k: (mean over papers, n papers)}`` for each paper's ranked
    candidates ``ranked`` (best first), the papers' ``years`` and the reviewers' institution
    spells ``institutions`` (``reviewer_id, institution_key, first_year, last_year``)."""
    wanted = {r for lst in ranked.values() for r in lst}
    spells: dict[str, list[tuple[str, int | None, int | None]]] = {}
    rows = institutions.filter(pl.col("reviewer_id").is_in(list(wanted)) & pl.col("institution_key").is_not_null())
    for r, key, first, last in rows.select("reviewer_id", "institution_key", "first_year", "last_year").iter_rows():
        spells.setdefault(r, []).append((key, first, last))
    out: dict[str, tuple[float | None, int]] = {}
    for k in cutoffs:
        values = []
        for paper, lst in ranked.items():
            known = [i for i in (institution_at(spells.get(r, []), years.get(paper)) for r in lst[:k]) if i is not None]
            if known:
                values.append(len(set(known)) / len(known))
        out[f"{NAME}@{k}"] = (sum(values) / len(values) if values else None, len(values))
    return out
