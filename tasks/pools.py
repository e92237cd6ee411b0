"""Candidate pools in the LR-bench recipe: sample queries, recall neighbours with faiss, take their
authors as candidates, remove conflicts of interest, screen, and assign under a workload cap.

Every function is pure over frames and arrays; the flow reads and writes the warehouse.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

EVIDENCE_SCHEMA = {"query_id": pl.Utf8, "author_id": pl.Utf8, "neighbor_id": pl.Utf8, "similarity": pl.Float64}
EXCLUSION_SCHEMA = {"query_id": pl.Utf8, "author_id": pl.Utf8, "reason": pl.Utf8, "detail": pl.Utf8}


def _rank(seed: int, *parts: str) -> str:
    """A seeded, order-free tie-breaker."""
    return hashlib.sha1("\x1f".join((str(seed), *parts)).encode()).hexdigest()


def sample_queries(papers: pl.DataFrame, categories: list[str], per_category: int, seed: int, exclude: set[str]) -> pl.DataFrame:
    """``per_category`` papers of each primary category, seeded; a paper in ``exclude`` (queries
    of earlier rounds) is not drawn. Returns ``arxiv_id, category``."""
    rows = []
    for cat in categories:
        pool = sorted(a for a, c in papers.select("arxiv_id", "primary_category").iter_rows() if c == cat and a not in exclude)
        pool.sort(key=lambda a: _rank(seed, cat, a))
        rows += [{"arxiv_id": a, "category": cat} for a in pool[:per_category]]
    return pl.DataFrame(rows, schema={"arxiv_id": pl.Utf8, "category": pl.Utf8})


QUERY_BATCH = 512
"""At most this many queries per faiss range search (bounds the memory of one search)."""


def query_batches(n: int, most: int) -> list[range]:
    """``n`` positions in the fewest batches of at most ``most``, as equal as they can be (no
    small remainder batch: see ``range_neighbors``)."""
    if n <= 0:
        return []
    return [range(int(c[0]), int(c[-1]) + 1) for c in np.array_split(np.arange(n), -(-n // most))]


def range_neighbors(vectors: np.ndarray, ids: list[str], query_ids: list[str], tau: float, max_neighbors: int = 0) -> pl.DataFrame:
    """Papers with cosine similarity above ``tau`` to each query (itself excluded), from a faiss
    inner-product index over unit vectors; ``max_neighbors`` keeps the most similar."""
    import faiss

    if not query_ids or vectors.shape[0] == 0:
        return pl.DataFrame(schema={"query_id": pl.Utf8, "neighbor_id": pl.Utf8, "similarity": pl.Float64})
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    pos = {a: i for i, a in enumerate(ids)}
    qpos = np.array([pos[a] for a in query_ids], dtype=np.int64)
    id_arr = np.array(ids, dtype=object)
    frames = []
    # Queries in batches: faiss allocates every match of a batch at once, and at full size on
    # dense vectors (160k papers, tau 0.4) one search over all queries ran out of 24 GB. The
    # batches are equal and as large as allowed: faiss 1.15 searched 4.5x slower per query in
    # batches of 320 queries or fewer than of 352 or more (measured on 166k MiniLM vectors;
    # batches of 256 made the recall of a 4,000-query round 16.9 s instead of 3.1 s).
    for part in query_batches(len(query_ids), QUERY_BATCH):
        start, batch = part.start, qpos[part.start:part.stop]
        lims, dist, found = index.range_search(x[batch], float(tau))
        qs, ns, ss = [], [], []
        for k, qp in enumerate(batch):
            d, i = dist[lims[k]:lims[k + 1]], found[lims[k]:lims[k + 1]]
            keep = i != qp
            d, i = d[keep], i[keep]
            if max_neighbors and len(d) > max_neighbors:
                top = np.argsort(-d, kind="stable")[:max_neighbors]
                d, i = d[top], i[top]
            qs.append(np.full(len(d), query_ids[start + k], dtype=object))
            ns.append(id_arr[i])
            ss.append(d.astype(np.float64))
        if qs:
            frames.append(pl.DataFrame({"query_id": np.concatenate(qs).tolist(), "neighbor_id": np.concatenate(ns).tolist(),
                                        "similarity": np.concatenate(ss)},
                                       schema={"query_id": pl.Utf8, "neighbor_id": pl.Utf8, "similarity": pl.Float64}))
    if not frames:
        return pl.DataFrame(schema={"query_id": pl.Utf8, "neighbor_id": pl.Utf8, "similarity": pl.Float64})
    return pl.concat(frames)


def candidate_evidence(neighbors: pl.DataFrame, links: pl.DataFrame) -> pl.DataFrame:
    """Authors of neighbour papers as candidates, one row per (query, author, neighbour)."""
    ev = neighbors.join(links.select(pl.col("arxiv_id").alias("neighbor_id"), "author_id"), on="neighbor_id")
    return ev.select(list(EVIDENCE_SCHEMA)).unique(["query_id", "author_id", "neighbor_id"]).sort("query_id", "author_id", "neighbor_id")


def pool_size_report(neighbors: pl.DataFrame, links: pl.DataFrame, query_ids: list[str], taus: list[float]) -> list[dict[str, float]]:
    """Candidates per query at several thresholds (from one search at the lowest), to choose tau."""
    # A candidate is in a query's pool at t when its closest neighbour paper reaches t: one join
    # and each pair's best similarity, instead of the whole evidence again at every threshold.
    best = (neighbors.join(links.select(pl.col("arxiv_id").alias("neighbor_id"), "author_id"), on="neighbor_id")
            .group_by("query_id", "author_id").agg(pl.col("similarity").max()))
    out = []
    for t in sorted(taus):
        sizes = best.filter(pl.col("similarity") >= t).group_by("query_id").len("n")
        n = np.array(sizes["n"].to_list() + [0] * (len(query_ids) - sizes.height), dtype=float)
        out.append({"tau": t, "median": float(np.median(n)) if n.size else 0.0, "mean": float(n.mean()) if n.size else 0.0,
                    "p90": float(np.percentile(n, 90)) if n.size else 0.0, "queries_without_candidates": int((n == 0).sum())})
    return out


def conflicts(evidence: pl.DataFrame, query_authors: pl.DataFrame, edges: pl.DataFrame,
              affiliations: pl.DataFrame | None = None, names: dict[str, str] | None = None,
              institutions: pl.DataFrame | None = None) -> pl.DataFrame:
    """Candidates in conflict with a query: its own authors, anyone with a direct co-authorship
    with one of them, and (when ``affiliations`` is given) anyone sharing an affiliation with one.
    ``institutions`` are the conflicts by institution identity (``tasks.coi.institution_conflicts``),
    whose ``evidence`` column the result then carries (null for the other reasons).

    With ``names``, a candidate whose name could be that of a query author or of one of their
    co-authors is excluded too: disambiguation keeps people apart when unsure, so one person can
    hold two author ids, and a conflict must not slip through that split."""
    pairs = evidence.select("query_id", "author_id").unique()
    qa = query_authors.select(pl.col("arxiv_id").alias("query_id"), pl.col("author_id").alias("query_author"))
    own = pairs.join(qa, left_on=["query_id", "author_id"], right_on=["query_id", "query_author"], how="semi").with_columns(
        pl.lit("query_author").alias("reason"), pl.lit("wrote the query paper").alias("detail"))
    both = pl.concat([edges.select(pl.col("author_a").alias("x"), pl.col("author_b").alias("y")),
                      edges.select(pl.col("author_b").alias("x"), pl.col("author_a").alias("y"))])
    co = (pairs.join(qa, on="query_id").join(both, left_on=["query_author", "author_id"], right_on=["x", "y"])
          .group_by("query_id", "author_id").agg(pl.col("query_author").min())
          .select("query_id", "author_id", pl.lit("coauthor").alias("reason"),
                  ("co-authored with query author " + pl.col("query_author")).alias("detail")))
    parts = [own.select(list(EXCLUSION_SCHEMA)), co]
    if affiliations is not None and affiliations.height:
        aff = affiliations.select("author_id", "affiliation")
        same = (pairs.join(qa, on="query_id").join(aff, left_on="query_author", right_on="author_id")
                .join(aff, left_on=["author_id", "affiliation"], right_on=["author_id", "affiliation"])
                .group_by("query_id", "author_id").agg(pl.col("affiliation").min())
                .select("query_id", "author_id", pl.lit("same_affiliation").alias("reason"),
                        ("shares " + pl.col("affiliation") + " with a query author").alias("detail")))
        parts.append(same)
    if names:
        parts += _name_conflicts(pairs, qa, both, names)
    if institutions is not None and institutions.height:
        parts.append(institutions.join(pairs, on=["query_id", "author_id"], how="semi"))
    order = {"query_author": 0, "coauthor": 1, "same_institution": 2, "same_affiliation": 3}
    allx = pl.concat(parts, how="diagonal").with_columns(pl.col("reason").replace_strict(order, return_dtype=pl.Int64).alias("_o"))
    # A stable sort: of two rows with the same reason, the rule's (own authors, co-authorship
    # edges) comes before the namesake's, in the order of ``parts``; an unstable one let the
    # detail of such pairs change from one run to the next.
    return (allx.sort("query_id", "author_id", "_o", maintain_order=True).unique(["query_id", "author_id"], keep="first")
            .drop("_o").sort("query_id", "author_id"))


def _name_conflicts(pairs: pl.DataFrame, qa: pl.DataFrame, both: pl.DataFrame, names: dict[str, str]) -> list[pl.DataFrame]:
    """Conflicts through possible splits: every author id whose name could be a query author's
    counts as that author (with their co-authors), and every id whose name could be one of those
    co-authors counts as a co-author."""
    from revbench.keys import block_key, given_name

    index: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for a, n in names.items():
        index[block_key(n)].append((given_name(n), a))

    def same_name(a: str) -> set[str]:
        n = names.get(a, "")
        g = given_name(n)
        return {b for gb, b in index.get(block_key(n), []) if not g or not gb or g == gb} | {a}

    co_of: dict[str, set[str]] = defaultdict(set)
    for x, y in both.iter_rows():
        co_of[x].add(y)
    by_query: dict[str, list[str]] = defaultdict(list)
    for q, a in qa.iter_rows():
        by_query[q].append(a)
    rows = []
    cache: dict[str, tuple[set[str], set[str]]] = {}
    for q, cand in pairs.iter_rows():
        if q not in cache:
            selves = set().union(*(same_name(a) for a in by_query.get(q, []))) if by_query.get(q) else set()
            co = set().union(*(co_of[x] for x in selves)) if selves else set()
            cache[q] = (selves, set().union(*(same_name(c) for c in co)) if co else set())
        selves, co_names = cache[q]
        if cand in selves:
            rows.append({"query_id": q, "author_id": cand, "reason": "query_author", "detail": "name matches a query author"})
        elif cand in co_names:
            rows.append({"query_id": q, "author_id": cand, "reason": "coauthor", "detail": "co-authored with a namesake of a query author"})
    return [pl.DataFrame(rows, schema=EXCLUSION_SCHEMA)] if rows else []


def screening(evidence: pl.DataFrame, recent: dict[str, int], emails: dict[str, str | None], min_papers: int) -> pl.DataFrame:
    """Candidates with fewer than ``min_papers`` recent papers, or no usable email."""
    pairs = evidence.select("query_id", "author_id").unique().sort("query_id", "author_id")
    known = pl.DataFrame({"author_id": list(recent), "n": list(recent.values())},
                         schema={"author_id": pl.Utf8, "n": pl.Int64})
    mail = pl.DataFrame({"author_id": list(emails), "email": list(emails.values())},
                        schema={"author_id": pl.Utf8, "email": pl.Utf8})
    few = pl.col("n") < min_papers
    return (pairs.join(known, on="author_id", how="left", maintain_order="left")
            .join(mail, on="author_id", how="left", maintain_order="left")
            .with_columns(pl.col("n").fill_null(0))
            .filter(few | pl.col("email").is_null() | (pl.col("email") == ""))
            .select("query_id", "author_id",
                    pl.when(few).then(pl.lit("screening")).otherwise(pl.lit("unreachable")).alias("reason"),
                    pl.when(few).then(pl.format("{} recent papers < {}", "n", pl.lit(min_papers)))
                    .otherwise(pl.lit("no usable email")).alias("detail")))


def assign(evidence: pl.DataFrame, max_per_candidate: int, per_query: int, seed: int) -> pl.DataFrame:
    """Invite up to ``per_query`` candidates per query, at most ``max_per_candidate`` queries per
    candidate. Rounds go over the queries in a seeded order; in each round every query takes its
    strongest remaining candidate (highest neighbour similarity) that still has room, so
    invitations spread across queries and the strongest evidence is served first."""
    strength = evidence.group_by("query_id", "author_id").agg(pl.col("similarity").max().alias("score"))
    ranked: dict[str, list[tuple[str, float]]] = defaultdict(list)
    # Each query's candidates strongest first, ties by ``_rank(seed, query, author)``: hashed only
    # where a score is tied within its query (a hash for every pair cost seconds a round).
    tied = strength.select((pl.len().over("query_id", "score") > 1).alias("tied"))["tied"].to_list()
    keys = [_rank(seed, q, a) if t else "" for q, a, t in zip(strength["query_id"].to_list(),
                                                              strength["author_id"].to_list(), tied, strict=True)]
    rows = (strength.with_columns(pl.Series("tie", keys, dtype=pl.Utf8))
            .sort(["query_id", "score", "tie"], descending=[False, True, False])
            .select("query_id", "author_id", "score").iter_rows())
    for q, a, s in rows:
        ranked[q].append((a, s))
    order = sorted(ranked, key=lambda q: _rank(seed, q))
    load: dict[str, int] = defaultdict(int)
    nxt = {q: 0 for q in order}
    chosen: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for _round in range(per_query):
        progressed = False
        for q in order:
            cands = ranked[q]
            while nxt[q] < len(cands) and load[cands[nxt[q]][0]] >= max_per_candidate:
                nxt[q] += 1
            if nxt[q] < len(cands) and len(chosen[q]) < per_query:
                a, s = cands[nxt[q]]
                nxt[q] += 1
                chosen[q].append((a, s))
                load[a] += 1
                progressed = True
        if not progressed:
            break
    rows = [{"query_id": q, "author_id": a, "score": s, "rank": i + 1} for q in order for i, (a, s) in enumerate(chosen[q])]
    return pl.DataFrame(rows, schema={"query_id": pl.Utf8, "author_id": pl.Utf8, "score": pl.Float64, "rank": pl.Int64})


def affinity_csv(assignments_or_evidence: pl.DataFrame) -> str:
    """Candidate pools in the OpenReview affinity format: ``submission,~profile,score`` lines."""
    df = assignments_or_evidence
    if "score" not in df.columns:
        df = df.group_by("query_id", "author_id").agg(pl.col("similarity").max().alias("score"))
    return "".join(f"{q},~{a},{s:.6f}\n" for q, a, s in df.select("query_id", "author_id", "score").sort("query_id", "author_id").iter_rows())


def author_affiliations(authors: pl.DataFrame) -> pl.DataFrame:
    """``author_id, affiliation``: every affiliation of each author (all of every paper, first
    and second alike), normalised and, when it is a known variant, named by its canonical
    institution (so ``MIT`` and ``Massachusetts Institute of Technology`` meet), for the
    same-affiliation COI check."""
    from revbench.keys import normalize_affiliation
    from revbench.tasks.normalize import canonical_institution

    rows = [(a, canonical_institution(key) or key) for a, affs in authors.select("author_id", "affiliations").iter_rows()
            for raw in affs or [] if (key := normalize_affiliation(raw))]
    return pl.DataFrame(rows, schema={"author_id": pl.Utf8, "affiliation": pl.Utf8}, orient="row").unique()


def recent_counts(author_years: pl.DataFrame, authors: pl.DataFrame, s2: pl.DataFrame, since_year: int) -> dict[str, int]:
    """Recent papers per author: the corpus (``author_id, arxiv_id, year``), plus papers of the
    author's Semantic Scholar profiles (``s2_author_id, paper_key, year, arxiv_id``) that the
    corpus does not already hold, each counted once per author."""
    corpus = author_years.filter(pl.col("year") >= since_year).group_by("author_id").agg(pl.col("arxiv_id").n_unique().alias("n"))
    counts = dict(corpus.iter_rows())
    if s2.height:
        own = set(author_years["arxiv_id"].to_list())
        author_of: dict[str, set[str]] = defaultdict(set)
        for a, ids in authors.select("author_id", "s2_author_ids").iter_rows():
            for sid in ids or []:
                author_of[sid].add(a)
        extra: Counter[str] = Counter()
        seen = set()
        for sid, key, year, arxiv in s2.select("s2_author_id", "paper_key", "year", "arxiv_id").iter_rows():
            if year is None or year < since_year or (arxiv and arxiv in own):
                continue
            for a in author_of.get(sid, ()):
                if (a, key) not in seen:
                    seen.add((a, key))
                    extra[a] += 1
        for a, n in extra.items():
            counts[a] = counts.get(a, 0) + n
    return counts


def invitations(assignments: pl.DataFrame, emails: dict[str, str | None], names: dict[str, str]) -> pl.DataFrame:
    """One consolidated invitation per invited candidate: ``author_id, query_ids, email, name``."""
    return (assignments.group_by("author_id").agg(pl.col("query_id").sort().alias("query_ids"))
            .with_columns(pl.col("author_id").replace_strict(emails, return_dtype=pl.Utf8).alias("email"),
                          pl.col("author_id").replace_strict(names, return_dtype=pl.Utf8).alias("name"))
            .sort("author_id"))


def pool_sizes(evidence: pl.DataFrame, query_ids: list[str]) -> dict[str, float]:
    """Median and mean candidates per query, and how many queries have none."""
    n = evidence.group_by("query_id").agg(pl.col("author_id").n_unique().alias("n"))["n"].to_list()
    n += [0] * (len(query_ids) - len(n))
    return {"median": float(np.median(n)) if n else 0.0, "mean": float(sum(n) / max(len(n), 1)), "zero": n.count(0)}


def queries_short_of_target(assignments: pl.DataFrame, query_ids: list[str], per_query: int) -> int:
    """Queries with fewer than ``per_query`` invited candidates (none counts too)."""
    assigned = assignments.group_by("query_id").len()
    return assigned.filter(pl.col("len") < per_query).height + len(set(query_ids) - set(assigned["query_id"].to_list()))


def round_parameters(settings: Any, categories: list[str]) -> dict[str, Any]:
    """Every setting that shapes a round's invitations (``settings`` is ``PoolsSettings``); an
    empty ``query_categories``, citation recall off and the institution COI at its defaults are left out, so rounds
    built before those settings existed keep their parameters' hash (a round whose invitations
    the graph would change is still refused by ``changed_pairs``)."""
    dumped = settings.model_dump()
    if not dumped.get("query_categories"):
        dumped.pop("query_categories", None)
    fields = getattr(type(settings), "model_fields", {})
    coi = ("coi_by_institution", "coi_institution_years")
    if all(k in fields and dumped.get(k) == fields[k].default for k in coi):
        for k in coi:
            dumped.pop(k)
    # Citation recall joins the hash only when on, unlike the COI's defaults: off is what every
    # round before it did, so those rounds keep their hash, and the flow rebuilds a round recorded
    # without it without it (``pool_citations.applies``) rather than refuse or redraw it.
    if not dumped.get("citation_recall", False):
        dumped.pop("citation_recall", None)
    return {**dumped, "categories": sorted(categories)}


def parameters_hash(parameters: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parameters, sort_keys=True, default=str).encode()).hexdigest()[:16]


def parameter_changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    """``tau 0.6 -> 0.5, seed 0 -> 3`` for the settings that differ."""
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k} {old.get(k)} -> {new.get(k)}" for k in keys) or "none"


def changed_pairs(old: pl.DataFrame, new: pl.DataFrame) -> int:
    """(query, candidate) invitations in one frame and not the other."""
    a = set(old.select("query_id", "author_id").iter_rows())
    b = set(new.select("query_id", "author_id").iter_rows())
    return len(a ^ b)


PAIR = ["query_id", "author_id"]


def paper_texts(papers: pl.DataFrame, model: str | None = None) -> list[str]:
    """Each paper's title and abstract as one text (what the pools embed), in ``model``'s
    recipe's input format where it has one (:mod:`revbench.ml.recipes`)."""
    from revbench.ml.recipes import recipe, texts

    if model is not None and recipe(model) is not None and recipe(model).text != "title_space_abstract":  # type: ignore[union-attr]
        return texts(model, papers["title"].to_list(), papers["abstract"].to_list())
    return (papers["title"].fill_null("") + " " + papers["abstract"].fill_null("")).to_list()


def without_pairs(frame: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``frame`` whose (query, candidate) pair is not in ``pairs`` (an exclusion list)."""
    return frame.join(pairs.select(PAIR), on=PAIR, how="anti")


def author_names(authors: pl.DataFrame) -> dict[str, str]:
    """Each author's name, by author id."""
    return dict(authors.select("author_id", "name").iter_rows())


def first_emails(authors: pl.DataFrame) -> dict[str, str | None]:
    """Each author's first email (``None`` for an author with none), by author id: where the
    invitation goes."""
    return {a: (e[0] if e else None) for a, e in authors.select("author_id", "emails").iter_rows()}


def candidate_s2_ids(candidates: pl.DataFrame, authors: pl.DataFrame) -> list[str]:
    """The Semantic Scholar author ids of every candidate in ``candidates``, sorted, each once."""
    # A join, not a loop over every author of the corpus (200k at 160k papers).
    ids = (authors.join(candidates.select("author_id").unique(), on="author_id", how="semi")
           .select(pl.col("s2_author_ids").explode()).drop_nulls().unique())
    return sorted(ids["s2_author_ids"].to_list())


def first_recent_year(papers: pl.DataFrame, recent_years: int) -> int:
    """The first year that counts as recent: ``recent_years`` back from the corpus's newest paper."""
    return int(papers["year"].max()) - recent_years + 1


def query_sample_rows(samples: pl.DataFrame, seed: int, sampled_at: datetime) -> pl.DataFrame:
    """The sampled queries as ``query_samples`` rows: with the seed that drew them and when."""
    return samples.with_columns(pl.lit(seed).alias("seed"), pl.lit(sampled_at).alias("sampled_at"))


@dataclass(frozen=True)
class RoundStats:
    """A round in numbers: queries and corpus papers; candidates per query before COI, after COI
    and after screening (``median``, ``mean``, ``zero``); exclusions by reason; invitations,
    invited candidates and the most queries one got; queries below the target."""

    queries: int
    papers: int
    pool_before_coi: dict[str, float]
    pool_after_coi: dict[str, float]
    pool_after_screening: dict[str, float]
    exclusions: dict[str, int]
    assignments: int
    invited_candidates: int
    max_queries_per_candidate: int
    queries_short_of_target: int


def round_stats(query_ids: list[str], papers: int, evidence: pl.DataFrame, after_coi: pl.DataFrame,
                kept: pl.DataFrame, exclusions: pl.DataFrame, assignments: pl.DataFrame, per_query: int) -> RoundStats:
    """The numbers of a round from its frames (``kept``: candidates left after screening)."""
    per_candidate = assignments.group_by("author_id").len()["len"].to_list()
    return RoundStats(
        queries=len(query_ids), papers=papers, pool_before_coi=pool_sizes(evidence, query_ids),
        pool_after_coi=pool_sizes(after_coi, query_ids), pool_after_screening=pool_sizes(kept, query_ids),
        exclusions=dict(Counter(exclusions["reason"].to_list())), assignments=assignments.height,
        invited_candidates=assignments["author_id"].n_unique(), max_queries_per_candidate=max(per_candidate, default=0),
        queries_short_of_target=queries_short_of_target(assignments, query_ids, per_query))


@dataclass(frozen=True)
class RoundTarget:
    """How big the next round must be for ``more_anchors`` more paper-centric anchors."""

    more_anchors: int
    anchors: int
    queries: int
    categories: int
    per_category: int

    def line(self) -> str:
        """The sizing in one sentence, with the yield it rests on."""
        return (f"{self.more_anchors} more paper-centric anchors at the rounds' yield so far ({self.anchors} anchors "
                f"from {self.queries} query papers, {self.anchors / self.queries:.2f} each) -> {self.per_category} query "
                f"papers in each of {self.categories} categories")


def round_target(more_anchors: int, anchors: int, queries: int, categories: int) -> RoundTarget:
    """Query papers per category for ``more_anchors`` more anchors, at the yield of the rounds so
    far (a query paper becomes an anchor when two or more of its invitees rate it apart)::

        yield = anchors / queries        per_category = ceil(more_anchors / (yield * categories))

    Raises ValueError when no round has produced an anchor yet (there is no yield to scale)."""
    if more_anchors < 1 or categories < 1:
        raise ValueError("more_anchors and categories must be at least 1")
    if anchors < 1 or queries < 1:
        raise ValueError("no round has paper-centric tuples yet, so there is no yield to size a round from")
    per_category = max(1, math.ceil(more_anchors * queries / (anchors * categories)))
    return RoundTarget(more_anchors, anchors, queries, categories, per_category)
