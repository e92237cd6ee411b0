"""Versioned migrations, derived from the ``since`` markers on tables and columns.

Migration N creates every table declared with ``since == N`` and adds every column declared
with ``since == N`` to older tables; ``EXTRA_SQL`` holds hand-written steps (renames, backfills)
that a declaration cannot express.
"""

from __future__ import annotations

from dataclasses import dataclass

from revbench.schemas.tables import ALL_TABLES, TABLES
from revbench.warehouse.ddl import add_column_sql, create_table_sql, rebuild_table_sql

DESCRIPTIONS: dict[int, str] = {
    1: "initial tables: runs, crawl, s2, documents, papers, mentions, rejects",
    2: "eval_results: metrics by benchmark version, split, scorer",
    3: "author disambiguation: author_links, author_blocks, authors, coauthor_edges, llm_decisions",
    4: "pools: query_samples, pool_evidence, pool_exclusions, assignments, invitations, s2_author_papers",
    5: "eval_results.spec: the full scorer spec (or predictions file) behind each row",
    6: "append-only eval_results keyed by run (predictions hash, coverage); pool round revisions; "
       "papers whose service was unreachable are pending, not rejected",
    7: "survey: invitations, messages with their sending state, approvals, opt-outs",
    8: "ratings: survey events with their disposition, ratings, quality flags, curator decisions, tuples",
    9: "releases: each release built and the curator's decision to publish it",
    10: "refresh_stages: what each refresh did with each stage, and why",
    11: "training: paper_keywords (with the prompt version) and keyword_profiles",
    12: "integrity: survey store epochs and answer digests, unconfirmed messages with their server, "
        "release supersession and manifest digests",
    13: "real inputs: every affiliation and ORCID of a mention, orphan affiliations, journal_ref and doi of a "
        "paper, arXiv's author affiliations",
    14: "every email of a mention (GROBID writes several per author), in documents and mentions",
    15: "the scholarly graph: citations, paper_topics, institutions, author_affiliations, graph_fetches; "
        "pool_exclusions.evidence (what an institution conflict rests on)",
    16: "the graph, continued: pool_evidence.path and assignments.path (citation recall: semantic, citation or "
        "both); paper_authorships (OpenAlex authorships with author ids and ORCIDs, disambiguation's evidence), "
        "papers whose OpenAlex affiliations were fetched before asked again to fill it; "
        "graph_fetches.source_paper_id (each paper's own OpenAlex work id and S2 paperId, kept for later runs)",
    17: "citations.match_keys: the keys each reference was resolved by, so a day-later run re-resolves only the "
        "unresolved references a new paper can answer",
    18: "eval_results.ties and eval_results.basis: the share of compared pairs a scorer tied, and what a row stands on "
        "(cof's fusion unit)",
    19: "institutions.aliases, institutions.lineage and institutions.related: the names, parents and ROR "
        "successors and predecessors a conflict of interest meets one institution by",
    20: "eval_results.baseline: what a paired difference is a difference to, so that a scorer whose own name holds "
        "' - ' is not taken for one (older rows: the name read as before)",
    21: "citations without an index of its key: every writer keeps the key (a paper's list is replaced whole), and "
        "the index made a day later's rewrite of a share of millions of references several times slower",
}

EXTRA_SQL: dict[int, list[str]] = {
    6: ["DELETE FROM rejects WHERE reason = 'fetch_failed'"],
    # Results of a release evaluated since its current build belong to that build's manifest;
    # older ones were of a build that --replace moved aside, and stay unattached.
    12: ["""UPDATE eval_results SET benchmark_digest = r.manifest_sha256 FROM releases r
            WHERE eval_results.benchmark = 'release' AND r.version = eval_results.benchmark_version
              AND eval_results.evaluated_at >= r.built_at AND eval_results.benchmark_digest IS NULL""",
         # Each published release is superseded by the next one published after it by build.
         """UPDATE releases SET superseded_by = (
                SELECT n.version FROM releases n WHERE n.status = 'published' AND n.built_at > releases.built_at
                ORDER BY n.built_at, n.version LIMIT 1)
            WHERE status = 'published' AND superseded_by IS NULL"""],
    # Rounds before citation recall had one path: their candidates were found by similarity.
    # Papers whose OpenAlex affiliations were fetched before paper_authorships existed are asked
    # again once, so their authorships (disambiguation's ids) are filled in.
    16: ["UPDATE pool_evidence SET path = 'semantic' WHERE path IS NULL",
         "UPDATE assignments SET path = 'semantic' WHERE path IS NULL",
         "DELETE FROM graph_fetches WHERE source = 'openalex' AND kind = 'affiliations'"],
}
REBUILD: dict[int, tuple[str, ...]] = {
    6: ("eval_results", "query_samples", "pool_evidence", "pool_exclusions", "assignments", "invitations"),
    12: ("survey_events",),  # keyed by (epoch, event_id); rows pulled before get the 'legacy' epoch
    13: ("documents",),  # pdf_authors items gain affiliations and orcid (null in rows extracted before)
    14: ("documents",),  # pdf_authors items gain emails (null in rows extracted before)
    20: ("eval_results",),  # baseline filled from its backfill (older rows' difference read off the scorer's name)
    21: ("citations",),  # its key no longer an index (Table.key_unindexed_since)
}
"""Tables whose key changed in a version, or whose new column is filled from its ``backfill``:
rebuilt from their declaration, rows kept."""


@dataclass(frozen=True)
class Migration:
    """The statements that bring a warehouse from ``version - 1`` to ``version``."""

    version: int
    description: str
    statements: tuple[str, ...]


def migrations() -> list[Migration]:
    """All migrations in order."""
    versions = sorted(
        {t.since for t in ALL_TABLES} | {c.since for t in ALL_TABLES for c in t.columns} | set(EXTRA_SQL) | set(REBUILD)
    )
    out: list[Migration] = []
    for v in versions:
        stmts: list[str] = []
        for table in ALL_TABLES:
            if table.since == v:
                stmts.append(create_table_sql(table, version=v))
            elif table.since < v:
                stmts.extend(add_column_sql(table, c) for c in table.columns if c.since == v)
        stmts.extend(EXTRA_SQL.get(v, []))
        for name in REBUILD.get(v, ()):
            stmts.extend(rebuild_table_sql(TABLES[name], version=v))
        out.append(Migration(v, DESCRIPTIONS.get(v, f"schema version {v}"), tuple(stmts)))
    return out


LATEST_VERSION = max(m.version for m in migrations())
