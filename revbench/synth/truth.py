"""A SYNTHETIC world's hidden truth, and every check of the pipeline against it.

``load_truth`` is the one reader of ``<world>/truth/``. The checks take what the pipeline
produced as frames (the caller reads them from the warehouse) and judge it by the truth, never
by the pipeline's own view: disambiguation quality, the conflict-of-interest audit of
invitations, and the ratings flags against the simulated survey panel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from revbench.evaluation.metrics.clustering import pairwise_scores


@dataclass(frozen=True)
class WorldTruth:
    """What the generator knows and the services never show."""

    mentions: pl.DataFrame
    """``arxiv_id, position, person_id``: who each author mention really is."""
    persons: pl.DataFrame
    """``person_id, name, institution, emails, s2_author_ids, expertise``."""
    paper_topics: dict[str, str]
    """arXiv id -> ``category/subtopic``."""
    bad_records: pl.DataFrame
    """``arxiv_id, kind, expected_reason``: planted bad records and the reject each must become."""
    planted_conflicts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(
        schema={"query_id": pl.Utf8, "person_id": pl.Utf8, "kind": pl.Utf8, "detail": pl.Utf8}))
    """``query_id, person_id, kind, detail``: conflicts of interest planted for the COI check to
    catch (``second_affiliation``: one that only a second affiliation reveals)."""
    graph_conflicts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema={
        "query_id": pl.Utf8, "person_id": pl.Utf8, "kind": pl.Utf8, "detail": pl.Utf8, "author_id": pl.Utf8,
        "ror": pl.Utf8, "last_year": pl.Int64}))
    """``query_id, person_id, kind, detail, author_id, ror, last_year``: conflicts only the graph
    reveals (``graph_institution``: the person was at the query author ``author_id``'s institution,
    ROR id ``ror``, until ``last_year``, under another spelling of it). Kept apart from
    ``planted_conflicts`` (audited by ``graph_conflicts_caught``), so the audits before the graph
    stay comparable."""
    works: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema={
        "work_id": pl.Utf8, "arxiv_id": pl.Utf8, "topic": pl.Utf8, "focus": pl.List(pl.Utf8), "authors": pl.List(pl.Utf8),
        "year": pl.Int64}))
    """``work_id, arxiv_id, topic, focus, authors, year``: every work (the papers, whose ``work_id`` is
    their arXiv id, and the people's older works, with none), what it is about and who wrote it;
    who knows what is read from it (:mod:`revbench.synth.expertise`)."""


def load_truth(world_dir: Path) -> WorldTruth:
    """Read a world's ``truth/`` folder."""
    d = world_dir / "truth"
    if not d.is_dir():
        raise FileNotFoundError(f"{world_dir} has no truth/ folder: not a revbench SYNTHETIC world")
    return WorldTruth(
        mentions=pl.read_parquet(d / "mentions.parquet"),
        persons=pl.read_parquet(d / "persons.parquet"),
        paper_topics=dict(pl.read_parquet(d / "paper_topics.parquet").iter_rows()),
        bad_records=pl.read_parquet(d / "bad_records.parquet"),
        **({"planted_conflicts": pl.read_parquet(d / "planted_conflicts.parquet")}
           if (d / "planted_conflicts.parquet").exists() else {}),
        **({"graph_conflicts": pl.read_parquet(d / "graph_conflicts.parquet")}
           if (d / "graph_conflicts.parquet").exists() else {}),
        **({"works": pl.read_parquet(d / "works.parquet")} if (d / "works.parquet").exists() else {}),
    )


def person_of_mention(truth: WorldTruth) -> dict[str, str]:
    """``"<arxiv_id>:<position>"`` -> true person id (the key disambiguation uses)."""
    return {f"{a}:{p}": t for a, p, t in truth.mentions.select("arxiv_id", "position", "person_id").iter_rows()}


def disambiguation_quality(truth: WorldTruth, links: pl.DataFrame) -> dict[str, float]:
    """Pairwise and B-cubed scores of ``author_links`` (``arxiv_id, position, author_id``)."""
    pred = {f"{a}:{p}": c for a, p, c in links.select("arxiv_id", "position", "author_id").iter_rows()}
    return pairwise_scores(pred, person_of_mention(truth))


def coi_violations(truth: WorldTruth, assignments: pl.DataFrame, links: pl.DataFrame) -> int:
    """Invitations (``query_id, author_id``) whose real person wrote the query paper, co-wrote
    any paper with one of its real authors, or is a planted conflict of that query; ``links``
    maps mentions to our author ids."""
    person_of_author = links.join(truth.mentions, on=["arxiv_id", "position"]).select("author_id", "person_id").unique()
    writers = truth.mentions.select("arxiv_id", "person_id")
    coauthors = writers.join(writers, on="arxiv_id").select(pl.col("person_id").alias("a"), pl.col("person_id_right").alias("b")).unique()
    invited = assignments.join(person_of_author, on="author_id").select("query_id", "person_id")
    pairs = invited.join(writers.rename({"arxiv_id": "query_id", "person_id": "qp"}), on="query_id")
    bad = pairs.join(coauthors, left_on=["person_id", "qp"], right_on=["a", "b"], how="semi").select("query_id", "person_id")
    planted = invited.join(truth.planted_conflicts.select("query_id", "person_id"), on=["query_id", "person_id"], how="semi")
    return pl.concat([bad, planted]).unique().height


def planted_conflicts_caught(truth: WorldTruth, evidence: pl.DataFrame, exclusions: pl.DataFrame,
                             assignments: pl.DataFrame, links: pl.DataFrame) -> list[dict[str, Any]]:
    """Each planted conflict: whether pools recalled the person as a candidate of its query
    (``evidence``: ``query_id, author_id``, and the recall ``paths`` of its rows when it has them),
    the exclusion reasons they met, and whether they were invited all the same (caught: recalled,
    excluded, never invited)."""
    return _caught(truth, truth.planted_conflicts, evidence, exclusions, assignments, links)


def graph_conflicts_caught(truth: WorldTruth, evidence: pl.DataFrame, exclusions: pl.DataFrame,
                           assignments: pl.DataFrame, links: pl.DataFrame) -> list[dict[str, Any]]:
    """``planted_conflicts_caught`` for the conflicts only the graph reveals (``graph_conflicts``),
    reported apart so the planted conflicts' numbers stay comparable with audits before the graph."""
    return _caught(truth, truth.graph_conflicts, evidence, exclusions, assignments, links)


def _caught(truth: WorldTruth, conflicts: pl.DataFrame, evidence: pl.DataFrame, exclusions: pl.DataFrame,
            assignments: pl.DataFrame, links: pl.DataFrame) -> list[dict[str, Any]]:
    person_of_author = links.join(truth.mentions, on=["arxiv_id", "position"]).select("author_id", "person_id").unique()
    out = []
    for q, person, kind, detail in conflicts.select("query_id", "person_id", "kind", "detail").iter_rows():
        ids = set(person_of_author.filter(pl.col("person_id") == person)["author_id"].to_list())
        found = evidence.filter((pl.col("query_id") == q) & pl.col("author_id").is_in(ids))
        recalled = found.height > 0
        reasons = sorted(set(exclusions.filter((pl.col("query_id") == q) & pl.col("author_id").is_in(ids))["reason"].to_list()))
        invited = assignments.filter((pl.col("query_id") == q) & pl.col("author_id").is_in(ids)).height > 0
        out.append({"query_id": q, "person_id": person, "kind": kind, "detail": detail, "recalled": recalled,
                    "paths": sorted(set(found["path"].to_list())) if "path" in found.columns else [],
                    "reasons": reasons, "invited": invited, "caught": recalled and bool(reasons) and not invited})
    return out


def flag_quality(respondents: pl.DataFrame, flagged_emails: set[str], rated_emails: set[str]) -> dict[str, Any]:
    """Precision and recall of the ratings flags against the SYNTHETIC panel's planted low-effort
    respondents (``respondents.parquet``: ``email, low_effort``): a respondent counts as flagged
    when any flag names one of their ratings; the planted ones are those who left ratings."""
    planted = {e.lower() for e, low in respondents.select("email", "low_effort").iter_rows() if low} & rated_emails
    flagged = {e.lower() for e in flagged_emails}
    hit = len(planted & flagged)
    return {"flagged": len(flagged), "planted": len(planted), "caught": hit,
            "precision": hit / len(flagged) if flagged else 1.0, "recall": hit / len(planted) if planted else 1.0,
            "false_alarms": sorted(flagged - planted), "missed": sorted(planted - flagged)}
