"""The one settings tree, read from the environment (prefix ``REVBENCH_``, nesting ``__``) and ``.env``."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import (BaseModel, ConfigDict, Field, SecretStr, ValidationError, ValidationInfo, field_validator,
                      model_validator)
from pydantic_settings import BaseSettings, SettingsConfigDict

from revbench.errors import UsageError
from revbench.reference import arxiv_categories
from revbench.stages import STAGE_NAMES

DEFAULT_CATEGORIES = ["cs.AI", "cs.CL", "cs.CV", "cs.IR", "cs.LG"]
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


URL_FIELD = re.compile(r"(^|_)(url|address)$")
"""The settings that hold an address (``base_url``, ``dask_address``): none may carry credentials."""
USERINFO = re.compile(r"^[a-z][a-z0-9+.-]*://[^/?#\s]*@", re.I)
"""A URL with credentials before its host (``https://user:pw@host``, ``https://token@host``)."""
CREDENTIALS_GO = {
    "s2": "the key goes in REVBENCH_S2__API_KEY",
    "llm": "the key goes in REVBENCH_LLM__API_KEY",
    "survey": "every email's links carry this address, and the survey server needs no login",
}
"""Where a section's credentials belong instead, when it has any."""


class Section(BaseModel):
    """A section of the settings tree: unknown keys and non-finite numbers are errors, and no
    address carries credentials."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # The fields named like an address (URL_FIELD), by name, not every field ("*"): pydantic wraps
    # each field a validator names, and wrapping all of the sections' 219 cost every command about
    # 7 ms of its start. tests/app/test_doctor.py fails on an address field not named here.
    @field_validator("base_url", "url", "dask_address", check_fields=False)
    @classmethod
    def _no_credentials_in_urls(cls, v: Any, info: ValidationInfo) -> Any:
        # A password in a URL is printed wherever the URL is: logs, runs' parameters, errors, and
        # for the survey every reminder's links. It is refused, never only hidden.
        if isinstance(v, str) and info.field_name and URL_FIELD.search(info.field_name) and USERINFO.match(v.strip()):
            section = next((name for name, f in Settings.model_fields.items() if f.annotation is cls), "")
            where = CREDENTIALS_GO.get(section, "revbench sends this service no credentials")
            raise ValueError(f"credentials do not belong in a URL (they would be written wherever the URL is); "
                             f"remove the user:password@ part ({where})")
        return v

    @model_validator(mode="before")
    @classmethod
    def _empty_is_unset(cls, data: Any) -> Any:
        # `KEY=` (as .env.example writes every optional field) means unset: an empty date, path or
        # secret would otherwise fail to parse, or be sent (an empty x-api-key). Not for plain
        # strings, where empty has a meaning of its own (no SMTP host, no ratings schedule).
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {k: None if isinstance(v, str) and not v.strip() and k in fields
                and type(None) in get_args(fields[k].annotation) else v for k, v in data.items()}


def check_categories(categories: list[str]) -> list[str]:
    """arXiv category ids, each one arXiv knows (``revbench/reference/arxiv_categories.txt``)."""
    known = arxiv_categories()
    for c in categories:
        if c not in known:
            close = difflib.get_close_matches(c, sorted(known), n=1)
            raise ValueError(f"unknown arXiv category {c!r}" + (f" (did you mean {close[0]}?)" if close else ""))
    if not categories:
        raise ValueError("no arXiv category given")
    return categories


class HttpSettings(Section):
    """Retry and timeout policy shared by every HTTP client."""

    timeout_seconds: float = Field(30.0, gt=0, description="Per-request timeout (connect and read).")
    max_attempts: int = Field(6, ge=1, description="Attempts per request before a fault is recorded.")
    backoff_initial_seconds: float = Field(1.0, ge=0, description="First exponential backoff wait.")
    backoff_max_seconds: float = Field(60.0, ge=0, description="Cap on one backoff wait.")
    retry_after_max_seconds: float = Field(
        300.0, ge=0, description="Longest Retry-After a request waits; a longer one (or one past the service's "
        "throttle_patience_seconds left) gives the request up at once as rate-limited, left for the next run."
    )
    user_agent: str = Field("revbench/0.1", description="User-Agent sent to every service.")
    probe_timeout_seconds: float = Field(
        5.0, gt=0, description="Timeout of the reachability probe of each service before a stage starts."
    )
    breaker_failures: int = Field(
        5, ge=1, description="Calls in a row to one service that fail after all retries before the run stops as failed."
    )
    max_response_bytes: int = Field(
        32_000_000, ge=1024, description="Most bytes read of one answer of arXiv, Semantic Scholar, OpenAlex, GROBID or the LLM "
        "(the largest real one is under 3 MB); a longer answer is cut off there and named (PDFs: pdf.max_bytes).")
    ca_bundle: Path | None = Field(
        None, description="PEM file of extra certificate authorities to trust, e.g. Caddy's internal CA of a test "
        "deployment (empty: the system's and certifi's only); `revbench doctor` checks the survey server with it.")


class Throttled(Section):
    """A service paced adaptively after 429s (``revbench.retry.AdaptivePacer``). The three settings are
    declared once here; a service gives its own defaults as class keywords, e.g.
    ``class SemanticScholarSettings(Throttled, throttle_recovery_seconds=0.25)``."""

    throttle_max_delay_seconds: float = Field(
        60.0, ge=0, description="Longest pause adaptive pacing slows to after 429s without Retry-After."
    )
    throttle_recovery_seconds: float = Field(
        0.5, ge=0, description="Taken off the pause after each answered request, back down to the service's pace "
        "(delay_seconds; Semantic Scholar's keyless_delay_seconds without a key)."
    )
    throttle_patience_seconds: float = Field(
        900.0, ge=0, description="How long one request waits out 429s before it counts as failed: left for the next "
        "run (breaker_failures such requests in a row stop the run)."
    )

    def __init_subclass__(cls, **defaults: float) -> None:
        # The keywords are the subclass's defaults, applied once pydantic has built its fields (below).
        super().__init_subclass__()

    @classmethod
    def __pydantic_init_subclass__(cls, **defaults: float) -> None:
        super().__pydantic_init_subclass__()
        unknown = sorted(set(defaults) - set(Throttled.model_fields))
        if unknown:
            raise TypeError(f"{cls.__name__}: {', '.join(unknown)} is not a throttle setting of Throttled")
        for name, value in defaults.items():
            # pydantic gives each subclass its own copy of the base's fields, so this sets the subclass's alone.
            cls.__pydantic_fields__[name].default = value
        if defaults:
            cls.model_rebuild(force=True)


class ArxivSettings(Throttled, throttle_recovery_seconds=0.5):
    """arXiv export API."""

    base_url: str = Field("https://export.arxiv.org/api/query", description="Query endpoint.")
    page_size: int = Field(500, ge=1, le=2000, description="Results per request (API limit 2000).")
    delay_seconds: float = Field(3.0, ge=0, description="Pause between requests (arXiv asks for 3 s), the pace's ceiling.")
    max_results_per_query: int = Field(
        10000, ge=1, description="A slice with more results is split in two; a single minute is paged through "
        "(API ceiling 30000)."
    )
    slice_days: int = Field(1, ge=1, description="Initial width of a crawl slice in days.")
    categories: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CATEGORIES), description="Categories crawled by default."
    )

    @field_validator("categories")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        return check_categories(v)


class SemanticScholarSettings(Throttled, throttle_recovery_seconds=0.25):
    """Semantic Scholar Graph API."""

    base_url: str = Field("https://api.semanticscholar.org/graph/v1", description="Graph API root.")
    api_key: SecretStr | None = Field(None, description="Sent as x-api-key when set.")
    batch_size: int = Field(500, ge=1, le=500, description="Ids per paper/batch request (max 500).")
    connections: int = Field(4, ge=1, le=16, description="Requests one piece or stage keeps in flight at once (a "
                             "paper's references, an author's history); the pause between requests still holds "
                             "across them, so this overlaps waiting, never raises the rate.")
    delay_seconds: float = Field(
        1.0, ge=0, description="Pause between requests with an API key: the documented 1 request per second, the pace's ceiling."
    )
    keyless_delay_seconds: float = Field(
        3.0, ge=0, description="Pause between requests without an API key: the shared pool promises no rate; "
        "3 s is its old documented 100 requests per 5 minutes."
    )
    max_references_per_paper: int = Field(
        10_000, ge=1, description="Most references (or citations) of one paper read, the first ones in S2's order; "
        "paging stops there and the cut is named in the run's notes (real papers list a few thousand at most).")
    max_authors_per_paper: int = Field(
        20_000, ge=1, description="Most authors of one paper kept, in order (the largest real author lists hold about "
        "5,000); a longer list is cut and named in the run's notes.")
    max_papers_per_author: int = Field(
        10_000, ge=1, description="Most papers of one author's publication list read; paging stops there and the cut "
        "is named in the log (prolific real authors list a few thousand).")
    bulk_dir: Path | None = Field(
        None, description="A folder of Semantic Scholar's bulk datasets (a release per folder, <release>/papers/ and "
        "<release>/citations/, and diffs/<from>_<to>/ between releases, gzipped JSON Lines as the Datasets API downloads "
        "them; a bare papers/ and citations/ is read whole), read in place by the graph stage instead of the API, a "
        "later run reading only the diffs after the release it read; papers it does not hold are asked over the API.")


class OpenAlexSettings(Throttled, throttle_recovery_seconds=0.05):
    """OpenAlex API (optional: works, references, topics, authorships with institutions)."""

    enabled: bool = Field(False, description="Read the scholarly graph from OpenAlex too (off: it is not asked, "
                          "and `revbench doctor` shows it skipped).")
    base_url: str = Field("https://api.openalex.org", description="API root.")
    mailto: str = Field("", description="Contact address sent as mailto= with every request, which puts the requests "
                        "in OpenAlex's polite pool (empty: the common pool).")
    per_page: int = Field(200, ge=1, le=200, description="Results per page of a list (API limit 200).")
    batch_size: int = Field(50, ge=1, le=100, description="Works (by DOI) or authors (by id) asked in one list "
                            "request, OR'ed in one filter (`doi:A|B|...`); OpenAlex documents up to 100 values a filter "
                            "(50 in its older documentation).")
    delay_seconds: float = Field(
        0.1, ge=0, description="Pause between requests: the polite pool's documented 10 requests per second, the "
        "pace's ceiling.")
    max_references_per_paper: int = Field(
        10_000, ge=1, description="Most referenced_works of one work read, in OpenAlex's order; a longer list is cut "
        "and named in the run's notes (real works list a few thousand at most).")
    max_authors_per_paper: int = Field(
        20_000, ge=1, description="Most authorships of one work read, in order (OpenAlex lists 100 in list answers); "
        "a longer list is cut and named in the run's notes.")
    max_topics_per_paper: int = Field(
        1_000, ge=1, description="Most topics of one work or author read (works have 3, authors a few dozen); a longer "
        "list is cut and named in the run's notes.")
    max_institutions_per_author: int = Field(
        1_000, ge=1, description="Most institutions (and affiliations) of one authorship or author read (real ones "
        "hold a few dozen); a longer list is cut and named in the run's notes.")
    snapshot_dir: Path | None = Field(
        None, description="A folder of the OpenAlex snapshot (data/works/ and data/authors/, partitioned by "
        "updated_date), read in place by the graph stage instead of the API; works it does not hold are asked over the API.")

    @field_validator("mailto")
    @classmethod
    def _address(cls, v: str) -> str:
        v = v.strip()
        if v and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", v):
            raise ValueError(f"{v!r} is not an e-mail address (OpenAlex's polite pool asks for one to contact)")
        return v


class PdfSettings(Section):
    """PDF downloads."""

    base_url: str = Field("https://arxiv.org", description="PDFs are fetched from {base_url}/pdf/{id}v{n}.")
    max_bytes: int = Field(50_000_000, ge=1024, description="Larger PDFs are rejected (pdf_too_large).")


class GrobidSettings(Section):
    """GROBID service."""

    base_url: str = Field("http://localhost:8070", description="GROBID server root.")
    consolidate_header: bool = Field(False, description="Ask GROBID to consolidate headers.")
    concurrency: int = Field(4, ge=1, description="Documents downloaded and extracted at once.")
    timeout_seconds: float = Field(120.0, gt=0, description="Per-document GROBID timeout.")
    busy_sleep_seconds: int = Field(5, ge=0, description="Wait after a 503 (server busy) answer.")
    fulltext: bool = Field(False, description="Also ask GROBID for each PDF's full text (processFulltextDocument) to read "
                           "its reference list; full text is several times slower than the header.")
    consolidate_citations: bool = Field(False, description="With fulltext: have GROBID look every reference up in "
                                        "Crossref (consolidateCitations=1, slower again; off leaves it at 0, GROBID's default).")


class LlmSettings(Section):
    """OpenAI-compatible LLM endpoint (used by later stages)."""

    base_url: str | None = Field(None, description="Endpoint root ending in /v1; unset = offline fallbacks.")
    api_key: SecretStr | None = Field(None, description="Bearer key for the endpoint.")
    model: str = Field("gpt-4o-mini", description="Model name sent with each request.")


class IngestSettings(Section):
    """Reconciliation rules and batching of the ingest flow."""

    title_similarity_threshold: float = Field(
        0.85, ge=0, le=1, description="PDF title vs arXiv title similarity below which a paper is dropped."
    )
    author_match_threshold: float = Field(
        0.6, ge=0, le=1, description="Minimum name similarity to align a PDF author to an arXiv author."
    )
    min_abstract_chars: int = Field(40, ge=0, description="Shorter PDF abstracts count as missing.")
    commit_every: int = Field(200, ge=1, description="Documents per warehouse commit while extracting.")


class DisambiguateSettings(Section):
    """Author disambiguation."""

    max_block_size: int = Field(500, ge=10, description="Larger name blocks are split (by given name, then hash).")
    fallback_threshold: float = Field(
        0.92, ge=0, le=1, description="Affiliation similarity at which the offline fallback merges."
    )
    candidate_similarity: float = Field(
        0.5, ge=0, le=1, description="A block goes to the decider only if two clusters are at least this similar."
    )
    use_llm: bool = Field(True, description="Verify non-exact cases with the LLM when one is configured.")
    llm_concurrency: int = Field(4, ge=1, description="LLM clustering calls in flight at once.")
    recent_years: int = Field(2, ge=1, description="Window (years back from the newest paper) of recent-paper counts.")


class PoolsSettings(Section):
    """Query sampling, candidate recall, conflicts of interest, screening and assignment."""

    @field_validator("query_categories")
    @classmethod
    def _known_query_categories(cls, v: list[str]) -> list[str]:
        return check_categories(v) if v else v

    model: str = Field("all-MiniLM-L6-v2", description="Model for paper embeddings: a recipe (specter, specter2, scincl, minilm: `revbench models`), a sentence-transformers name or path, or `hashing` (hashed word counts: no weights, fast on a CPU at full size).")
    queries_per_category: int = Field(800, ge=1, description="Query papers sampled per category and round.")
    query_categories: list[str] = Field(
        default_factory=list, description="Primary categories queries are drawn from (JSON list; empty: every crawled category). Candidates come from the whole corpus.")
    reuse_queries: bool = Field(False, description="Allow papers used as queries in earlier rounds.")
    seed: int = Field(0, description="Seed of sampling and assignment tie-breaks.")
    # 0.4, not 0.6: LR-bench built its pools this way, and rebuilt with the product's settings its
    # sample's rated pairs are recalled 86% at 0.4 and 31% at 0.6 (docs/rebuild.md, generated).
    tau: float = Field(0.4, gt=0, le=1, description="Cosine similarity (0 < tau <= 1) above which a paper is a query's neighbour (0.4 with all-MiniLM-L6-v2 reaches LR-bench's rated pairs; docs/rebuild.md).")
    max_neighbors: int = Field(0, ge=0, description="Cap on neighbours per query (0: no cap).")
    # On by default although the invitees only this path finds are rated lower (docs/benchmarks.md,
    # what the graph is worth): a benchmark needs low ratings too, and on the calibrated world the
    # path brings the survey's rating distribution closer to LR-bench's.
    citation_recall: bool = Field(True, description="Also recall the authors of warehouse papers a query cites (the graph's resolved citations, any source) as its candidates; COI, screening and caps apply to them alike (nothing changes without citations). Its invitees are rated lower than the semantic path's: off for a survey of experts only (docs/benchmarks.md, what the graph is worth).")
    same_affiliation_coi: bool = Field(False, description="Also exclude candidates sharing an affiliation with a query author (by the PDFs' affiliation strings: the weaker rule; see coi_by_institution).")
    coi_by_institution: bool = Field(True, description="Exclude candidates who were at a query author's institution (by ROR id, else normalised name) within coi_institution_years of the paper, from the graph's author affiliations (nothing changes without them).")
    coi_institution_years: int = Field(3, ge=0, le=50, description="Window of the institution COI: a stint counts when it reaches this many years before the paper's year.")
    min_recent_papers: int = Field(3, ge=0, description="Screening: papers a candidate needs in the recent window.")
    recent_years: int = Field(2, ge=1, description="Screening window in years back from the newest paper.")
    fetch_s2_histories: bool = Field(True, description="Count candidates' papers from Semantic Scholar too.")
    max_queries_per_candidate: int = Field(6, ge=1, description="Workload cap: queries per candidate.")
    candidates_per_query: int = Field(10, ge=1, description="Target invitations per query.")


class SurveySettings(Section):
    """Invitation emails, signed rating links and the survey server."""

    signing_key: SecretStr | None = Field(
        None, description="Key that signs survey links (HMAC-SHA256); nothing is sent without one. Long and random."
    )
    old_signing_keys: list[SecretStr] = Field(
        default_factory=list, description="Earlier keys, still accepted to verify links while a new key signs (JSON list)."
    )
    link_max_age_days: int = Field(30, ge=1, le=365, description="Days a rating or page link stays valid (opt-out links never expire).")
    base_url: str = Field("http://127.0.0.1:8765", description="Public address of the survey server, used in every link.")
    store_dir: Path | None = Field(
        None, description="Folder of the survey store (survey.sqlite), shared by the survey server and the flows "
        "(empty: the data directory); a folder of its own lets a deployment give the survey server that folder alone.")
    team: str = Field("the revbench team", description="Research team named in the email.")
    lab: str = Field("", description="Lab named in the email (optional).")
    institution: str = Field("", description="Institution named in the email (optional).")
    sender_name: str = Field("revbench survey", description="Display name of the sender.")
    sender_email: str = Field("survey@revbench.example", description="From address.")
    reply_to: str = Field("", description="Reply-To address (default: the From address).")
    subject: str = Field("How familiar are you with these papers? (under a minute, not a review request)",
                         description="Subject of the invitation email.")
    abstract_preview_chars: int = Field(320, ge=80, description="Abstract length shown in the email (the page shows it all).")
    auto_approve: bool = Field(False, description="Send without waiting for a curator's approval (unattended runs).")
    approval_timeout_seconds: int = Field(86400, ge=60, description="How long a tracked run waits for the curator's go.")
    messages_per_minute: float = Field(30.0, gt=0, description="Sending pace.")
    smtp_attempts: int = Field(4, ge=1, description="Tries per message for temporary (4xx) SMTP replies.")
    reminder_count: int = Field(1, ge=0, le=5, description="Reminders to invitees with unrated papers (0: none).")
    reminder_delay_days: float = Field(7.0, ge=0, description="Days after the last email before a reminder goes out.")
    recontact_across_rounds: bool = Field(False, description="Invite people already emailed in an earlier round.")
    rate_limit_per_minute: int = Field(60, ge=1, description="Requests per link and minute the survey server accepts.")
    simulated_answer_times: bool = Field(
        False, description="Record the answer time a SYNTHETIC panel declares on its simulated clock (header "
        "X-Revbench-Simulated-Time) instead of the server's clock, so quality flags do not depend on the machine's "
        "load (the demo and the rebuild set it); never on a server real people answer.")


class RatingsSettings(Section):
    """Survey answers into ratings: quality flags, curator decisions, tuples, evaluation."""

    variance_min_ratings: int = Field(4, ge=2, description="Near-zero variance: ratings an annotator needs before the rule applies.")
    variance_max: float = Field(0.1, ge=0, description="Near-zero variance: flag an annotator whose rating variance is at most this.")
    straight_line_min_papers: int = Field(4, ge=2, description="Straight-lining: rated papers of one invitation before one value for all is flagged.")
    content_min_items: int = Field(6, ge=3, description="Content insensitivity: ratings with pool evidence an annotator needs.")
    content_max_rho: float = Field(-0.5, ge=-1, le=1, description="Content insensitivity: flag when the rank correlation of ratings with pool similarity is at most this.")
    content_min_spread: float = Field(0.15, ge=0, le=2, description="Content insensitivity: flag all-1 or all-5 ratings when pool similarity spans at least this.")
    burst_window_seconds: float = Field(10.0, gt=0, description="Bursts: flag several papers first rated within this many seconds.")
    burst_min_papers: int = Field(3, ge=2, description="Bursts: papers in the window (or rated in all) before the rule applies.")
    min_seconds_per_paper: float = Field(2.0, ge=0, description="Bursts: flag an invitation rated faster than this per paper on average.")
    unattended_decision: Literal["keep", "drop", "wait"] = Field(
        "wait", description="Undecided flags: keep or drop their ratings, or wait for a curator (keep, drop, wait).")
    decision_timeout_seconds: int = Field(86400, ge=60, description="How long a tracked run waits for the curator's decisions.")
    profile_max_papers: int = Field(20, ge=1, description="Most recent corpus papers of a reviewer that form their profile.")
    evaluate_after: bool = Field(True, description="End the ratings flow with an evaluation on the warehouse benchmark.")
    evaluate_scorers: list[str] = Field(
        default_factory=lambda: ["trivial", "tpms", "bm25:pooling=mean", "embedding:pooling=mean"],
        description="Scorers that evaluation runs (JSON list of scorer specs; mean pooling, as pools make max pooling blind).")
    bootstrap: int = Field(1000, ge=0, description="Bootstrap resamples of that evaluation.")
    evaluate_judged: bool = Field(True, description="That evaluation also judges each scorer by the assignment it yields "
                                  "and by the collusion attack (settings assignment and attack).")


class ReleaseSettings(Section):
    """Versioned releases of the benchmark: anonymous ids, licence, what profiles hold."""

    id_key: SecretStr | None = Field(
        None, description="Key of the keyed hash behind release ids (stable across releases, unlinkable without it); "
                          "nothing is released without one. Long, random, never shared.")
    name: str = Field("revbench-lr", pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Dataset name in the card and Croissant.")
    license: str = Field("cc-by-4.0", description="Licence id written into the dataset card.")
    url: str = Field("", pattern=r"^(https?://\S+)?$", description="Where the releases are published (a Hub "
                     "dataset page, a web folder), cited in the card's BibTeX; empty: the entry names no address "
                     "rather than a made-up one.")
    profile_years: int = Field(2, ge=1, le=20, description="Reviewers' publications released: those of the last N years.")
    redact_addresses: bool = Field(False, description="Replace e-mail addresses written in papers' titles and abstracts by [email] (real abstracts carry their authors'); off: the privacy audit stops the release on them.")
    redact_names: bool = Field(False, description="Replace the names, addresses and ORCID iDs of the people who rated, where papers' titles and abstracts spell them, by [name], [email] and [orcid]; off: the privacy audit stops the release on them.")
    auto_approve: bool = Field(False, description="Publish a release without waiting for a curator's go (unattended runs).")
    approval_timeout_seconds: int = Field(86400, ge=60, description="How long a tracked run waits for the curator's go.")
    evaluate_after: bool = Field(True, description="Evaluate REVBENCH_RATINGS__EVALUATE_SCORERS on each release once it is published.")
    evaluate_rejected: bool = Field(False, description="Let `revbench evaluate -b release=PATH` read a release its curator "
                                    "rejected (--allow-rejected); off: refused in one line.")


class SmtpSettings(Section):
    """The outgoing mail server."""

    host: str = Field("", description="SMTP host; unset = nothing can be sent (use --dry-run).")
    port: int = Field(587, ge=1, le=65535, description="SMTP port (587 STARTTLS, 465 SSL, 25 plain).")
    security: Literal["starttls", "ssl", "none"] = Field("starttls", description="starttls, ssl or none (none only for a local server).")
    username: str = Field("", description="Login name (empty: no login).")
    password: SecretStr | None = Field(None, description="Login password.")
    timeout_seconds: float = Field(
        20.0, gt=0,
        description="Deadline of one attempt to hand over a message: connect, greeting, EHLO, login, MAIL, RCPT, DATA "
                    "and the final reply together, so a server that stops answering fails within it. A message whose "
                    "text was sent but whose reply did not come in time is 'unconfirmed', never sent again by itself.")


class WarehouseSettings(Section):
    """The DuckDB warehouse file."""

    lock_wait_seconds: float = Field(
        30.0, ge=0, description="How long a command waits for another revbench process to release the warehouse."
    )
    memory_limit: str = Field(
        "", pattern=r"^$|^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="DuckDB memory limit, e.g. 4GB (empty: DuckDB's default, 80% of RAM); larger work spills to disk.")
    threads: int = Field(0, ge=0, description="DuckDB threads (0: one per core).")


class RunnerSettings(Section):
    """Where the independent pieces of a tracked run execute: threads here, or a Dask cluster."""

    kind: Literal["threads", "dask"] = Field("threads", description="threads (this process) or dask (prefect-dask).")
    max_workers: int = Field(4, ge=1, description="Threads of the threads runner.")
    dask_address: str = Field(
        "", pattern=r"^$|^(tcp|tls|inproc|ucx)://\S+$",
        description="Address of an existing Dask scheduler (tcp://host:8786); empty starts a local cluster.")
    dask_workers: int = Field(2, ge=1, description="Workers of the local Dask cluster.")
    dask_threads_per_worker: int = Field(1, ge=1, description="Threads per worker of the local Dask cluster.")
    embed_batch: int = Field(1024, ge=1, description="Texts per embedding piece.")
    llm_blocks_per_piece: int = Field(64, ge=1, description="Name blocks per disambiguation piece.")


class LimitsSettings(Section):
    """Pieces that may call each external service at once across every worker (Prefect tag
    concurrency limits, created on the server when a tracked run starts; 0: no limit)."""

    arxiv: int = Field(1, ge=0, description="Pieces calling arXiv at once (arXiv asks for one request per 3 s).")
    s2: int = Field(1, ge=0, description="Pieces calling Semantic Scholar at once.")
    openalex: int = Field(1, ge=0, description="Pieces calling OpenAlex at once (each keeps to OPENALEX__DELAY_SECONDS).")
    grobid: int = Field(2, ge=0, description="Pieces calling GROBID at once (each keeps GROBID__CONCURRENCY requests in flight).")
    llm: int = Field(2, ge=0, description="Pieces calling the LLM at once (each keeps DISAMBIGUATE__LLM_CONCURRENCY calls in flight).")
    smtp: int = Field(1, ge=0, description="Pieces sending mail at once.")
    embed: int = Field(0, ge=0, description="Embedding pieces at once (0: one per worker).")


def check_cron(expr: str) -> str:
    """A five-field cron expression cronsim (and so Prefect's scheduler) accepts."""
    from datetime import datetime

    from cronsim import CronSim, CronSimError

    if len(expr.split()) != 5:
        raise ValueError(f"{expr!r} is not a five-field cron expression (minute hour day month weekday)")
    try:
        CronSim(expr, datetime(2026, 1, 1))
    except CronSimError as exc:
        raise ValueError(f"{expr!r} is not a valid cron expression: {exc}") from None
    return expr


class ScheduleSettings(Section):
    """Cron schedules of the served deployments (``revbench serve``)."""

    refresh_cron: str = Field("0 3 * * *", description="When the refresh runs (cron, five fields).")
    ratings_cron: str = Field("0 * * * *", description="When the ratings pull with reminders runs (cron; empty: not served).")
    backup_cron: str = Field("30 2 * * *", description="When the backup of the warehouse and the survey store runs "
                             "(cron; empty: not served); see REVBENCH_BACKUP__*.")
    timezone: str = Field("UTC", description="Time zone of the cron schedules (IANA name).")

    @field_validator("refresh_cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        return check_cron(v)

    @field_validator("ratings_cron", "backup_cron")
    @classmethod
    def _cron_or_empty(cls, v: str) -> str:
        return check_cron(v) if v else v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (an IANA name such as UTC or Europe/Berlin)") from None
        return v


class BackupSettings(Section):
    """Backups of the warehouse and the survey store (`revbench backup`, the scheduled backup)."""

    dir: Path | None = Field(
        None, description="Folder the snapshots go to, each as revbench-backup-<UTC time>/ (empty: <data_dir>/backups; "
        "another disk is safer).")
    keep: int = Field(7, ge=0, description="Snapshots kept in that folder after each backup, the newest; older ones of "
                      "revbench's are removed (0: keep all).")
    key: SecretStr | None = Field(
        None, description="Key each backup's manifest is authenticated with (HMAC-SHA256), checked by every restore; "
        "no backup is written without one. At least 16 characters, random, kept apart from the backups.")


class RefreshSettings(Section):
    """The refresh: which stages run, over which window, and when a new round or release is due."""

    stages: list[str] = Field(default_factory=lambda: list(STAGE_NAMES),
                              description="Stages the refresh runs, in this order (JSON list; " + ", ".join(STAGE_NAMES) + ").")
    window_days: int = Field(61, ge=1, le=3660, description="Days of last-revision dates ingested, ending at UNTIL.")
    until: date | None = Field(None, description="Last day of the window (YYYY-MM-DD; empty: yesterday, UTC).")
    new_round_min_papers: int = Field(
        1000, ge=1, description="A new pools round once the corpus has gained this many papers since the last round.")
    release_min_new_ratings: int = Field(
        1, ge=1, description="A new release once this many ratings changed since the last one.")

    @field_validator("stages")
    @classmethod
    def _stages(cls, v: list[str]) -> list[str]:
        for s in v:
            if s not in STAGE_NAMES:
                close = difflib.get_close_matches(s, STAGE_NAMES, n=1)
                raise ValueError(f"unknown refresh stage {s!r}" + (f" (did you mean {close[0]}?)" if close else "")
                                 + f"; stages: {', '.join(STAGE_NAMES)}")
        if len(set(v)) != len(v):
            raise ValueError("a refresh stage is listed twice")
        return sorted(v, key=STAGE_NAMES.index)


class AssignmentSettings(Section):
    """``revbench evaluate --assignment``: the assignment a program chair would solve on each scorer's affinities."""

    reviewers_per_paper: int = Field(3, ge=1, le=20, description="Reviewers each paper is assigned (fewer where it has fewer candidates).")
    max_load: int = Field(6, ge=1, le=100, description="Most papers one reviewer is assigned.")
    objective: Literal["sum", "fair"] = Field(
        "sum", description="sum: the largest total affinity (TPMS's linear program); fair: the worst-off paper's mean "
        "affinity as high as it can be first (max-min, after PeerReview4All), then the total.")


class AttackSettings(Section):
    """``revbench evaluate --attack``: the two-step collusion attack of Hsieh, Raghunathan and Shah (arXiv 2412.06606)."""

    start_ranks: list[int] = Field(default_factory=lambda: [20, 101, 501, 1001],
                                   description="Starting ranks of the attacked pairs among the paper's 7,900 reviewers "
                                   "(JSON list; each scaled to the benchmark's pool and stated).")
    pairs_per_rank: int = Field(10, ge=1, le=1000, description="Pairs (submission, reviewer) attacked at each starting rank.")
    min_profiles: list[int] = Field(default_factory=lambda: [1, 3],
                                    description="Minimum profile sizes tried (JSON list): the colluding reviewer keeps that "
                                    "many papers most similar to the target (1: the paper's attack; more: its first mitigation).")
    terms: int = Field(5, ge=1, le=30, description="The colluding reviewer's distinctive terms the rewritten abstract brings in.")
    rewrite: Literal["keywords", "llm"] = Field(
        "keywords", description="Who rewrites the abstract: keywords (offline: background sentences on the terms, "
        "deterministic) or llm (the configured LLM, as the paper did; an empty answer falls back to keywords).")
    seed: int = Field(0, description="Seed of the attacked pairs' draw.")

    @field_validator("start_ranks", "min_profiles")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v or any(x < 1 for x in v):
            raise ValueError("expected a JSON list of one or more whole numbers, each at least 1")
        return sorted(set(v))


class EmbedSettings(Section):
    """The embed flow: benchmark texts and reviewer profiles embedded by each model."""

    models: list[str] = Field(default_factory=lambda: ["all-MiniLM-L6-v2"],
                              description="Models to embed with (JSON list of recipes such as specter2 (`revbench models`), sentence-transformers names or paths, adapter folders, or hashing).")
    token_budget: int = Field(16384, ge=256, description="Padded tokens per batch on a GPU (the CPU encodes 32 texts a batch).")
    backend: Literal["auto", "torch", "onnx", "onnx-int8", "openvino"] = Field(
        "auto", description="Runtime of every sentence-transformers encode (pools, embed, evaluate, train's checks): torch, "
        "onnx, onnx-int8 (dynamic int8 quantisation), openvino, or auto (torch unless benchmarks.embed_bench measured "
        "another backend faster on this machine with the same results).")
    stand_ins: bool = Field(
        False, description="Accept files found where a recipe looks (specter, specter2, scincl) whose config.json states "
        "another architecture than the published model's, as a declared stand-in (the tests' tiny random models); every "
        "result made with one says stand_in=true. Off: such files are refused before any scoring.")

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[str]) -> list[str]:
        if not v or any(not m.strip() for m in v):
            raise ValueError("expected a JSON list of one or more model names or paths")
        return v


class TrainSettings(Section):
    """RATE-style training: keyword profiles, weak supervision, LoRA (defaults from the RATE paper)."""

    base_model: str = Field("all-MiniLM-L6-v2", description="Sentence-transformers model (name or path) the adapters train on.")
    keywords: Literal["auto", "llm", "yake"] = Field(
        "auto", description="Keyword extractor of reviewer profiles: llm, yake, or auto (the LLM when one is configured).")
    keywords_per_paper: int = Field(6, ge=1, le=20, description="Keywords YAKE takes from each paper.")
    profile_years: int = Field(2, ge=1, le=20, description="A profile is built from the reviewer's papers of the last N years.")
    profile_max_papers: int = Field(20, ge=1, description="Most recent papers per profile.")
    anchors: int = Field(2000, ge=1, description="Anchors (papers and reviewers) of the weak-supervision set.")
    paper_centric_share: float = Field(0.5, ge=0, le=1, description="Share of anchors that are papers (the rest are reviewer profiles).")
    candidates: int = Field(50, ge=3, description="Nearest candidates by embedding that BM25 ranks for each anchor.")
    negative_ratios: list[float] = Field(
        default_factory=lambda: [1 / 3, 1 / 10],
        description="Difficulty: a negative's BM25 score relative to the positive's, one negative each (JSON list, each in (0, 1)).")
    seed: int = Field(0, description="Seed of anchor sampling, data order, dropout and LoRA initialisation.")
    lora_r: int = Field(16, ge=1, description="LoRA rank.")
    lora_alpha: int = Field(32, ge=1, description="LoRA alpha (scaling alpha / r).")
    lora_dropout: float = Field(0.1, ge=0, lt=1, description="Dropout on the LoRA path.")
    target_modules: list[str] = Field(default_factory=lambda: ["query", "value"],
                                      description="Layers that get adapters (JSON list; q_proj/v_proj on Qwen-style models).")
    learning_rate: float = Field(2.3e-5, gt=0, le=1, description="AdamW learning rate.")
    temperature: float = Field(0.0634, gt=0, le=10, description="Temperature of both loss terms.")
    ce_weight: float = Field(0.915, ge=0, description="Weight of the in-batch InfoNCE term.")
    pairwise_weight: float = Field(1.0, ge=0, description="Weight of the pairwise logistic term.")
    batch_size: int = Field(4, ge=2, description="Triplets per step (InfoNCE needs two or more).")
    epochs: int = Field(15, ge=1, description="Passes over the training set.")
    max_steps: int = Field(0, ge=0, description="Stop after this many steps (0: all epochs).")
    checkpoint_every: int = Field(50, ge=1, description="Steps between checkpoints (a killed run resumes from the last).")
    max_seq_length: int = Field(256, ge=8, le=8192, description="Tokens per text during training.")
    attention_labels: Literal["citations", "authorship"] = Field(
        "citations", description="--objective attention: the weak labels it learns from (revbench labels' sources).")
    attention_experts: int = Field(15, ge=0, description="--objective attention: candidates are authors of more than N corpus papers.")
    attention_negatives: int = Field(20, ge=1, description="--objective attention: sampled non-positive candidates per training paper.")
    attention_learning_rate: float = Field(1e-3, gt=0, le=1, description="--objective attention: Adam learning rate.")
    attention_temperature: float = Field(0.1, gt=0, le=10, description="--objective attention: the attention's starting temperature (learned).")
    attention_batch_size: int = Field(16, ge=1, description="--objective attention: training papers per step.")

    @field_validator("negative_ratios")
    @classmethod
    def _ratios(cls, v: list[float]) -> list[float]:
        if not v or any(not 0 < r < 1 for r in v):
            raise ValueError("expected a JSON list of one or more ratios, each between 0 and 1 (exclusive)")
        return v

    @field_validator("target_modules")
    @classmethod
    def _targets(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected a JSON list of one or more layer names")
        return v


class ReplaySettings(Section):
    """Local replay server (demo, tests, benchmarks)."""

    host: str = Field("127.0.0.1", description="Bind address; loopback only.")
    port: int = Field(0, ge=0, description="0 picks a free port.")
    fault_rate: float = Field(0.0, ge=0, le=1, description="Share of requests answered with a transient fault.")
    fault_seed: int = Field(0, description="Seed of the fault schedule.")
    max_consecutive_faults: int = Field(2, ge=0, description="Faults in a row for one request before it succeeds.")
    timeout_delay_seconds: float = Field(2.0, ge=0, description="How long a 'timeout' fault stalls.")
    retry_after_seconds: int = Field(1, ge=0, description="Retry-After sent with injected 429s.")
    arxiv_quirk_rate: float = Field(
        0.05, ge=0, le=1, description="Share of arXiv pages answered the way arXiv sometimes does: "
        "short (fewer entries than asked though more exist), empty inside a result set, or an error feed."
    )
    s2_throttle_seconds: float = Field(
        0.0, ge=0, description="For this long after its first S2 request, every S2 request is answered 429 without Retry-After."
    )


class Settings(BaseSettings):
    """Root of the settings tree."""

    model_config = SettingsConfigDict(
        env_prefix="REVBENCH_", env_nested_delimiter="__", env_file=".env", extra="ignore", allow_inf_nan=False
    )

    data_dir: Path = Field(Path("data"), description="Everything written (warehouse, caches, releases).")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "INFO", description="Log level of revbench's own loggers (DEBUG, INFO, WARNING, ERROR, CRITICAL)."
    )
    mix_worlds: bool = Field(
        False, description="Let commands that fetch from real services (ingest, graph, pools, refresh, serve; "
        "--mix-worlds) write into a data folder of the demo's SYNTHETIC world; off, they refuse it before any work.")

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v
    http: HttpSettings = Field(default_factory=HttpSettings)
    arxiv: ArxivSettings = Field(default_factory=ArxivSettings)
    s2: SemanticScholarSettings = Field(default_factory=SemanticScholarSettings)
    openalex: OpenAlexSettings = Field(default_factory=OpenAlexSettings)
    pdf: PdfSettings = Field(default_factory=PdfSettings)
    grobid: GrobidSettings = Field(default_factory=GrobidSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    disambiguate: DisambiguateSettings = Field(default_factory=DisambiguateSettings)
    pools: PoolsSettings = Field(default_factory=PoolsSettings)
    warehouse: WarehouseSettings = Field(default_factory=WarehouseSettings)
    survey: SurveySettings = Field(default_factory=SurveySettings)
    ratings: RatingsSettings = Field(default_factory=RatingsSettings)
    release: ReleaseSettings = Field(default_factory=ReleaseSettings)
    smtp: SmtpSettings = Field(default_factory=SmtpSettings)
    runner: RunnerSettings = Field(default_factory=RunnerSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    backup: BackupSettings = Field(default_factory=BackupSettings)
    refresh: RefreshSettings = Field(default_factory=RefreshSettings)
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    assignment: AssignmentSettings = Field(default_factory=AssignmentSettings)
    attack: AttackSettings = Field(default_factory=AttackSettings)
    train: TrainSettings = Field(default_factory=TrainSettings)
    replay: ReplaySettings = Field(default_factory=ReplaySettings)

    def with_overrides(self, **changes: Any) -> Settings:
        """A validated copy with ``changes`` applied: a field by name, or a section as a dict
        merged into the current one, e.g. ``with_overrides(data_dir=p, http={"timeout_seconds": 2})``.
        The environment is not read again."""
        data = self.model_dump()
        for key, value in changes.items():
            if key not in type(self).model_fields:
                raise ValueError(f"no setting {key!r}; known: {', '.join(type(self).model_fields)}")
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return type(self).model_validate(data)

    @cached_property
    def warehouse_path(self) -> Path:
        return self.data_dir / "warehouse.duckdb"

    @cached_property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @cached_property
    def worlds_dir(self) -> Path:
        return self.data_dir / "worlds"

    @cached_property
    def survey_store_path(self) -> Path:
        return (self.survey.store_dir or self.data_dir) / "survey.sqlite"

    @cached_property
    def releases_dir(self) -> Path:
        return self.data_dir / "releases"


def check_environment(environ: Mapping[str, str], dotenv: Path | None = None) -> None:
    """Refuse ``REVBENCH_`` variables the settings tree does not have (a typo would otherwise be
    ignored and its default used), in the environment and in ``dotenv``."""
    known = set(env_names())
    sources: list[tuple[str, str]] = [(k, "the environment") for k in environ if k.upper().startswith("REVBENCH_")]
    if dotenv is not None and dotenv.is_file():
        for line in dotenv.read_text(errors="replace").splitlines():
            key = line.strip().removeprefix("export ").partition("=")[0].strip()
            if key.upper().startswith("REVBENCH_") and not line.lstrip().startswith("#"):
                sources.append((key, str(dotenv)))
    for key, where in sources:
        if key.upper() not in known:
            close = difflib.get_close_matches(key.upper(), sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else "; `revbench env-example` lists every setting"
            raise UsageError(f"unknown setting {key} in {where}{hint}")
    check_list_values(environ, dotenv)


def list_names() -> list[str]:
    """The variables of list settings: pydantic-settings reads their values as JSON."""
    return env_names(only_lists=True)


def check_list_values(environ: Mapping[str, str], dotenv: Path | None = None) -> None:
    """A list setting's value is a JSON list; anything else (``cs.AI,cs.CL``, ``[cs.AI``) is one
    line naming the variable and showing the value as JSON (pydantic-settings would only name the
    section it failed in)."""
    from dotenv import dotenv_values

    values: list[tuple[str, str | None, str]] = []
    if dotenv is not None and dotenv.is_file():
        values += [(k, v, str(dotenv)) for k, v in dotenv_values(dotenv).items()]
    values += [(k, v, "the environment") for k, v in environ.items()]
    lists = set(list_names())
    for key, value, where in values:
        if key.upper() not in lists or value is None:
            continue
        secret = "KEY" in key.upper()  # neither echoed nor rewritten
        named = key if secret else f"{key}={shown_value(value)}"
        try:
            json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            items = [x.strip().strip("'\"") for x in value.strip().strip("[]").split(",") if x.strip()]
            example = '["..."]' if secret or len(value) > 80 else json.dumps(items)
            raise UsageError(f"{named} in {where}: expected a JSON list, e.g. {key}='{example}'") from None
        except ValueError:  # Python's limit on the digits of an integer it converts
            raise UsageError(f"{named} in {where}: a number in it has too many digits") from None


def shown_value(value: Any) -> str:
    """A setting's value as an error shows it: a long one shortened, with its length."""
    text = re.sub(r"(?i)([a-z][a-z0-9+.-]*://)[^/?#\s'\"]*@", r"\1***@", repr(value))  # never a URL's password
    return text if len(text) <= 80 else f"{text[:20]}... ({len(str(value))} characters)"


def settings_error(exc: ValidationError, flags: Mapping[str, str] | None = None) -> UsageError:
    """A settings validation error as one line naming the variable (or the command-line flag
    that set it) and what was expected."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    name = (flags or {}).get(loc) or "REVBENCH_" + "__".join(str(p).upper() for p in err["loc"][:2])
    value = err.get("input")
    shown = "" if isinstance(value, (dict, SecretStr)) or "key" in loc else f"={shown_value(value)}"
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return UsageError(f"{name}{shown}: {err['msg'].removeprefix('Value error, ')}{more}")


def env_names(model: type[BaseModel] = Settings, prefix: str = "REVBENCH_", only_lists: bool = False) -> list[str]:
    """Every environment variable name the settings tree reads, in declaration order (with
    ``only_lists``, those of list, dict, set and tuple settings)."""
    containers = (list, dict, set, tuple)
    names: list[str] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            names.extend(env_names(ann, f"{prefix}{name.upper()}__", only_lists))
        elif not only_lists or get_origin(ann) in containers or any(get_origin(a) in containers for a in get_args(ann)):
            names.append(f"{prefix}{name.upper()}")
    return names



def render_env_example() -> str:
    """The text of ``.env.example``: every setting with its description and default."""
    lines = ["# revbench settings: every field, with its default. Copy to .env and edit.", ""]

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                lines.append(f"# [{name}] {ann.__doc__.strip().splitlines()[0] if ann.__doc__ else ''}")
                walk(ann, f"{prefix}{name.upper()}__")
                lines.append("")
                continue
            default = field.get_default(call_default_factory=True)
            if default is None:
                value = ""
            elif isinstance(default, list):
                value = json.dumps(default)
            elif isinstance(default, bool):
                value = str(default).lower()
            else:
                value = str(default)
            lines.append(f"# {field.description or name}")
            lines.append(f"{prefix}{name.upper()}={value}")

    walk(Settings, "REVBENCH_")
    return "\n".join(lines).rstrip() + "\n"
