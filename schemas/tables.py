"""Every warehouse table, declared once."""

from __future__ import annotations

import polars as pl

from revbench.schemas.graph import GRAPH_TABLES, PAPER_AUTHORSHIPS
from revbench.schemas.model import ARXIV_ID_PATTERN, Column, Table
from revbench.stages import STAGE_NAMES

DOCUMENT_STATUSES: tuple[str, ...] = (
    "ok",
    "pdf_unavailable",
    "pdf_not_pdf",
    "pdf_too_large",
    "pdf_truncated",
    "grobid_failed",
    "grobid_invalid_tei",
    "fetch_failed",
)
"""Outcome of fetching and extracting one paper version; all but ``fetch_failed`` are final."""

RECONCILE_REASONS: tuple[str, ...] = (
    "missing_title",
    "missing_abstract",
    "missing_authors",
    "title_mismatch",
    "corrupted_text",
)

TRANSIENT_DOCUMENT_STATUSES: tuple[str, ...] = ("fetch_failed",)
"""Statuses that mean our side could not reach a service: the paper stays pending, never rejected."""

REJECT_REASONS: tuple[str, ...] = (
    tuple(s for s in DOCUMENT_STATUSES if s != "ok" and s not in TRANSIENT_DOCUMENT_STATUSES) + RECONCILE_REASONS
)
"""Named reasons a paper is not loaded; every drop is one row in ``rejects`` with one of these."""

_TS = pl.Datetime("us", "UTC")
AFFILIATION = pl.Struct({"department": pl.Utf8, "institution": pl.Utf8, "country": pl.Utf8, "text": pl.Utf8})
"""One affiliation as GROBID structures it; ``text`` is all of it as one string."""
PDF_AUTHOR = pl.Struct(
    {
        "forename": pl.Utf8,
        "surname": pl.Utf8,
        "email": pl.Utf8,
        "department": pl.Utf8,
        "institution": pl.Utf8,
        "affiliation": pl.Utf8,
        # Since 13 (documents is rebuilt then; the older rows get these as null).
        "affiliations": pl.List(AFFILIATION),
        "orcid": pl.Utf8,
        # Since 14 (documents is rebuilt again; older rows get null): every <email>, ``email`` the first.
        "emails": pl.List(pl.Utf8),
    }
)
S2_AUTHOR = pl.Struct({"author_id": pl.Utf8, "name": pl.Utf8})
_ID = Column("arxiv_id", pl.Utf8, nullable=False, pattern=ARXIV_ID_PATTERN, doc="arXiv id without version")

SCHEMA_VERSION_TABLE = Table(
    name="schema_version",
    columns=(
        Column("version", pl.Int64, nullable=False),
        Column("applied_at", _TS, nullable=False),
        Column("description", pl.Utf8),
    ),
    primary_key=("version",),
    doc="Migrations applied to this warehouse.",
)

RUNS = Table(
    name="runs",
    columns=(
        Column("run_id", pl.Utf8, nullable=False, doc="Prefect flow run id (or a local uuid)"),
        Column("flow", pl.Utf8, nullable=False),
        Column("status", pl.Utf8, nullable=False,
               allowed=("running", "waiting", "completed", "failed", "cancelled", "crashed", "paused-expired")),
        Column("started_at", _TS, nullable=False),
        Column("finished_at", _TS),
        Column("parameters", pl.Utf8, doc="JSON of the flow parameters (never secrets)"),
        Column("code_version", pl.Utf8),
        Column("error", pl.Utf8),
    ),
    primary_key=("run_id",),
    doc="One row per flow run.",
)

RUN_STAGES = Table(
    name="run_stages",
    columns=(
        Column("run_id", pl.Utf8, nullable=False),
        Column("stage", pl.Utf8, nullable=False),
        Column("rows_in", pl.Int64, nullable=False, min_value=0),
        Column("rows_out", pl.Int64, nullable=False, min_value=0),
        Column("rejected", pl.Int64, nullable=False, min_value=0),
        Column("seconds", pl.Float64),
    ),
    primary_key=("run_id", "stage"),
    doc="Rows in and out of each stage of a run.",
)

CRAWL_SLICES = Table(
    name="crawl_slices",
    columns=(
        Column("category", pl.Utf8, nullable=False),
        Column("slice_start", _TS, nullable=False),
        Column("slice_end", _TS, nullable=False),
        Column("n_results", pl.Int64, nullable=False, min_value=0),
        Column("completed_at", _TS, nullable=False),
        Column("run_id", pl.Utf8),
    ),
    primary_key=("category", "slice_start", "slice_end"),
    doc="Closed arXiv query slices already crawled; a re-run skips them.",
)

ARXIV_RECORDS = Table(
    name="arxiv_records",
    columns=(
        _ID,
        Column("version", pl.Int64, nullable=False, min_value=1),
        Column("title", pl.Utf8),
        Column("abstract", pl.Utf8),
        Column("authors", pl.List(pl.Utf8)),
        Column("primary_category", pl.Utf8),
        Column("categories", pl.List(pl.Utf8)),
        Column("published", _TS),
        Column("updated", _TS, nullable=False),
        Column("comment", pl.Utf8),
        Column("record_hash", pl.Utf8, nullable=False),
        Column("crawled_at", _TS, nullable=False),
        Column("journal_ref", pl.Utf8, since=13, doc="arxiv:journal_ref, as the authors gave it"),
        Column("doi", pl.Utf8, since=13, doc="arxiv:doi"),
        Column("author_affiliations", pl.List(pl.List(pl.Utf8)), since=13,
               doc="each author's arxiv:affiliation elements, parallel to authors"),
    ),
    primary_key=("arxiv_id",),
    doc="Latest version of each paper seen by the crawl.",
)

S2_PAPERS = Table(
    name="s2_papers",
    columns=(
        _ID,
        Column("found", pl.Boolean, nullable=False),
        Column("s2_paper_id", pl.Utf8),
        Column("authors", pl.List(S2_AUTHOR)),
        Column("record_hash", pl.Utf8, nullable=False),
        Column("fetched_at", _TS, nullable=False),
    ),
    primary_key=("arxiv_id",),
    doc="Semantic Scholar lookup of each paper (found = false when S2 does not know it).",
)

DOCUMENTS = Table(
    name="documents",
    columns=(
        _ID,
        Column("version", pl.Int64, nullable=False, min_value=1),
        Column("status", pl.Utf8, nullable=False, allowed=DOCUMENT_STATUSES),
        Column("detail", pl.Utf8),
        Column("attempts", pl.Int64, nullable=False, min_value=0),
        Column("pdf_sha256", pl.Utf8),
        Column("pdf_bytes", pl.Int64),
        Column("tei_sha256", pl.Utf8),
        Column("pdf_title", pl.Utf8),
        Column("pdf_abstract", pl.Utf8),
        Column("pdf_authors", pl.List(PDF_AUTHOR)),
        Column("extracted_at", _TS, nullable=False),
        Column("pdf_orphan_affiliations", pl.List(AFFILIATION), since=13,
               doc="GROBID authors with an affiliation and no name: affiliations it could not attach to anyone"),
        Column("pdf_dropped_authors", pl.List(pl.Utf8), since=13,
               doc="the reason of each nameless GROBID author left out (empty_persname, empty_author)"),
    ),
    primary_key=("arxiv_id", "version"),
    doc="PDF download and GROBID header extraction of each paper version.",
)

PAPERS = Table(
    name="papers",
    columns=(
        _ID,
        Column("version", pl.Int64, nullable=False, min_value=1),
        Column("title", pl.Utf8, nullable=False, min_length=1),
        Column("abstract", pl.Utf8, nullable=False, min_length=1),
        Column("primary_category", pl.Utf8, nullable=False, pattern=r"^[a-z\-]+(?:\.[A-Za-z\-]+)?$"),
        Column("categories", pl.List(pl.Utf8), nullable=False),
        Column("published", _TS),
        Column("updated", _TS, nullable=False),
        Column("year", pl.Int64, nullable=False, min_value=1991, max_value=2100),
        Column("s2_paper_id", pl.Utf8),
        Column("pdf_sha256", pl.Utf8, nullable=False, pattern=r"^[0-9a-f]{64}$"),
        Column("pdf_title", pl.Utf8),
        Column("title_similarity", pl.Float64, nullable=False, min_value=0, max_value=1),
        Column("n_authors", pl.Int64, nullable=False, min_value=1),
        Column("input_hash", pl.Utf8, nullable=False),
        Column("run_id", pl.Utf8),
        Column("loaded_at", _TS, nullable=False),
        Column("orphan_affiliations", pl.List(AFFILIATION), since=13,
               doc="affiliations GROBID found in the PDF without an author to attach them to"),
        Column("journal_ref", pl.Utf8, since=13, doc="arXiv's journal reference"),
        Column("doi", pl.Utf8, since=13, doc="arXiv's DOI of the published version"),
    ),
    primary_key=("arxiv_id",),
    doc="The corpus: one row per paper, latest version in the window, checked against its PDF.",
    validate=True,
)

MENTIONS = Table(
    name="mentions",
    columns=(
        _ID,
        Column("position", pl.Int64, nullable=False, min_value=0),
        Column("name", pl.Utf8, nullable=False, min_length=1, doc="author name as arXiv lists it"),
        Column("pdf_name", pl.Utf8, doc="the aligned GROBID author's name"),
        Column("email", pl.Utf8, pattern=r"^[^@\s]+@[^@\s]+$"),
        Column("affiliation", pl.Utf8, doc="the PDF's affiliation string (department, institution)"),
        Column("department", pl.Utf8),
        Column("institution", pl.Utf8),
        Column("s2_author_id", pl.Utf8),
        Column("pdf_match_score", pl.Float64, min_value=0, max_value=1),
        Column("affiliations", pl.List(AFFILIATION), since=13,
               doc="every affiliation of the aligned GROBID author, in order (affiliation/department/institution "
                   "hold the first)"),
        Column("orcid", pl.Utf8, since=13, pattern=r"^\d{4}-\d{4}-\d{4}-\d{3}[\dX]$",
               doc="the aligned GROBID author's ORCID iD, bare form"),
        Column("arxiv_affiliations", pl.List(pl.Utf8), since=13, doc="the arxiv:affiliation elements of this author"),
        Column("emails", pl.List(pl.Utf8), since=14,
               doc="every usable address of the aligned GROBID author, in order (email holds the first); "
                   "null for mentions loaded before 14"),
    ),
    primary_key=("arxiv_id", "position"),
    doc="Author mentions: one per (paper, position in arXiv's author list).",
    validate=True,
)

REJECTS = Table(
    name="rejects",
    columns=(
        _ID,
        Column("version", pl.Int64, nullable=False, min_value=1),
        Column("stage", pl.Utf8, nullable=False, allowed=("extract", "reconcile")),
        Column("reason", pl.Utf8, nullable=False, allowed=REJECT_REASONS),
        Column("detail", pl.Utf8),
        Column("input_hash", pl.Utf8, nullable=False),
        Column("run_id", pl.Utf8),
        Column("recorded_at", _TS, nullable=False),
    ),
    primary_key=("arxiv_id",),
    doc="Papers not loaded, each with its named reason; cleared when a later version loads.",
    validate=True,
)

EVAL_RESULTS = Table(
    name="eval_results",
    columns=(
        Column("benchmark", pl.Utf8, nullable=False),
        Column("benchmark_version", pl.Utf8, nullable=False),
        Column("split", pl.Utf8, nullable=False),
        Column("scorer", pl.Utf8, nullable=False),
        Column("metric", pl.Utf8, nullable=False),
        Column("value", pl.Float64),
        Column("ci_low", pl.Float64),
        Column("ci_high", pl.Float64),
        Column("n", pl.Int64, nullable=False, min_value=0),
        Column("run_id", pl.Utf8, nullable=False, backfill="'legacy-' || benchmark_version"),
        Column("evaluated_at", _TS, nullable=False),
        Column("spec", pl.Utf8, since=5, doc="what produced the scores: the scorer with every parameter, or the predictions file"),
        Column("predictions_sha256", pl.Utf8, since=6, doc="sha256 of the predictions file, when the scores came from one"),
        Column("coverage", pl.Float64, since=6, min_value=0, max_value=1,
               doc="share of the split's rated pairs the scores covered (1 unless --allow-partial)"),
        Column("benchmark_digest", pl.Utf8, since=12,
               doc="sha256 of the manifest of a release evaluated (it fixes every file's sha256): results stay attached "
                   "to the exact files, not only to the version's name"),
        Column("ties", pl.Float64, since=18, min_value=0, max_value=1,
               doc="share of the compared pairs the scorer tied (decided nothing on): a pairwise row rests on the rest"),
        Column("basis", pl.Utf8, since=18,
               doc="what the row stands on where it is not plain scores (cof: the unit its factors were fused within)"),
        # Rows stored before 20 were told apart by " - " in the scorer's name: that reading, kept for them.
        Column("baseline", pl.Utf8, since=20,
               backfill="CASE WHEN strpos(scorer, ' - ') > 0 THEN substr(scorer, strpos(scorer, ' - ') + 3) END",
               doc="for a paired difference (scorer 'bm25 - tpms'), the scorer it is a difference to; null for a "
                   "scorer's own row (whatever its name holds)"),
    ),
    primary_key=("run_id", "benchmark", "split", "scorer", "metric"),
    doc="Every metric of every scorer on every benchmark version and split, one set of rows per evaluation run "
        "(append-only: earlier runs stay queryable).",
    since=2,
)

LINK_METHODS: tuple[str, ...] = ("orcid", "email", "affiliation", "openalex", "llm", "fallback", "singleton")
"""How a mention was linked (a validation set, no database constraint: "orcid" came with 13, "openalex" with 16)."""

AUTHOR_LINKS = Table(
    name="author_links",
    columns=(
        _ID,
        Column("position", pl.Int64, nullable=False, min_value=0),
        Column("author_id", pl.Utf8, nullable=False, pattern=r"^author_[0-9a-f]{12}$"),
        Column("method", pl.Utf8, nullable=False, allowed=LINK_METHODS),
        Column("evidence", pl.Utf8),
        Column("block_key", pl.Utf8, nullable=False),
    ),
    primary_key=("arxiv_id", "position"),
    doc="Each mention's canonical author and the rule that decided it.",
    since=3,
    validate=True,
)

AUTHOR_BLOCKS = Table(
    name="author_blocks",
    columns=(
        Column("block_key", pl.Utf8, nullable=False),
        Column("input_hash", pl.Utf8, nullable=False),
        Column("n_mentions", pl.Int64, nullable=False, min_value=1),
        Column("n_authors", pl.Int64, nullable=False, min_value=1),
        Column("decider", pl.Utf8, nullable=False),
        Column("decided_at", _TS, nullable=False),
    ),
    primary_key=("block_key",),
    doc="Blocks already decided; a block whose input hash is unchanged is not decided again.",
    since=3,
)

AUTHORS = Table(
    name="authors",
    columns=(
        Column("author_id", pl.Utf8, nullable=False),
        Column("name", pl.Utf8, nullable=False),
        Column("n_mentions", pl.Int64, nullable=False, min_value=1),
        Column("n_papers", pl.Int64, nullable=False, min_value=1),
        Column("n_recent_papers", pl.Int64, nullable=False, min_value=0),
        Column("first_year", pl.Int64),
        Column("last_year", pl.Int64),
        Column("emails", pl.List(pl.Utf8)),
        Column("affiliations", pl.List(pl.Utf8)),
        Column("s2_author_ids", pl.List(pl.Utf8)),
        Column("methods", pl.List(pl.Utf8)),
    ),
    primary_key=("author_id",),
    doc="Canonical authors with their evidence and paper counts (recent: within the configured window).",
    since=3,
)

COAUTHOR_EDGES = Table(
    name="coauthor_edges",
    columns=(
        Column("author_a", pl.Utf8, nullable=False),
        Column("author_b", pl.Utf8, nullable=False),
        Column("n_papers", pl.Int64, nullable=False, min_value=1),
        Column("first_year", pl.Int64),
        Column("last_year", pl.Int64),
    ),
    primary_key=("author_a", "author_b"),
    doc="Co-authorship between canonical authors (author_a < author_b).",
    since=3,
)

LLM_DECISIONS = Table(
    name="llm_decisions",
    columns=(
        Column("block_key", pl.Utf8, nullable=False),
        Column("prompt_hash", pl.Utf8, nullable=False),
        Column("model", pl.Utf8, nullable=False),
        Column("template", pl.Utf8, nullable=False),
        Column("template_version", pl.Utf8, nullable=False),
        Column("instances", pl.Int64, nullable=False),
        Column("answer", pl.Utf8),
        Column("valid", pl.Boolean, nullable=False),
        Column("cached", pl.Boolean),
        Column("errors", pl.Utf8),
        Column("run_id", pl.Utf8),
        Column("decided_at", _TS, nullable=False),
    ),
    primary_key=("block_key", "prompt_hash"),
    doc="Every LLM clustering call: the model, prompt version and answer behind each LLM merge.",
    since=3,
)

EXCLUSION_REASONS: tuple[str, ...] = ("query_author", "coauthor", "same_institution", "same_affiliation", "screening",
                                        "unreachable")

RECALL_PATHS: tuple[str, ...] = ("semantic", "citation", "both")
"""How a candidate came into a query's pool: a neighbour paper above tau, a paper the query cites, or both."""

QUERY_SAMPLES = Table(
    name="query_samples",
    columns=(
        _ID,
        Column("round", pl.Int64, nullable=False, min_value=1),
        Column("revision", pl.Int64, nullable=False, min_value=1, since=6, backfill="1",
               doc="version of the round; replacing a round keeps the earlier one as superseded"),
        Column("seed", pl.Int64, nullable=False),
        Column("category", pl.Utf8, nullable=False),
        Column("sampled_at", _TS, nullable=False),
    ),
    primary_key=("arxiv_id", "round", "revision"),
    doc="Query papers of each sampling round, with the seed that drew them.",
    since=4,
)

POOL_EVIDENCE = Table(
    name="pool_evidence",
    columns=(
        Column("round", pl.Int64, nullable=False),
        Column("revision", pl.Int64, nullable=False, min_value=1, since=6, backfill="1",
               doc="version of the round; replacing a round keeps the earlier one as superseded"),
        Column("query_id", pl.Utf8, nullable=False),
        Column("author_id", pl.Utf8, nullable=False),
        Column("neighbor_id", pl.Utf8, nullable=False),
        Column("similarity", pl.Float64, nullable=False),
        Column("path", pl.Utf8, allowed=RECALL_PATHS, since=16,
               doc="how the neighbour paper was found: semantic (above tau), citation (the query cites it) or both"),
    ),
    primary_key=("round", "revision", "query_id", "author_id", "neighbor_id"),
    doc="Why a candidate is in a query's pool: the neighbour papers they wrote and their similarity.",
    since=4,
)

POOL_EXCLUSIONS = Table(
    name="pool_exclusions",
    columns=(
        Column("round", pl.Int64, nullable=False),
        Column("revision", pl.Int64, nullable=False, min_value=1, since=6, backfill="1",
               doc="version of the round; replacing a round keeps the earlier one as superseded"),
        Column("query_id", pl.Utf8, nullable=False),
        Column("author_id", pl.Utf8, nullable=False),
        Column("reason", pl.Utf8, nullable=False, allowed=EXCLUSION_REASONS),
        Column("detail", pl.Utf8),
        Column("evidence", pl.Utf8, since=15,
               doc="JSON of what a same_institution exclusion rests on: the institution's key and name, each "
                   "side's years there and source, the paper's year and the window; null for other reasons"),
    ),
    primary_key=("round", "revision", "query_id", "author_id"),
    doc="Candidates removed from a query's pool, with the first reason that applied.",
    since=4,
)

ASSIGNMENTS = Table(
    name="assignments",
    columns=(
        Column("round", pl.Int64, nullable=False),
        Column("revision", pl.Int64, nullable=False, min_value=1, since=6, backfill="1",
               doc="version of the round; replacing a round keeps the earlier one as superseded"),
        Column("query_id", pl.Utf8, nullable=False),
        Column("author_id", pl.Utf8, nullable=False),
        Column("score", pl.Float64, nullable=False),
        Column("rank", pl.Int64, nullable=False),
        Column("path", pl.Utf8, allowed=RECALL_PATHS, since=16,
               doc="which recall path found the candidate for this query: semantic, citation or both"),
    ),
    primary_key=("round", "revision", "query_id", "author_id"),
    doc="Which candidates are invited for which query (at most the workload cap each).",
    since=4,
)

INVITATIONS = Table(
    name="invitations",
    columns=(
        Column("round", pl.Int64, nullable=False),
        Column("revision", pl.Int64, nullable=False, min_value=1, since=6, backfill="1",
               doc="version of the round; replacing a round keeps the earlier one as superseded"),
        Column("author_id", pl.Utf8, nullable=False),
        Column("email", pl.Utf8, nullable=False),
        Column("name", pl.Utf8, nullable=False),
        Column("query_ids", pl.List(pl.Utf8), nullable=False),
    ),
    primary_key=("round", "revision", "author_id"),
    doc="One consolidated invitation per candidate, listing its query papers.",
    since=4,
)

S2_AUTHOR_PAPERS = Table(
    name="s2_author_papers",
    columns=(
        Column("s2_author_id", pl.Utf8, nullable=False),
        Column("paper_key", pl.Utf8, nullable=False),
        Column("year", pl.Int64),
        Column("arxiv_id", pl.Utf8),
        Column("fetched_at", _TS, nullable=False),
    ),
    primary_key=("s2_author_id", "paper_key"),
    doc="Publication histories fetched from Semantic Scholar for screening (an empty key marks a fetched author).",
    since=4,
)

POOL_ROUNDS = Table(
    name="pool_rounds",
    columns=(
        Column("round", pl.Int64, nullable=False, min_value=1),
        Column("revision", pl.Int64, nullable=False, min_value=1),
        Column("status", pl.Utf8, nullable=False, allowed=("current", "superseded")),
        Column("params_hash", pl.Utf8, nullable=False),
        Column("parameters", pl.Utf8, nullable=False, doc="JSON of the pool settings that built this revision"),
        Column("invitations", pl.Int64, nullable=False, min_value=0),
        Column("run_id", pl.Utf8),
        Column("created_at", _TS, nullable=False),
        Column("superseded_at", _TS),
    ),
    primary_key=("round", "revision"),
    doc="Each version of each sampling round; a round is rebuilt with other parameters only on request, "
        "and the version it replaces stays here (and in the pool tables) as superseded.",
    since=6,
)

MESSAGE_STATES: tuple[str, ...] = ("rendered", "sending", "sent", "failed", "unconfirmed")
"""A message's life: rendered -> sending -> sent, or failed (a permanent SMTP reply); a message
found 'sending' after a crash, or whose whole text reached the server without a reply coming back (a
timeout, a dropped connection), may or may not have left, so it is 'unconfirmed' and sent again only by
a command that names it (RFC 5321 §6.1: the sender must not settle that doubt by sending again)."""

SURVEY_INVITATIONS = Table(
    name="survey_invitations",
    columns=(
        Column("invitation_id", pl.Utf8, nullable=False, pattern=r"^inv_[0-9a-f]{20}$", doc="opaque id carried by the links"),
        Column("round", pl.Int64, nullable=False, min_value=1),
        Column("revision", pl.Int64, nullable=False, min_value=1),
        Column("author_id", pl.Utf8, nullable=False),
        Column("email", pl.Utf8, nullable=False),
        Column("name", pl.Utf8, nullable=False),
        Column("paper_ids", pl.List(pl.Utf8), nullable=False),
        Column("example_paper", pl.Utf8, doc="the candidate's own paper cited as why they were chosen"),
        Column("created_at", _TS, nullable=False),
    ),
    primary_key=("invitation_id",),
    doc="One survey invitation per candidate and round version; its id is what the signed links name.",
    since=7,
)

SURVEY_MESSAGES = Table(
    name="survey_messages",
    columns=(
        Column("message_id", pl.Utf8, nullable=False, doc="the stable Message-ID header"),
        Column("invitation_id", pl.Utf8, nullable=False),
        Column("kind", pl.Utf8, nullable=False, doc="invitation, or reminder-<n>"),
        Column("round", pl.Int64, nullable=False),
        Column("to_email", pl.Utf8, nullable=False),
        Column("subject", pl.Utf8, nullable=False),
        Column("text", pl.Utf8, nullable=False),
        Column("html", pl.Utf8, nullable=False),
        Column("headers", pl.Utf8, nullable=False, doc="JSON of the extra headers (Reply-To, List-Unsubscribe...)"),
        Column("template_version", pl.Utf8, nullable=False),
        Column("state", pl.Utf8, nullable=False, allowed=MESSAGE_STATES),
        Column("attempts", pl.Int64, nullable=False, min_value=0),
        Column("smtp_reply", pl.Utf8),
        Column("rendered_at", _TS, nullable=False),
        Column("sent_at", _TS),
        Column("run_id", pl.Utf8),
        Column("unconfirmed_at", _TS, since=12,
               doc="when the message became unconfirmed: its reply lost, or found 'sending' after a crash"),
        Column("smtp_server", pl.Utf8, since=12, doc="host:port of the server the message was last handed to"),
    ),
    primary_key=("message_id",),
    doc="Every rendered email and its sending state; a message that was sent is never sent again.",
    since=7,
)

SURVEY_APPROVALS = Table(
    name="survey_approvals",
    columns=(
        Column("run_id", pl.Utf8, nullable=False),
        Column("round", pl.Int64, nullable=False),
        Column("kind", pl.Utf8, nullable=False),
        Column("decision", pl.Utf8, nullable=False, allowed=("approve_all", "approve_first_n", "cancel", "auto")),
        Column("approved", pl.Int64, nullable=False, min_value=0, doc="messages approved for sending"),
        Column("approver", pl.Utf8, nullable=False),
        Column("decided_at", _TS, nullable=False),
    ),
    primary_key=("run_id", "kind"),
    doc="Each curator decision to send (or not) a wave of survey emails, and who made it.",
    since=7,
)

SURVEY_OPT_OUTS = Table(
    name="survey_opt_outs",
    columns=(
        Column("email", pl.Utf8, nullable=False, doc="normalised address; never emailed again"),
        Column("invitation_id", pl.Utf8),
        Column("source", pl.Utf8, nullable=False),
        Column("opted_out_at", _TS, nullable=False),
    ),
    primary_key=("email",),
    doc="People who asked not to be contacted; honoured in every later round and reminder.",
    since=7,
)

EVENT_DISPOSITIONS: tuple[str, ...] = ("latest", "superseded", "skip", "unknown_invitation", "unknown_paper", "invalid_rating")
"""What became of a survey event: the rating that counts (latest per reviewer-paper), an earlier
answer a later one replaced (a duplicate, kept as history), a skip (not a rating), or an event
the warehouse cannot place or read (rejected with that reason)."""
EVENT_REJECTS: tuple[str, ...] = ("unknown_invitation", "unknown_paper", "invalid_rating")

FLAG_RULES: tuple[str, ...] = ("near_zero_variance", "straight_lining", "content_insensitive", "burst")
RATING_STATUSES: tuple[str, ...] = ("kept", "dropped", "pending")
"""A rating is kept, dropped by a curator's decision on a flag, or pending while a flag on it waits."""

LEGACY_EPOCH = "legacy"
"""The epoch of events pulled before survey stores had one (warehouse schema 11 and older)."""

SURVEY_EVENTS = Table(
    name="survey_events",
    columns=(
        Column("epoch", pl.Utf8, nullable=False, since=12, backfill=f"'{LEGACY_EPOCH}'",
               doc="the survey store's epoch: ids restart in a new, emptied or restored store"),
        Column("event_id", pl.Int64, nullable=False, min_value=1, doc="the survey store's event id within its epoch"),
        Column("invitation_id", pl.Utf8, nullable=False),
        Column("paper_id", pl.Utf8, nullable=False),
        Column("rating", pl.Int64, doc="1-5, null for a skip (anything else is rejected as invalid_rating)"),
        Column("skipped", pl.Boolean, nullable=False),
        Column("source", pl.Utf8, nullable=False, allowed=("click", "form")),
        Column("created_at", _TS, nullable=False),
        Column("reviewer_id", pl.Utf8, doc="the invitation's author id"),
        Column("disposition", pl.Utf8, nullable=False, allowed=EVENT_DISPOSITIONS),
        Column("run_id", pl.Utf8),
        Column("pulled_at", _TS, nullable=False),
        Column("digest", pl.Utf8, since=12,
               doc="sha256 of the answer's content: the same answer in another epoch (a restored backup) is not pulled "
                   "twice; rows pulled before schema 12 get theirs at the next pull"),
    ),
    primary_key=("epoch", "event_id"),
    doc="Every survey answer pulled from the survey store, with what became of it (the full history).",
    since=8,
)

SURVEY_EPOCHS = Table(
    name="survey_epochs",
    columns=(
        Column("epoch", pl.Utf8, nullable=False),
        Column("high_water", pl.Int64, nullable=False, min_value=0, doc="the highest event id pulled from this epoch"),
        Column("high_water_digest", pl.Utf8, doc="the digest of that event: a store rewritten under the same epoch differs"),
        Column("origin", pl.Utf8, nullable=False, allowed=("created", "upgraded", "renewed")),
        Column("renewed_from", pl.Utf8, doc="the epoch a restored store had before its epoch was renewed"),
        Column("store_created_at", _TS, doc="when the store took this epoch"),
        Column("first_pulled_at", _TS, nullable=False),
        Column("last_pulled_at", _TS, nullable=False),
        Column("new_events", pl.Int64, nullable=False, min_value=0, doc="events of the last pull not known before"),
        Column("known_events", pl.Int64, nullable=False, min_value=0,
               doc="events of the last pull whose answer was already pulled from another epoch"),
        Column("summary", pl.Utf8, nullable=False, doc="what the last pull found, as the run said it"),
        Column("run_id", pl.Utf8),
    ),
    primary_key=("epoch",),
    doc="Each survey store epoch pulled from, with its high-water mark.",
    since=12,
)

RATINGS = Table(
    name="ratings",
    columns=(
        Column("reviewer_id", pl.Utf8, nullable=False),
        Column("paper_id", pl.Utf8, nullable=False),
        Column("rating", pl.Int64, nullable=False, min_value=1, max_value=5),
        Column("invitation_id", pl.Utf8, nullable=False),
        Column("round", pl.Int64, nullable=False, min_value=1),
        Column("category", pl.Utf8, doc="the paper's primary arXiv category"),
        Column("event_id", pl.Int64, nullable=False, doc="the event whose answer counts (the latest)"),
        Column("epoch", pl.Utf8, since=12, doc="that event's survey store epoch"),
        Column("rated_at", _TS, nullable=False),
        Column("n_events", pl.Int64, nullable=False, min_value=1, doc="answers given for this pair (duplicates = n - 1)"),
        Column("status", pl.Utf8, nullable=False, allowed=RATING_STATUSES),
        Column("flags", pl.List(pl.Utf8), doc="ids of the flags that apply to this rating"),
    ),
    primary_key=("reviewer_id", "paper_id"),
    doc="One rating per reviewer and paper (the latest answer wins); dropped ratings stay, marked.",
    since=8,
    validate=True,
)

RATING_FLAGS = Table(
    name="rating_flags",
    columns=(
        Column("flag_id", pl.Utf8, nullable=False, doc="<rule>:<subject id>"),
        Column("rule", pl.Utf8, nullable=False, allowed=FLAG_RULES),
        Column("subject", pl.Utf8, nullable=False, allowed=("annotator", "invitation")),
        Column("reviewer_id", pl.Utf8, nullable=False),
        Column("invitation_id", pl.Utf8),
        Column("paper_ids", pl.List(pl.Utf8), nullable=False, doc="the ratings the flag puts in doubt"),
        Column("evidence", pl.Utf8, nullable=False, doc="JSON of what the rule measured"),
        Column("evidence_hash", pl.Utf8, nullable=False),
        Column("active", pl.Boolean, nullable=False, doc="false once the rule no longer fires on the current ratings"),
        Column("run_id", pl.Utf8),
        Column("flagged_at", _TS, nullable=False),
    ),
    primary_key=("flag_id",),
    doc="Suspicious-pattern flags on ratings, each from a named rule with its evidence.",
    since=8,
)

FLAG_DECISIONS = Table(
    name="flag_decisions",
    columns=(
        Column("flag_id", pl.Utf8, nullable=False),
        Column("evidence_hash", pl.Utf8, nullable=False, doc="the evidence the decision was made on"),
        Column("decision", pl.Utf8, nullable=False, allowed=("keep", "drop")),
        Column("reason", pl.Utf8),
        Column("decided_by", pl.Utf8, nullable=False),
        Column("decided_at", _TS, nullable=False),
        Column("run_id", pl.Utf8),
    ),
    primary_key=("flag_id", "evidence_hash"),
    doc="Every curator decision on a flag; it applies while the flag's evidence is unchanged.",
    since=8,
)

TUPLE_KINDS: tuple[str, ...] = ("paper_centric", "reviewer_centric")

RATING_TUPLES = Table(
    name="rating_tuples",
    columns=(
        Column("kind", pl.Utf8, nullable=False, allowed=TUPLE_KINDS),
        Column("anchor_id", pl.Utf8, nullable=False, doc="the paper (paper-centric) or the reviewer (reviewer-centric)"),
        Column("positive_id", pl.Utf8, nullable=False, doc="the higher-rated reviewer (or paper)"),
        Column("negative_id", pl.Utf8, nullable=False),
        Column("rating_pos", pl.Int64, nullable=False, min_value=1, max_value=5),
        Column("rating_neg", pl.Int64, nullable=False, min_value=1, max_value=5),
        Column("gap", pl.Int64, nullable=False, min_value=1, max_value=4),
    ),
    primary_key=("kind", "anchor_id", "positive_id", "negative_id"),
    doc="Pairwise benchmark tuples from the kept ratings: (p, r+, r-) and (r, p+, p-), ties dropped.",
    since=8,
)

RELEASES = Table(
    name="releases",
    columns=(
        Column("version", pl.Utf8, nullable=False),
        Column("parent", pl.Utf8),
        Column("status", pl.Utf8, nullable=False, allowed=("built", "published", "rejected")),
        Column("manifest_sha256", pl.Utf8, nullable=False),
        Column("counts", pl.Utf8, nullable=False, doc="JSON of the release's counts"),
        Column("decided_by", pl.Utf8),
        Column("reason", pl.Utf8),
        Column("decided_at", _TS),
        Column("run_id", pl.Utf8),
        Column("built_at", _TS, nullable=False),
        Column("superseded_by", pl.Utf8, since=12,
               doc="the newer published release that took a published one's place (the old one stays published and readable)"),
    ),
    primary_key=("version",),
    doc="Every release built, and the curator's decision to publish it (or not).",
    since=9,
)

REFRESH_STAGES = Table(
    name="refresh_stages",
    columns=(
        Column("refresh_id", pl.Utf8, nullable=False, doc="the refresh run (runs.run_id)"),
        Column("position", pl.Int64, nullable=False, min_value=0),
        Column("stage", pl.Utf8, nullable=False, allowed=STAGE_NAMES),
        Column("status", pl.Utf8, nullable=False, allowed=("ran", "skipped", "failed")),
        Column("reason", pl.Utf8, nullable=False, doc="why the stage ran or was skipped, in words"),
        Column("fingerprint", pl.Utf8, nullable=False, doc="digest of the stage's inputs when it was planned"),
        Column("child_run_id", pl.Utf8, doc="the stage's own flow run, when it ran"),
        Column("seconds", pl.Float64, nullable=False, min_value=0),
        Column("summary", pl.Utf8, doc="JSON of the counts the stage reported"),
        Column("finished_at", _TS, nullable=False),
    ),
    primary_key=("refresh_id", "stage"),
    doc="What each refresh did with each stage: ran it (and why), or skipped it (and why).",
    since=10,
)

PAPER_KEYWORDS = Table(
    name="paper_keywords",
    columns=(
        Column("arxiv_id", pl.Utf8, nullable=False),
        Column("extractor", pl.Utf8, nullable=False, allowed=("llm", "yake"), doc="who chose the keywords"),
        Column("keywords", pl.List(pl.Utf8), nullable=False),
        Column("model", pl.Utf8, nullable=False, doc="the LLM, or empty for YAKE"),
        Column("template_version", pl.Utf8, nullable=False, doc="version of templates/prompts/keywords.j2 (LLM only)"),
        Column("run_id", pl.Utf8),
        Column("extracted_at", _TS, nullable=False),
    ),
    primary_key=("arxiv_id", "extractor"),
    doc="Research keywords of each paper that is part of a reviewer's keyword profile, with the prompt version.",
    since=11,
)

KEYWORD_PROFILES = Table(
    name="keyword_profiles",
    columns=(
        Column("reviewer_id", pl.Utf8, nullable=False, doc="authors.author_id"),
        Column("profile", pl.Utf8, nullable=False, doc="the sentence that is embedded"),
        Column("papers", pl.Int64, nullable=False, min_value=1),
        Column("keywords", pl.Int64, nullable=False, min_value=1),
        Column("extractor", pl.Utf8, nullable=False, doc="llm, yake, or llm+yake when some answers were rejected"),
        Column("template_version", pl.Utf8, nullable=False),
        Column("run_id", pl.Utf8),
        Column("built_at", _TS, nullable=False),
    ),
    primary_key=("reviewer_id",),
    doc="RATE-style keyword profile of each reviewer (their recent papers' keywords, duplicates kept).",
    since=11,
)

ALL_TABLES: tuple[Table, ...] = (
    SCHEMA_VERSION_TABLE,
    RUNS,
    RUN_STAGES,
    CRAWL_SLICES,
    ARXIV_RECORDS,
    S2_PAPERS,
    DOCUMENTS,
    PAPERS,
    MENTIONS,
    REJECTS,
    EVAL_RESULTS,
    AUTHOR_LINKS,
    AUTHOR_BLOCKS,
    AUTHORS,
    COAUTHOR_EDGES,
    LLM_DECISIONS,
    QUERY_SAMPLES,
    POOL_EVIDENCE,
    POOL_EXCLUSIONS,
    ASSIGNMENTS,
    INVITATIONS,
    S2_AUTHOR_PAPERS,
    POOL_ROUNDS,
    SURVEY_INVITATIONS,
    SURVEY_MESSAGES,
    SURVEY_APPROVALS,
    SURVEY_OPT_OUTS,
    SURVEY_EVENTS,
    SURVEY_EPOCHS,
    RATINGS,
    RATING_FLAGS,
    FLAG_DECISIONS,
    RATING_TUPLES,
    RELEASES,
    REFRESH_STAGES,
    PAPER_KEYWORDS,
    KEYWORD_PROFILES,
    *GRAPH_TABLES,
    PAPER_AUTHORSHIPS,
)

TABLES: dict[str, Table] = {t.name: t for t in ALL_TABLES}
