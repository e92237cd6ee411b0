"""Survey answers into a benchmark: de-duplication, quality flags, curator decisions and tuples
(their statistics are :mod:`revbench.tasks.rating_stats`). Pure over frames: the ratings flow
reads events, invitations and pool evidence from the warehouse and writes what these functions
return.

LR-bench's recipe (1,069 ratings -> 1,055): the latest answer of a reviewer for a paper wins and
earlier ones are kept as history; suspicious patterns are flagged for a person to keep or drop;
paper-centric tuples (p, r+, r-) pair two reviewers of one paper and reviewer-centric tuples
(r, p+, p-) two papers of one reviewer whenever their ratings differ (the higher preferred, ties
dropped).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from revbench.schemas.tables import EVENT_REJECTS, RATING_FLAGS, RATING_TUPLES, RATINGS, SURVEY_EPOCHS
from revbench.settings import RatingsSettings

EVENT_COLUMNS = ("epoch", "event_id", "invitation_id", "paper_id", "rating", "skipped", "source", "created_at", "digest")
STORE_EVENT_SCHEMA = {"event_id": pl.Int64, "invitation_id": pl.Utf8, "paper_id": pl.Utf8, "rating": pl.Int64,
                      "skipped": pl.Int64, "source": pl.Utf8, "created_at": pl.Utf8}
"""Events as the survey store hands them out (times as ISO text, skips as 0/1)."""


def event_digests(events: pl.DataFrame) -> pl.Series:
    """sha256 of each answer's content: invitation, paper, rating or skip, source and the time
    to the microsecond. The same answer has the same digest in every epoch (a restored backup,
    or a store given an epoch on upgrade), so it is pulled once. A click's token digest is left
    out on purpose: the warehouse never kept it, so rows pulled before epochs could not get the
    same digest, and the token is itself a function of invitation, paper and rating."""
    key = pl.concat_str([pl.col("invitation_id"), pl.col("paper_id"),
                         pl.when(pl.col("skipped")).then(pl.lit("skip")).otherwise(pl.col("rating").cast(pl.Utf8))
                         .fill_null("none"), pl.col("source"), pl.col("created_at").dt.epoch("us").cast(pl.Utf8)],
                        separator="\x1f")
    keys = events.select(key.alias("k"))["k"].to_list()
    return pl.Series("digest", [hashlib.sha256(k.encode()).hexdigest() for k in keys], dtype=pl.Utf8)


def store_events(rows: list[dict[str, Any]], epoch: str) -> pl.DataFrame:
    """Survey store events as warehouse events: ``EVENT_COLUMNS``, labelled with the store's
    epoch, times parsed, each with its digest."""
    df = pl.DataFrame(rows, schema=STORE_EVENT_SCHEMA).with_columns(
        pl.lit(epoch, dtype=pl.Utf8).alias("epoch"), pl.col("skipped").cast(pl.Boolean),
        pl.col("created_at").str.to_datetime(time_zone="UTC", time_unit="us"))
    return with_digests(df.with_columns(pl.lit(None, dtype=pl.Utf8).alias("digest"))).select(EVENT_COLUMNS)


def with_digests(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with every missing digest computed (rows pulled before digests existed)."""
    if events.height == 0 or events["digest"].null_count() == 0:
        return events
    return events.with_columns(pl.col("digest").fill_null(event_digests(events)))


def lost_events(events: pl.DataFrame, pulled: pl.DataFrame, known: set[str], epoch: str,
                high_water: int) -> tuple[int, tuple[int, ...]]:
    """What a store that lost events (``events``: all it holds now) still holds and what it lost:
    the highest id up to ``high_water`` under which it holds an answer already pulled
    (``known``), and the ids of the events pulled from ``epoch`` up to that mark (``pulled``:
    the warehouse's events) whose answer it no longer holds. An id the store never handed out
    (SQLite's AUTOINCREMENT leaves gaps) was never pulled, so it is no loss; an id it handed out
    again holds another answer, so the one pulled under it is."""
    held = events.filter((pl.col("event_id") <= high_water) & pl.col("digest").is_in(list(known)))
    gone = pulled.filter((pl.col("epoch") == epoch) & (pl.col("event_id") <= high_water)
                         & ~pl.col("digest").is_in(events["digest"].to_list()))
    return int(held["event_id"].max() or 0), tuple(sorted(int(i) for i in gone["event_id"].unique()))


def id_ranges(ids: tuple[int, ...], most: int = 6) -> str:
    """Event ids as ranges (``4-7, 9``), the first ``most`` of them, then how many in all."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    shown = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs[:most])
    return shown + (f", … ({len(ids)} events)" if len(runs) > most else "")


def fresh_events(read: pl.DataFrame, known: set[str]) -> pl.DataFrame:
    """The events of ``read`` whose answer was never pulled (by digest), each answer once."""
    return read.filter(~pl.col("digest").is_in(list(known))).unique("digest", keep="first", maintain_order=True)


def event_history(old: pl.DataFrame, incoming: pl.DataFrame, run_id: str, now: datetime) -> pl.DataFrame:
    """Every event pulled so far: the rows pulled before, then ``incoming`` stamped with this run."""
    incoming = incoming.with_columns(pl.lit(run_id).alias("run_id"), pl.lit(now).alias("pulled_at"))
    cols = [*EVENT_COLUMNS, "run_id", "pulled_at"]
    return pl.concat([old.select(cols), incoming.select(cols)], how="vertical_relaxed")


def dispositions(resolved: pl.DataFrame) -> dict[str, int]:
    """How many events got each disposition."""
    return dict(resolved.group_by("disposition").len().iter_rows())


@dataclass(frozen=True)
class PullFound:
    """What one pull found in the survey store, for the one line the run says."""

    epoch: str
    origin: str
    after: int
    new: int
    known: int
    first: bool = False
    previous: str | None = None
    lost_from: str | None = None
    held_up_to: int = 0
    pulled_up_to: int = 0
    missing: tuple[int, ...] = ()
    """The ids of the events pulled from ``lost_from`` whose answers its store no longer holds."""
    opt_outs: int = 0

    def line(self) -> str:
        """One line: the store's epoch, what was new and what was already known, and any gap."""
        counts = f"{self.new} new answers, {self.known} already known"
        if self.lost_from is not None:
            # Only ids pulled before and no longer held are named: an id gap was never an answer.
            kept = ("every answer pulled from it is still there or kept in the warehouse" if not self.missing else
                    f"event {self.missing[0]} is kept in the warehouse" if len(self.missing) == 1 else
                    f"events {id_ranges(self.missing)} are kept in the warehouse")
            if self.held_up_to == 0:
                held = (f"holds none of the events up to {self.pulled_up_to} pulled from it (epoch {self.lost_from}): it was "
                        f"emptied or restored from an older backup; everything pulled from it is kept in the warehouse")
            elif all(i > self.held_up_to for i in self.missing):
                held = (f"holds events up to {self.held_up_to} but {self.pulled_up_to} were pulled from it (epoch "
                        f"{self.lost_from}): it was restored from an older backup; {kept}")
            else:
                held = (f"holds events up to {self.held_up_to} but not {len(self.missing)} of the events up to "
                        f"{self.pulled_up_to} pulled from it (epoch {self.lost_from}): it was restored from an older "
                        f"backup or edited; {kept}")
            text = f"the survey store {held}; its new epoch {self.epoch}: {counts}"
        elif self.first:
            text = f"first pull from the survey store (epoch {self.epoch}): {counts}"
        elif self.after == 0 and self.origin == "upgraded":
            text = f"the survey store got its epoch {self.epoch} on upgrade: {counts}"
        elif self.after == 0:
            text = f"survey store replaced since the last pull (epoch {self.epoch} new): {counts}"
        elif self.previous is not None and self.previous != self.epoch:
            text = (f"the survey store is epoch {self.epoch} again (the last pull was from {self.previous}): "
                    f"{counts} after event {self.after}")
        else:
            text = f"survey store epoch {self.epoch}: {counts} after event {self.after}"
        return text + (f"; {self.opt_outs} new opt-outs" if self.opt_outs else "")


def epoch_row(identity: dict[str, Any], read: pl.DataFrame, found: PullFound, epochs: pl.DataFrame,
              mark_digest: str | None, now: datetime, run_id: str) -> pl.DataFrame:
    """The ``survey_epochs`` row of the epoch just pulled (``identity``: the store's, as read with
    the events ``read``): its high-water mark moves to the newest event read (it stays where it was,
    with ``mark_digest``, when nothing was read), and its first pull time stays as ``epochs`` has it."""
    top = read.sort("event_id").tail(1)
    seen = epochs.filter(pl.col("epoch") == found.epoch)
    created = identity["created_at"]
    return SURVEY_EPOCHS.conform(pl.DataFrame([{
        "epoch": found.epoch, "high_water": int(top["event_id"][0]) if top.height else found.after,
        "high_water_digest": top["digest"][0] if top.height else mark_digest,
        "origin": identity["origin"], "renewed_from": identity["renewed_from"],
        "store_created_at": datetime.fromisoformat(str(created)) if created else None,
        "first_pulled_at": seen["first_pulled_at"][0] if seen.height else now, "last_pulled_at": now,
        "new_events": found.new, "known_events": found.known, "summary": found.line(), "run_id": run_id}]))


def resolve_events(events: pl.DataFrame, invitations: pl.DataFrame) -> pl.DataFrame:
    """Give every event its reviewer and disposition.

    ``events``: ``event_id, invitation_id, paper_id, rating, skipped, source, created_at`` (and
    ``epoch``, ``digest``, passed through); ``invitations``: ``invitation_id, reviewer_id, round,
    paper_ids``. Per reviewer and paper the latest event (by time, then id: ids restart in every
    epoch) is the answer that counts (``latest``, or ``skip`` when it was a skip); earlier ones
    are ``superseded``. Events of an invitation the warehouse does not know, about a paper their
    invitation did not ask about, or with a rating outside 1-5, get that reason and count for
    nothing."""
    inv = invitations.select("invitation_id", "reviewer_id", "paper_ids")
    ev = events.join(inv, on="invitation_id", how="left")
    ev = ev.with_columns(
        pl.when(pl.col("reviewer_id").is_null()).then(pl.lit("unknown_invitation"))
        .when(~pl.col("paper_ids").list.contains(pl.col("paper_id"))).then(pl.lit("unknown_paper"))
        .when(pl.col("skipped").is_null() | (~pl.col("skipped") & ~pl.col("rating").is_between(1, 5).fill_null(False)))
        .then(pl.lit("invalid_rating"))
        .otherwise(pl.lit(None, dtype=pl.Utf8)).alias("reject"))
    valid = pl.col("reject").is_null()
    order = ["created_at", *(["epoch"] if "epoch" in ev.columns else []), "event_id"]
    ev = ev.sort(order).with_row_index("_order")
    last = pl.when(valid).then(pl.col("_order")).max().over("reviewer_id", "paper_id")  # a reject supersedes nothing
    ev = ev.with_columns(
        pl.when(~valid).then(pl.col("reject"))
        .when(pl.col("_order") != last).then(pl.lit("superseded"))
        .when(pl.col("skipped")).then(pl.lit("skip"))
        .otherwise(pl.lit("latest")).alias("disposition"))
    return ev.drop("paper_ids", "reject", "_order")


def latest_ratings(resolved: pl.DataFrame, invitations: pl.DataFrame, categories: pl.DataFrame) -> pl.DataFrame:
    """One row per reviewer and paper whose latest answer is a rating (a skip is not a rating),
    with how many answers the pair had; status ``kept`` until flags say otherwise."""
    valid = resolved.filter(~pl.col("disposition").is_in(list(EVENT_REJECTS)))
    n = valid.group_by("reviewer_id", "paper_id").agg(pl.len().alias("n_events"))
    latest = valid.filter(pl.col("disposition") == "latest")
    out = (latest.join(n, on=["reviewer_id", "paper_id"])
           .join(invitations.select("invitation_id", "round"), on="invitation_id")
           .join(categories, on="paper_id", how="left")
           .select("reviewer_id", "paper_id", "rating", "invitation_id", "round", "category", "event_id",
                   *(["epoch"] if "epoch" in latest.columns else []), pl.col("created_at").alias("rated_at"), "n_events",
                   pl.lit("kept").alias("status"), pl.lit([], dtype=pl.List(pl.Utf8)).alias("flags")))
    return RATINGS.conform(out).sort("reviewer_id", "paper_id")


def _hash(evidence: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(evidence, sort_keys=True).encode()).hexdigest()[:16]


def _flag(rule: str, subject: str, reviewer: str, invitation: str | None, papers: list[str],
          evidence: dict[str, Any]) -> dict[str, Any]:
    key = reviewer if subject == "annotator" else invitation
    return {"flag_id": f"{rule}:{key}", "rule": rule, "subject": subject, "reviewer_id": reviewer,
            "invitation_id": invitation, "paper_ids": sorted(papers), "evidence": json.dumps(evidence, sort_keys=True),
            "evidence_hash": _hash(evidence)}


FLAG_SCHEMA = {"flag_id": pl.Utf8, "rule": pl.Utf8, "subject": pl.Utf8, "reviewer_id": pl.Utf8, "invitation_id": pl.Utf8,
               "paper_ids": pl.List(pl.Utf8), "evidence": pl.Utf8, "evidence_hash": pl.Utf8}


def near_zero_variance(ratings: pl.DataFrame, cfg: RatingsSettings) -> list[dict[str, Any]]:
    """Annotators with at least ``variance_min_ratings`` ratings whose population variance
    ``sum((x - mean)^2) / n`` is at most ``variance_max``."""
    out = []
    for (reviewer,), g in ratings.sort("paper_id").group_by(["reviewer_id"], maintain_order=True):
        if g.height < cfg.variance_min_ratings:
            continue
        x = g["rating"].to_numpy().astype(float)
        var = float(np.var(x))
        if var <= cfg.variance_max:
            out.append(_flag("near_zero_variance", "annotator", reviewer, None, g["paper_id"].to_list(),
                             {"n": g.height, "variance": round(var, 6), "ratings": dict(g.select("paper_id", "rating").iter_rows())}))
    return out


def straight_lining(ratings: pl.DataFrame, cfg: RatingsSettings) -> list[dict[str, Any]]:
    """Invitations with at least ``straight_line_min_papers`` rated papers, all with one value."""
    out = []
    for (inv,), g in ratings.sort("paper_id").group_by(["invitation_id"], maintain_order=True):
        if g.height >= cfg.straight_line_min_papers and g["rating"].n_unique() == 1:
            out.append(_flag("straight_lining", "invitation", g["reviewer_id"][0], inv, g["paper_id"].to_list(),
                             {"n": g.height, "value": int(g["rating"][0])}))
    return out


def content_insensitive(ratings: pl.DataFrame, similarity: pl.DataFrame, cfg: RatingsSettings) -> list[dict[str, Any]]:
    """Annotators whose ratings do not follow the pool evidence: over at least
    ``content_min_items`` ratings with a similarity, Spearman's rho of rating vs similarity is at
    most ``content_max_rho``, or every rating sits at one extreme (all 1 or all 5) while the
    similarities span at least ``content_min_spread``."""
    from scipy.stats import spearmanr

    joined = ratings.join(similarity, on=["reviewer_id", "paper_id"], how="inner").sort("paper_id")
    out = []
    for (reviewer,), g in joined.group_by(["reviewer_id"], maintain_order=True):
        if g.height < cfg.content_min_items:
            continue
        r = g["rating"].to_numpy().astype(float)
        s = g["similarity"].to_numpy().astype(float)
        spread = float(s.max() - s.min())
        rho = float(spearmanr(r, s).statistic) if np.unique(r).size > 1 and np.unique(s).size > 1 else math.nan
        extreme = bool(np.all(r == 1) or np.all(r == 5)) and spread >= cfg.content_min_spread
        if extreme or (not math.isnan(rho) and rho <= cfg.content_max_rho):
            out.append(_flag("content_insensitive", "annotator", reviewer, None, g["paper_id"].to_list(), {
                "n": g.height, "rho": None if math.isnan(rho) else round(rho, 4), "similarity_spread": round(spread, 4),
                "all_extreme": extreme}))
    return out


def bursts(ratings: pl.DataFrame, resolved: pl.DataFrame, cfg: RatingsSettings) -> list[dict[str, Any]]:
    """Invitations whose papers were rated too fast: the first one-click rating of each paper
    (a form submit carries one time for all its answers, so it says nothing of pace); flagged
    when ``burst_min_papers`` of them fall within ``burst_window_seconds``, or when, over at least
    that many papers, the mean time per paper ``(last - first) / (n - 1)`` is under
    ``min_seconds_per_paper``."""
    clicks = (resolved.filter((pl.col("source") == "click") & pl.col("rating").is_not_null()
                              & pl.col("disposition").is_in(["latest", "superseded", "skip"]))
              .group_by("invitation_id", "paper_id").agg(pl.col("created_at").min().alias("t"))
              .join(ratings.select("invitation_id", "paper_id", "reviewer_id"), on=["invitation_id", "paper_id"])
              .sort("invitation_id", "t", "paper_id"))
    out = []
    k = cfg.burst_min_papers
    for (inv,), g in clicks.group_by(["invitation_id"], maintain_order=True):
        if g.height < k:
            continue
        t = np.array([x.timestamp() for x in g["t"].to_list()])
        in_window = int(max(np.searchsorted(t, t[i] + cfg.burst_window_seconds, side="right") - i for i in range(t.size)))
        per_paper = float((t[-1] - t[0]) / (t.size - 1))
        if in_window >= k or per_paper < cfg.min_seconds_per_paper:
            out.append(_flag("burst", "invitation", g["reviewer_id"][0], inv, g["paper_id"].to_list(), {
                "papers": g.height, "span_seconds": round(float(t[-1] - t[0]), 3),
                "seconds_per_paper": round(per_paper, 3), "max_in_window": in_window}))
    return out


def find_flags(ratings: pl.DataFrame, resolved: pl.DataFrame, similarity: pl.DataFrame, cfg: RatingsSettings) -> pl.DataFrame:
    """Every rule over the current ratings; one row per flag with its evidence and its hash."""
    rows = (near_zero_variance(ratings, cfg) + straight_lining(ratings, cfg)
            + content_insensitive(ratings, similarity, cfg) + bursts(ratings, resolved, cfg))
    return pl.DataFrame(rows, schema=FLAG_SCHEMA).sort("flag_id") if rows else pl.DataFrame(schema=FLAG_SCHEMA)


def flag_rows(flags: pl.DataFrame, known: pl.DataFrame, run_id: str, now: datetime) -> pl.DataFrame:
    """``rating_flags`` rows: every flag firing now (active, first flagged when its evidence was
    first seen, else ``now``) and the flags on record that no longer fire, marked inactive."""
    gone = known.filter(~pl.col("flag_id").is_in(flags["flag_id"].implode()) & pl.col("active"))
    rows = flags.join(known.select("flag_id", "evidence_hash", "flagged_at"), on=["flag_id", "evidence_hash"], how="left")
    rows = rows.with_columns(pl.lit(True).alias("active"), pl.lit(run_id).alias("run_id"), pl.col("flagged_at").fill_null(now))
    return pl.concat([RATING_FLAGS.conform(rows), gone.with_columns(pl.lit(False).alias("active"))])


def flag_list(flags: pl.DataFrame, decisions: pl.DataFrame) -> list[dict[str, Any]]:
    """Each flag with its evidence (parsed) and the decision on it, if any, and who made it."""
    rows = flags.join(decisions.select("flag_id", "evidence_hash", "decision", "decided_by"),
                      on=["flag_id", "evidence_hash"], how="left")
    return [{k: (json.loads(v) if k == "evidence" else v) for k, v in r.items()} for r in rows.to_dicts()]


def undecided(flags: pl.DataFrame, decisions: pl.DataFrame) -> pl.DataFrame:
    """Flags with no decision on their current evidence (a decision on older evidence does not count)."""
    return flags.join(decisions.select("flag_id", "evidence_hash"), on=["flag_id", "evidence_hash"], how="anti")


def apply_decisions(ratings: pl.DataFrame, flags: pl.DataFrame, decisions: pl.DataFrame) -> pl.DataFrame:
    """Each rating's status from the flags on it: ``dropped`` when a decision on any of them
    says drop, ``pending`` while any is undecided, else ``kept``; ``flags`` lists them."""
    decided = flags.join(decisions.select("flag_id", "evidence_hash", "decision"), on=["flag_id", "evidence_hash"], how="left")
    per_rating = (decided.explode("paper_ids").rename({"paper_ids": "paper_id"})
                  .group_by("reviewer_id", "paper_id")
                  .agg(pl.col("flag_id").sort().alias("on"),
                       (pl.col("decision") == "drop").any().alias("drop"),
                       pl.col("decision").is_null().any().alias("open")))
    out = ratings.drop("flags", "status").join(per_rating, on=["reviewer_id", "paper_id"], how="left")
    out = out.with_columns(
        pl.when(pl.col("drop").fill_null(False)).then(pl.lit("dropped"))
        .when(pl.col("open").fill_null(False)).then(pl.lit("pending"))
        .otherwise(pl.lit("kept")).alias("status"),
        pl.col("on").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))).alias("flags"))
    return RATINGS.conform(out).sort("reviewer_id", "paper_id")


def tuples(ratings: pl.DataFrame) -> pl.DataFrame:
    """Paper-centric (p, r+, r-) and reviewer-centric (r, p+, p-) tuples of the kept ratings:
    every two ratings of one paper (or by one reviewer) that differ, the higher one positive,
    ties dropped; ``gap = rating_pos - rating_neg``; sorted by kind, anchor, positive, negative."""
    kept = ratings.filter(pl.col("status") == "kept").select("reviewer_id", "paper_id", "rating")
    out = pl.concat([rating_pairs(kept, "paper_centric"), rating_pairs(kept, "reviewer_centric")]).with_columns(
        (pl.col("rating_pos") - pl.col("rating_neg")).alias("gap"))
    return RATING_TUPLES.conform(out).sort("kind", "anchor_id", "positive_id", "negative_id")


def rating_pairs(ratings: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``kind, anchor_id, positive_id, negative_id, rating_pos, rating_neg`` of pointwise ratings
    (``reviewer_id, paper_id, rating``, any scale): every two ratings of one paper
    (``paper_centric``) or by one reviewer (``reviewer_centric``) that differ, the higher one positive."""
    anchor, item = ("paper_id", "reviewer_id") if kind == "paper_centric" else ("reviewer_id", "paper_id")
    r = ratings.select(anchor, item, "rating")
    j = r.join(r, on=anchor, suffix="_b").filter(pl.col("rating") > pl.col("rating_b"))
    return j.select(pl.lit(kind).alias("kind"), pl.col(anchor).alias("anchor_id"), pl.col(item).alias("positive_id"),
                    pl.col(f"{item}_b").alias("negative_id"), pl.col("rating").alias("rating_pos"),
                    pl.col("rating_b").alias("rating_neg"))


@dataclass(frozen=True)
class Outcome:
    """Events by what became of them, ratings by status and tuples by kind."""

    duplicates: int
    skips: int
    unknown_invitation: int
    unknown_paper: int
    invalid_rating: int
    ratings: int
    kept: int
    dropped: int
    pending: int
    paper_centric_tuples: int
    reviewer_centric_tuples: int


def outcome(by_disposition: dict[str, int], ratings: pl.DataFrame, tuples: pl.DataFrame) -> Outcome:
    """The counts of :class:`Outcome` (``by_disposition``: see :func:`dispositions`)."""
    status = dict(ratings.group_by("status").len().iter_rows())
    kinds = dict(tuples.group_by("kind").len().iter_rows())
    return Outcome(duplicates=by_disposition.get("superseded", 0), skips=by_disposition.get("skip", 0),
                   unknown_invitation=by_disposition.get("unknown_invitation", 0),
                   unknown_paper=by_disposition.get("unknown_paper", 0),
                   invalid_rating=by_disposition.get("invalid_rating", 0), ratings=ratings.height,
                   kept=status.get("kept", 0), dropped=status.get("dropped", 0), pending=status.get("pending", 0),
                   paper_centric_tuples=kinds.get("paper_centric", 0),
                   reviewer_centric_tuples=kinds.get("reviewer_centric", 0))
