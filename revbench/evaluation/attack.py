"""What a colluding author and reviewer can make a scorer do (``revbench evaluate --attack``).

The two-step attack of Hsieh, Raghunathan and Shah ("Vulnerability of Text-Matching in ML/AI
Conference Reviewer Assignments to Collusions", arXiv 2412.06606): for a submission ``p`` and a
reviewer ``r`` the scorer ranks ``R``-th among every reviewer with a profile,

1. **profile curation**: ``r`` keeps in their profile only the ``m`` past papers the scorer finds
   most similar to ``p`` (``m = 1`` in the paper; a venue's minimum profile size ``m`` is the
   first mitigation they propose);
2. **abstract modification**: ``p``'s author rewrites the abstract around ``r``'s most
   distinctive terms (the top terms by tf-idf of the kept papers against the benchmark's texts,
   not already in ``p``): with the configured LLM as the paper did (``attack.rewrite=llm``,
   ``templates/prompts/collusion_rewrite.j2``), or by default offline and deterministically
   (background sentences on those terms before the abstract, ``templates/attacks/background.j2``)
   so the demo and CI run it. Each row says what wrote its abstracts.

Then ``p`` (rewritten) is scored against every reviewer again, ``r`` with the curated
profile; ``r``'s rank after is its place among them, a tie counting against the colluder. The
attack succeeds at ``k`` when that rank is at most ``k``. The paper attacked pairs starting at
ranks 20, 101, 501 and 1001 of 7,900 NeurIPS 2023 reviewers; here each is scaled to the pool's
size (``R * n / 7900``, at least ``k + 1`` so that no pair starts assigned) and stated.

The second mitigation, a more robust aggregation of a reviewer's per-paper similarities, is a
scorer parameter (``embedding:pooling=mean``, ``topk_mean:3``, ``clustering``...): each is
attacked as a scorer of its own. Scorers that read nothing the attack edits are reported immune
with the reason, not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from revbench.evaluation.model import Benchmark, MetricValue, Split

if TYPE_CHECKING:
    from revbench.clients.llm import LlmClient
    from revbench.evaluation.scorers.base import Scorer

PAPER_REVIEWERS = 7900
"""NeurIPS 2023's reviewers in the paper's experiments: the starting ranks are scaled from it."""
PAPER_RANKS = (20, 101, 501, 1001)
COLLUDER = "#colluder"
"""Suffix of a colluding reviewer's stand-in id (their curated profile beside their real one)."""
IMMUNE: dict[str, str] = {
    "trivial": "scores every pair alike: no edit moves a reviewer",
    "citation": "reads the submission's references and the reviewer's papers, which the attack does not edit "
                "(curation only removes evidence)",
    "topic": "reads the papers' topics from the graph, which the attack does not edit",
    "coupling": "reads reference lists, which the attack does not edit",
    "cocitation": "reads who cites the papers, which the attack does not edit",
}
"""Scorers the attack cannot move by construction, with why (reported, not run)."""
METRICS = ("success_at_k", "success_at_10", "median_rank_after", "median_rank_before")
_WORD = re.compile(r"[a-z][a-z-]{3,}")


@dataclass(frozen=True)
class AttackSetup:
    """The attack's settings: starting ranks (on the paper's 7,900 reviewers), pairs per rank,
    the assignment's reviewers per paper ``k``, the minimum profile sizes tried, the terms inserted."""

    ranks: tuple[int, ...] = PAPER_RANKS
    pairs_per_rank: int = 10
    per_paper: int = 3
    min_profiles: tuple[int, ...] = (1, 3)
    terms: int = 5
    seed: int = 0


@dataclass(frozen=True)
class Target:
    """One attacked pair: the submission, the reviewer, their rank before (1 = best)."""

    paper_id: str
    reviewer_id: str
    rank: int


@dataclass
class AttackResult:
    """One scorer's attack at one scaled starting rank and minimum profile size."""

    scorer: str
    spec: str
    start: int
    paper_start: int
    min_profile: int
    k: int = 3
    """The assignment's reviewers per paper: success is a rank after of at most ``k``."""
    written_by: dict[str, int] = field(default_factory=dict)
    """What wrote the attacked abstracts (the template or prompt and its version) -> how many."""
    ranks_after: list[int] = field(default_factory=list)
    ranks_before: list[int] = field(default_factory=list)


def scaled_ranks(n_reviewers: int, setup: AttackSetup) -> dict[int, int]:
    """Each of the paper's starting ranks scaled to ``n_reviewers`` (at least ``k + 1``, at most
    ``n_reviewers``), duplicates dropped: scaled -> the paper's rank it stands for."""
    out: dict[int, int] = {}
    for r in setup.ranks:
        s = min(n_reviewers, max(setup.per_paper + 1, round(r * n_reviewers / PAPER_REVIEWERS)))
        out.setdefault(s, r)
    return out


def reviewers_of(benchmark: Benchmark) -> pl.DataFrame:
    """Every reviewer with a profile (``reviewer_id``): the ones a colluder is ranked among, as the
    paper ranked a reviewer among all of NeurIPS's."""
    return benchmark.draws[0].select("reviewer_id").unique().sort("reviewer_id")


def sampled_papers(benchmark: Benchmark, starts: list[int], n: int, seed: int) -> dict[int, list[str]]:
    """Up to ``n`` distinct submissions per starting rank, drawn with ``seed``: only these are
    ranked against every reviewer (a warehouse of thousands is never scored in full)."""
    ids = benchmark.submissions["paper_id"].unique().sort().to_list()
    out = {}
    for start in starts:
        rng = np.random.default_rng(seed + start)
        out[start] = sorted(rng.choice(ids, size=min(n, len(ids)), replace=False).tolist()) if ids else []
    return out


def scoring_copy(benchmark: Benchmark, submissions: pl.DataFrame, profile: pl.DataFrame, needed: pl.DataFrame) -> Benchmark:
    """``benchmark`` with other submissions and profile, whose one (unrated) split asks for ``needed``."""
    ratings = needed.select("reviewer_id", "paper_id").unique().with_columns(rating=pl.lit(None, dtype=pl.Float64))
    return replace(benchmark, submissions=submissions, draws=[profile], splits=[Split("attack", ratings=ratings)], pool=None)


def ranks_of(scores: pl.DataFrame) -> pl.DataFrame:
    """``reviewer_id, paper_id, rank``: each reviewer's place among a paper's scored reviewers,
    ties counted against it (rank = how many score at least as high)."""
    s = scores.select("reviewer_id", "paper_id", pl.col("score").fill_nan(None).fill_null(-np.inf))
    return s.with_columns(rank=pl.col("score").rank("max", descending=True).over("paper_id").cast(pl.Int64)).drop("score")


def targets(scores: pl.DataFrame, start: int, papers: list[str]) -> list[Target]:
    """For each of ``papers``, the reviewer standing at ``start`` (the nearest rank below it
    where ties skip it; a paper with no reviewer that far down has none)."""
    ranked = (ranks_of(scores.filter(pl.col("paper_id").is_in(papers))).filter(pl.col("rank") >= start)
              .sort("paper_id", "rank", "reviewer_id"))
    first = ranked.group_by("paper_id", maintain_order=True).first()
    return [Target(r["paper_id"], r["reviewer_id"], int(r["rank"])) for r in first.iter_rows(named=True)]


def distinctive_terms(kept: list[str], corpus: list[str], target: str, n: int) -> list[str]:
    """The ``n`` terms of ``kept`` with the highest tf-idf against ``corpus``, none already in ``target``."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    def words(text: str) -> list[str]:
        return [w for w in _WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS]

    df: dict[str, int] = {}
    for doc in corpus:
        for w in set(words(doc)):
            df[w] = df.get(w, 0) + 1
    tf: dict[str, int] = {}
    for doc in kept:
        for w in words(doc):
            tf[w] = tf.get(w, 0) + 1
    present = set(words(target))
    total = len(corpus) + 1
    scored = sorted(((-c * np.log(total / (1 + df.get(w, 0))), w) for w, c in tf.items() if w not in present))
    return [w for _, w in scored[:n]]


def rewrite(abstract: str, terms: list[str]) -> tuple[str, str]:
    """The offline attack's abstract (background sentences on ``terms`` first) and the template's version."""
    from revbench.templates import render

    text, version = render("attacks/background.j2", terms=terms, abstract=abstract)
    return " ".join(text.split()), version


Rewriter = Callable[[str, list[str], str], tuple[str, str]]
"""``(abstract, terms, the colluder's kept papers' text) -> (rewritten abstract, what wrote it)``."""


def keyword_rewriter(abstract: str, terms: list[str], reviewer_text: str) -> tuple[str, str]:
    """The deterministic offline rewrite (:func:`rewrite`), named by its template and version."""
    text, version = rewrite(abstract, terms)
    return text, f"keywords attacks/background.j2@{version}"


def llm_rewriter(client: LlmClient) -> Rewriter:
    """The paper's rewrite: the configured LLM asked with ``prompts/collusion_rewrite.j2``; an
    empty or failed answer falls back to :func:`keyword_rewriter` (and says so)."""
    from revbench.retry import PermanentError, TransientError
    from revbench.templates import render

    def rewriter(abstract: str, terms: list[str], reviewer_text: str) -> tuple[str, str]:
        prompt, version = render("prompts/collusion_rewrite.j2", terms=terms, reviewer_text=reviewer_text, abstract=abstract)
        try:
            answer = client.complete(prompt, meta={"template": "prompts/collusion_rewrite.j2", "template_version": version})
        except (TransientError, PermanentError):
            answer = ""
        if not answer.strip():
            return keyword_rewriter(abstract, terms, reviewer_text)
        return " ".join(answer.split()), f"llm prompts/collusion_rewrite.j2@{version}"

    return rewriter


def immune_rows(benchmark: str, scorer: str, spec: str, why: str) -> list[MetricValue]:
    """The rows of a scorer the attack cannot move: no value, the reason as what they stand on."""
    return [MetricValue(benchmark, "attack", scorer, m, None, None, None, 0, spec, basis=f"immune: {why}")
            for m in METRICS]


def result_rows(benchmark: str, res: AttackResult, n_reviewers: int) -> list[MetricValue]:
    """One result's rows: success at ``k`` and at 10, the median ranks before and after."""
    after, before = np.array(res.ranks_after), np.array(res.ranks_before)
    n = len(after)
    basis = (f"start rank {res.start} of {n_reviewers} (the paper's {res.paper_start} of {PAPER_REVIEWERS}), "
             f"min profile {res.min_profile}, k={res.k}; rewritten by "
             + ", ".join(f"{by} ({n})" for by, n in sorted(res.written_by.items())))
    vals = {
        "success_at_k": float((after <= res.k).mean()) if n else None,
        "success_at_10": float((after <= 10).mean()) if n else None,
        "median_rank_after": float(np.median(after)) if n else None,
        "median_rank_before": float(np.median(before)) if n else None,
    }
    return [MetricValue(benchmark, f"attack:start={res.start}:min_profile={res.min_profile}", res.scorer, m, v, None, None,
                        n, res.spec, basis=basis) for m, v in vals.items()]


def attack_scorer(benchmark: Benchmark, scorer: Scorer, setup: AttackSetup,
                  rewriter: Rewriter = keyword_rewriter) -> list[AttackResult]:
    """The attack on ``scorer`` at every scaled starting rank and minimum profile size (module
    docstring); three scoring passes per rank: before, curation, after."""
    from revbench.evaluation.scorers.base import paper_text

    reviewers = reviewers_of(benchmark)
    profile = benchmark.draws[0]
    subs = benchmark.submissions
    n_reviewers = reviewers.height
    starts = scaled_ranks(n_reviewers, setup)
    sampled = sampled_papers(benchmark, list(starts), setup.pairs_per_rank, setup.seed)
    ranked_papers = subs.select("paper_id").filter(pl.col("paper_id").is_in(sorted({p for ps in sampled.values() for p in ps})))
    pairs = reviewers.join(ranked_papers, how="cross")
    base = scorer.score(scoring_copy(benchmark, subs, profile, pairs)).draws[0]
    corpus = paper_text(profile.unique("paper_id")) + paper_text(subs)
    out: list[AttackResult] = []
    for start, paper_start in starts.items():
        chosen = targets(base, start, sampled[start])
        if not chosen:
            continue
        # 1. curation: every paper of each colluder's profile alone, against the target
        singles = pl.concat([profile.filter(pl.col("reviewer_id") == t.reviewer_id)
                             .with_columns(reviewer_id=pl.lit(f"{t.reviewer_id}{COLLUDER}{i}/") + pl.col("paper_id"),
                                           target=pl.lit(t.paper_id)) for i, t in enumerate(chosen)])
        single_scores = scorer.score(scoring_copy(benchmark, subs, singles.drop("target"),
                                                  singles.select("reviewer_id", pl.col("target").alias("paper_id")))).draws[0]
        order = (singles.select("reviewer_id", "paper_id").join(single_scores.drop("paper_id"), on="reviewer_id", how="left")
                 .with_columns(i=pl.col("reviewer_id").str.extract(rf"{COLLUDER}(\d+)/", 1).cast(pl.Int64))
                 .sort("i", "score", "paper_id", descending=[False, True, False], nulls_last=True))
        for m in setup.min_profiles:
            kept = order.group_by("i", maintain_order=True).head(m)
            colluders, texts, written = [], {}, {}
            for i, t in enumerate(chosen):
                ids = kept.filter(pl.col("i") == i)["paper_id"].to_list()
                rows = profile.filter((pl.col("reviewer_id") == t.reviewer_id) & pl.col("paper_id").is_in(ids))
                colluders.append(rows.with_columns(reviewer_id=pl.lit(f"{t.reviewer_id}{COLLUDER}{i}")))
                target = subs.filter(pl.col("paper_id") == t.paper_id)
                own = paper_text(target)[0]
                # 2. the author's rewrite: background on the colluder's most distinctive terms
                texts[t.paper_id], by = rewriter(target["abstract"].fill_null("")[0],
                                                 distinctive_terms(paper_text(rows), corpus, own, setup.terms),
                                                 " ".join(paper_text(rows)))
                written[by] = written.get(by, 0) + 1
            attacked = subs.with_columns(abstract=pl.col("paper_id").replace_strict(texts, default=pl.col("abstract"),
                                                                                   return_dtype=pl.Utf8))
            needed = pl.concat([
                pl.concat([pairs.filter((pl.col("paper_id") == t.paper_id) & (pl.col("reviewer_id") != t.reviewer_id)),
                           pl.DataFrame({"reviewer_id": [f"{t.reviewer_id}{COLLUDER}{i}"], "paper_id": [t.paper_id]})])
                for i, t in enumerate(chosen)])
            after = scorer.score(scoring_copy(benchmark, attacked, pl.concat([profile, *colluders]), needed)).draws[0]
            ranked = ranks_of(after)
            res = AttackResult(scorer.label, scorer.spec, start, paper_start, m, setup.per_paper, written)
            for i, t in enumerate(chosen):
                got = ranked.filter((pl.col("paper_id") == t.paper_id)
                                    & (pl.col("reviewer_id") == f"{t.reviewer_id}{COLLUDER}{i}"))["rank"]
                res.ranks_after.append(int(got[0]) if got.len() else n_reviewers)
                res.ranks_before.append(t.rank)
            out.append(res)
    return out


def attack_rows(benchmark: Benchmark, scorers: list[Scorer], setup: AttackSetup,
                rewriter: Rewriter = keyword_rewriter) -> list[MetricValue]:
    """Every scorer attacked (or reported immune) on ``benchmark``, abstracts rewritten by ``rewriter``."""
    rows: list[MetricValue] = []
    n_reviewers = reviewers_of(benchmark).height
    for sc in scorers:
        if sc.name in IMMUNE:
            rows += immune_rows(benchmark.name, sc.label, sc.spec, IMMUNE[sc.name])
            continue
        for res in attack_scorer(benchmark, sc, setup, rewriter):
            rows += result_rows(benchmark.name, res, n_reviewers)
    return rows
