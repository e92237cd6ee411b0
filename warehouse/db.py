"""The warehouse: the only place that opens DuckDB and writes SQL.

Stages hand it polars frames; it conforms them to the declared schema, upserts by natural key
and runs each load in one transaction so that a crash leaves nothing partial.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from revbench.errors import WarehouseBusy, WarehouseDamaged
from revbench.schemas.model import Table
from revbench.schemas.tables import (
    ARXIV_RECORDS,
    CRAWL_SLICES,
    DOCUMENTS,
    MENTIONS,
    PAPERS,
    REJECTS,
    RUN_STAGES,
    RUNS,
    S2_PAPERS,
    SCHEMA_VERSION_TABLE,
    TABLES,
    TRANSIENT_DOCUMENT_STATUSES,
)
from revbench.warehouse.ddl import create_table_sql
from revbench.warehouse.holder import describe, read_holder
from revbench.warehouse.migrations import LATEST_VERSION, migrations


def _q(name: str) -> str:
    return f'"{name}"'


_DAMAGE = re.compile(r"could not read enough bytes|corrupt database|not a valid duckdb database|checksum|"
                     r"failed to deserialize|serialization error", re.IGNORECASE)
"""What DuckDB says when a query reaches a block a truncated or damaged file no longer holds
(opening such a file can succeed: only the blocks a query reads are checked)."""


@contextmanager
def _interruptible(path: Path | None = None) -> Iterator[None]:
    """DuckDB answers Ctrl-C during a query by cancelling it and raising its own error; it is
    an interrupt, and the run must end as cancelled, not failed. A query that finds the file
    damaged ends with the damaged-warehouse message naming ``path``."""
    try:
        yield
    except (RuntimeError, duckdb.Error) as exc:
        # A KeyboardInterrupt raised while DuckDB scanned a registered frame comes back wrapped
        # ("... failed: KeyboardInterrupt: signal 15").
        if (isinstance(exc, duckdb.InterruptException) or "interrupted" in str(exc).lower()
                or "KeyboardInterrupt" in str(exc)):
            raise KeyboardInterrupt("interrupted during a warehouse query") from exc
        if path is not None and isinstance(exc, duckdb.Error) and _DAMAGE.search(str(exc)):
            raise WarehouseDamaged(_damaged(path, exc)) from exc
        raise


def _damaged(path: Path, exc: BaseException) -> str:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return (f"the warehouse {path} cannot be read ({first}); restore it from a backup, or move it aside "
            f"(mv {path} {path}.broken) and the next run starts a new one")


def utcnow() -> datetime:
    """Timezone-aware now, the only clock the warehouse stamps rows with."""
    return datetime.now(UTC)


class Warehouse:
    """A DuckDB file with the revbench schema, migrated on open."""

    def __init__(self, path: Path | str, read_only: bool = False, lock_wait: float = 0.0, memory_limit: str = "",
                 threads: int = 0):
        self.path = Path(path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.exists():
            raise FileNotFoundError(f"no warehouse at {self.path}; run an ingest first")
        self.read_only = read_only
        self.con = self._connect(lock_wait)
        self._in_tx = False
        try:
            self._exec("SET TimeZone = 'UTC'")
            # Beyond the limit DuckDB spills joins and sorts to <file>.tmp instead of failing or
            # growing without bound (the authors rebuild at full size wants ~5 GB otherwise).
            if memory_limit:
                self._exec(f"SET memory_limit = '{memory_limit}'")
            if threads:
                self._exec(f"SET threads = {int(threads)}")
            self._check_identity()
            if not read_only:
                self.migrate()
        except duckdb.Error as exc:
            self.con.close()
            raise WarehouseDamaged(_damaged(self.path, exc)) from exc
        except BaseException:
            self.con.close()
            raise

    def _connect(self, lock_wait: float) -> duckdb.DuckDBPyConnection:
        """Connect, waiting up to ``lock_wait`` seconds (bounded backoff) while another process
        holds the file; a file that is not a DuckDB database is named with how to recover."""
        deadline = time.monotonic() + lock_wait
        delay = 0.05
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=self.read_only)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise WarehouseDamaged(_damaged(self.path, exc)) from exc
                if time.monotonic() >= deadline:
                    holder = read_holder(self.path)
                    pid = re.search(r"PID (\d+)", str(exc))
                    who = describe(holder) if holder and holder.get("alive") else (
                        f"another process (pid {pid.group(1)})" if pid else "another process")
                    waited = f" after waiting {lock_wait:.0f} s" if lock_wait else ""
                    raise WarehouseBusy(f"the warehouse {self.path} is in use by {who}{waited}; "
                                        "run again when it has finished (`revbench status` shows its progress)") from exc
                time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
                delay = min(delay * 2, 1.0)
            except duckdb.Error as exc:
                raise WarehouseDamaged(_damaged(self.path, exc)) from exc

    def _check_identity(self) -> None:
        """Refuse a DuckDB file that is not a revbench warehouse, or one from a newer revbench."""
        tables = {r[0] for r in self._exec("SELECT table_name FROM information_schema.tables")}
        if tables and "schema_version" not in tables:
            shown = ", ".join(sorted(tables)[:5])
            raise WarehouseDamaged(f"{self.path} is a DuckDB database but not a revbench warehouse (tables: {shown}); "
                                   "point REVBENCH_DATA_DIR elsewhere, or move the file aside")
        if "schema_version" in tables:
            version = self._exec("SELECT max(version) FROM schema_version")[0][0] or 0
            if version > LATEST_VERSION:
                raise WarehouseDamaged(f"{self.path} has schema version {version}, newer than this revbench "
                                       f"knows ({LATEST_VERSION}); upgrade revbench to use it")

    @classmethod
    @contextmanager
    def open(cls, path: Path | str, read_only: bool = False, lock_wait: float = 0.0, memory_limit: str = "",
             threads: int = 0) -> Iterator[Warehouse]:
        """Open, yield, and always close (DuckDB holds a file lock while open)."""
        wh = cls(path, read_only=read_only, lock_wait=lock_wait, memory_limit=memory_limit, threads=threads)
        try:
            yield wh
        finally:
            wh.close()

    def close(self) -> None:
        self.con.close()

    def schema_version(self) -> int:
        if not self.read_only:
            self._exec(create_table_sql(SCHEMA_VERSION_TABLE))
        row = self._exec("SELECT max(version) FROM schema_version")[0]
        return int(row[0]) if row and row[0] is not None else 0

    def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied."""
        current = self.schema_version()
        applied: list[int] = []
        for m in migrations():
            if m.version <= current:
                continue
            with self.transaction():
                for stmt in m.statements:
                    self._exec(stmt)
                self._frame(
                    "INSERT INTO schema_version VALUES (?, ?, ?)", [m.version, utcnow(), m.description]
                )
            applied.append(m.version)
        return applied

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic unit; nested use joins the outer transaction."""
        if self._in_tx:
            yield
            return
        self._in_tx = True
        try:
            self._exec("BEGIN TRANSACTION")
            yield
            self._exec("COMMIT")
        except BaseException:
            self._abandon()
            raise
        finally:
            self._in_tx = False

    def _abandon(self) -> None:
        """Roll back whatever is open. An interrupt can land between BEGIN and the block, after
        COMMIT, or cancel the ROLLBACK itself; a transaction left open would make the run's
        'cancelled' record fail, so try again until DuckDB says none is open."""
        for _ in range(5):
            try:
                self.con.execute("ROLLBACK")
                return
            except duckdb.TransactionException:
                return  # none was open (never begun, committed, or already rolled back)
            except (KeyboardInterrupt, duckdb.InterruptException):
                continue
            except duckdb.Error:
                return

    def _exec(self, query: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        # DuckDB 2 refuses new work while a result is unfetched, so every statement is drained.
        with _interruptible(self.path):
            return self.con.execute(query, params).fetchall()

    def _frame(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """Run a query and return its rows as a polars frame."""
        with _interruptible(self.path):
            return self.con.sql(query, params=params).pl()

    def _register(self, table: Table, df: pl.DataFrame) -> str:
        name = f"_incoming_{table.name}"
        with _interruptible():
            self.con.register(name, table.conform(df).to_arrow())
        return name

    def upsert(self, table: Table, df: pl.DataFrame, only_if: str | None = None) -> int:
        """Insert or update rows by the table's natural key; ``only_if`` guards updates (SQL on
        ``excluded`` and the table)."""
        if df.height == 0:
            return 0
        df = df.unique(subset=list(table.primary_key), keep="last", maintain_order=True)
        src = self._register(table, df)
        cols = ", ".join(_q(c) for c in table.names)
        pk = ", ".join(_q(c) for c in table.primary_key)
        updates = [c for c in table.names if c not in table.primary_key]
        if updates:
            sets = ", ".join(f"{_q(c)} = excluded.{_q(c)}" for c in updates)
            action = f"DO UPDATE SET {sets}" + (f" WHERE {only_if}" if only_if else "")
        else:
            action = "DO NOTHING"
        with self.transaction():
            self._frame(
                f"INSERT INTO {_q(table.name)} ({cols}) SELECT {cols} FROM {src} ON CONFLICT ({pk}) {action}"
            )
        self.con.unregister(src)
        return df.height

    def delete_where_in(self, table: Table, column: str, values: Sequence[Any]) -> None:
        """Delete rows whose ``column`` is one of ``values``."""
        if not values:
            return
        self.con.register("_keys", pl.DataFrame({"k": list(values)}).to_arrow())
        with self.transaction():
            self._exec(f"DELETE FROM {_q(table.name)} WHERE {_q(column)} IN (SELECT k FROM _keys)")
        self.con.unregister("_keys")

    def read(self, table: Table, order_by: Sequence[str] | None = None) -> pl.DataFrame:
        """A whole table as a frame with its declared schema."""
        order = ", ".join(_q(c) for c in (order_by or table.primary_key))
        cols = ", ".join(_q(c) for c in table.names)
        df = self._frame(f"SELECT {cols} FROM {_q(table.name)} ORDER BY {order}")
        return table.conform(df) if df.height else table.empty()

    def count(self, table: Table) -> int:
        return int(self._exec(f"SELECT count(*) FROM {_q(table.name)}")[0][0])

    def table_counts(self) -> dict[str, int]:
        """Row counts of every declared table."""
        return {name: self.count(t) for name, t in TABLES.items() if name != "schema_version"}

    # runs

    def mark_crashed_runs(self) -> int:
        """Runs still 'running' when a new run starts died without finishing (DuckDB's lock
        means no other writer can be alive)."""
        with self.transaction():
            n = self._exec("SELECT count(*) FROM runs WHERE status = 'running'")[0][0]
            self._exec(
                "UPDATE runs SET status = 'crashed', finished_at = ? WHERE status = 'running'", [utcnow()]
            )
        return int(n)

    def start_run(self, run_id: str, flow: str, parameters: dict[str, Any], code_version: str) -> None:
        row = {
            "run_id": run_id,
            "flow": flow,
            "status": "running",
            "started_at": utcnow(),
            "parameters": json.dumps(parameters, default=str, sort_keys=True),
            "code_version": code_version,
        }
        self.upsert(RUNS, pl.DataFrame([row]))

    def record_run(self, run_id: str, flow: str, parameters: dict[str, Any], code_version: str, started_at: datetime,
                   status: str, error: str | None = None) -> None:
        """A finished run in one write (a run that holds no warehouse session while it works)."""
        row = {"run_id": run_id, "flow": flow, "status": status, "started_at": started_at, "finished_at": utcnow(),
               "parameters": json.dumps(parameters, default=str, sort_keys=True), "code_version": code_version,
               "error": error}
        self.upsert(RUNS, pl.DataFrame([row], schema=RUNS.polars_schema))

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        with self.transaction():
            self._exec(
                "UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE run_id = ?",
                [status, utcnow(), error, run_id],
            )

    def record_stage(
        self, run_id: str, stage: str, rows_in: int, rows_out: int, rejected: int, seconds: float
    ) -> None:
        row = dict(run_id=run_id, stage=stage, rows_in=rows_in, rows_out=rows_out, rejected=rejected, seconds=seconds)
        self.upsert(RUN_STAGES, pl.DataFrame([row]))

    def run_stages(self, run_id: str) -> pl.DataFrame:
        return self._frame(
            "SELECT stage, rows_in, rows_out, rejected, seconds FROM run_stages WHERE run_id = ? ORDER BY rowid",
            [run_id],
        )

    # crawl

    def completed_slices(self) -> set[tuple[str, datetime, datetime]]:
        rows = self._exec("SELECT category, slice_start, slice_end FROM crawl_slices")
        return {(c, s, e) for c, s, e in rows}

    def save_slice(self, records: pl.DataFrame, slice_row: dict[str, Any] | None) -> None:
        """Store a crawled slice's records and, for a closed slice, mark it done, atomically."""
        with self.transaction():
            # A newer version replaces an older one; an older one never overwrites a newer.
            self.upsert(ARXIV_RECORDS, records, only_if="excluded.version >= arxiv_records.version")
            if slice_row is not None:
                self.upsert(CRAWL_SLICES, pl.DataFrame([slice_row]))

    # enrich

    def ids_missing_s2(self) -> list[str]:
        rows = self._exec(
            "SELECT r.arxiv_id FROM arxiv_records r ANTI JOIN s2_papers s USING (arxiv_id) ORDER BY r.arxiv_id"
        )
        return [r[0] for r in rows]

    # documents

    def pending_documents(self) -> pl.DataFrame:
        """Latest versions with no final extraction outcome yet."""
        transient = ", ".join(f"'{s}'" for s in TRANSIENT_DOCUMENT_STATUSES)
        return self._frame(
            f"""SELECT r.arxiv_id, r.version FROM arxiv_records r
                LEFT JOIN documents d ON d.arxiv_id = r.arxiv_id AND d.version = r.version
                WHERE d.arxiv_id IS NULL OR d.status IN ({transient})
                ORDER BY r.arxiv_id"""
        )

    def previous_attempts(self, keys: pl.DataFrame) -> dict[tuple[str, int], int]:
        if keys.height == 0:
            return {}
        self.con.register("_k", keys.select("arxiv_id", "version").to_arrow())
        rows = self._exec(
            "SELECT d.arxiv_id, d.version, d.attempts FROM documents d JOIN _k USING (arxiv_id, version)"
        )
        self.con.unregister("_k")
        return {(a, v): n for a, v, n in rows}

    def save_documents(self, docs: pl.DataFrame) -> None:
        self.upsert(DOCUMENTS, docs)

    # reconcile and load

    def reconcile_inputs(self) -> pl.DataFrame:
        """Each paper's latest arXiv record with its extraction and S2 lookup (documents never
        attempted, or whose service could not be reached, are left out: pending, not rejected)."""
        transient = ", ".join(f"'{s}'" for s in TRANSIENT_DOCUMENT_STATUSES)
        df = self._frame(
            f"""SELECT r.arxiv_id, r.version, r.title, r.abstract, r.authors, r.primary_category,
                      r.categories, r.published, r.updated, r.record_hash,
                      r.journal_ref, r.doi, r.author_affiliations,
                      d.status AS doc_status, d.detail AS doc_detail, d.pdf_sha256, d.tei_sha256,
                      d.pdf_title, d.pdf_abstract, d.pdf_authors, d.pdf_orphan_affiliations,
                      s.found AS s2_found, s.s2_paper_id, s.authors AS s2_authors,
                      s.record_hash AS s2_hash
               FROM arxiv_records r
               JOIN documents d ON d.arxiv_id = r.arxiv_id AND d.version = r.version
               LEFT JOIN s2_papers s ON s.arxiv_id = r.arxiv_id
               WHERE d.status NOT IN ({transient})
               ORDER BY r.arxiv_id"""
        )
        return df

    def loaded_input_hashes(self) -> set[str]:
        rows = self._exec(
            "SELECT input_hash FROM papers UNION ALL SELECT input_hash FROM rejects"
        )
        return {r[0] for r in rows}

    def load_corpus(self, papers: pl.DataFrame, mentions: pl.DataFrame, rejects: pl.DataFrame) -> None:
        """Write accepted papers with their mentions and rejected papers with their reasons, in
        one transaction; a paper's mentions are replaced whole, and a rejected later version
        removes the paper from the corpus."""
        accepted = papers["arxiv_id"].to_list() if papers.height else []
        rejected = rejects["arxiv_id"].to_list() if rejects.height else []
        with self.transaction():
            self.delete_where_in(MENTIONS, "arxiv_id", accepted + rejected)
            self.delete_where_in(PAPERS, "arxiv_id", rejected)
            self.delete_where_in(REJECTS, "arxiv_id", accepted)
            self.upsert(PAPERS, papers)
            self.upsert(MENTIONS, mentions)
            self.upsert(REJECTS, rejects)

    def mentions_with_years(self) -> pl.DataFrame:
        """Mentions of loaded papers with the paper's year and title, for disambiguation."""
        return self._frame(
            """SELECT m.arxiv_id, m.position, m.name, m.email, m.institution, m.affiliation, m.affiliations, m.orcid,
                      m.s2_author_id, p.year, p.title
               FROM mentions m JOIN papers p USING (arxiv_id) ORDER BY m.arxiv_id, m.position"""
        )

    def block_hashes(self) -> dict[str, str]:
        return dict(self._exec("SELECT block_key, input_hash FROM author_blocks"))

    def save_blocks(self, links: pl.DataFrame, blocks: pl.DataFrame, decisions: pl.DataFrame, drop_blocks: list[str]) -> None:
        """Replace the links of re-decided and vanished blocks, atomically."""
        from revbench.schemas.tables import AUTHOR_BLOCKS, AUTHOR_LINKS, LLM_DECISIONS

        changed = blocks["block_key"].to_list() if blocks.height else []
        with self.transaction():
            self.delete_where_in(AUTHOR_LINKS, "block_key", changed + drop_blocks)
            self.delete_where_in(AUTHOR_BLOCKS, "block_key", drop_blocks)
            # Keyed by (arxiv_id, position): a mention that moved to another block is replaced here.
            self.upsert(AUTHOR_LINKS, links)
            self.upsert(AUTHOR_BLOCKS, blocks)
            self.upsert(LLM_DECISIONS, decisions)

    def rebuild_authors(self, recent_since_year: int) -> None:
        """Recompute authors and co-authorship edges from the links (set-based, in one go)."""
        with self.transaction():
            self._exec("DELETE FROM authors")
            self._exec("DELETE FROM coauthor_edges")
            self._exec(
                """INSERT INTO authors
                   SELECT l.author_id, mode(m.name), count(*), count(DISTINCT l.arxiv_id),
                          count(DISTINCT CASE WHEN p.year >= ? THEN l.arxiv_id END), min(p.year), max(p.year),
                          list_sort(list_distinct(list(m.email) FILTER (WHERE m.email IS NOT NULL))),
                          list_sort(list_distinct(flatten(list(list_concat([coalesce(m.institution, m.affiliation)],
                              list_transform(m.affiliations, lambda x: coalesce(x.institution, x.text))))))),
                          list_sort(list_distinct(list(m.s2_author_id) FILTER (WHERE m.s2_author_id IS NOT NULL))),
                          list_sort(list_distinct(list(l.method)))
                   FROM author_links l JOIN mentions m USING (arxiv_id, position) JOIN papers p USING (arxiv_id)
                   GROUP BY l.author_id""",
                [recent_since_year],
            )
            self._exec(
                """INSERT INTO coauthor_edges
                   SELECT a.author_id, b.author_id, count(DISTINCT a.arxiv_id), min(p.year), max(p.year)
                   FROM author_links a JOIN author_links b ON a.arxiv_id = b.arxiv_id AND a.author_id < b.author_id
                   JOIN papers p ON p.arxiv_id = a.arxiv_id
                   GROUP BY a.author_id, b.author_id"""
            )

    def pool_inputs(self) -> dict[str, pl.DataFrame]:
        """What candidate pools are built from: papers, authorship links, co-authorship, authors."""
        return {
            "papers": self._frame("SELECT arxiv_id, title, abstract, primary_category, year FROM papers ORDER BY arxiv_id"),
            "links": self._frame("SELECT arxiv_id, author_id FROM author_links ORDER BY arxiv_id, position"),
            "edges": self._frame("SELECT author_a, author_b FROM coauthor_edges"),
            "authors": self._frame("SELECT author_id, name, emails, affiliations, s2_author_ids FROM authors ORDER BY author_id"),
            "author_years": self._frame(
                "SELECT l.author_id, l.arxiv_id, p.year FROM author_links l JOIN papers p USING (arxiv_id)"
            ),
        }

    def earlier_queries(self, round_: int) -> set[str]:
        """Query papers of the current versions of rounds before ``round_``."""
        return {r[0] for r in self._exec(
            """SELECT DISTINCT q.arxiv_id FROM query_samples q
               JOIN pool_rounds r ON r.round = q.round AND r.revision = q.revision AND r.status = 'current'
               WHERE q.round < ?""", [round_])}

    def fetched_s2_authors(self) -> set[str]:
        return {r[0] for r in self._exec("SELECT DISTINCT s2_author_id FROM s2_author_papers")}

    def s2_papers_of(self, s2_ids: list[str]) -> pl.DataFrame:
        """Fetched S2 papers of these S2 author ids: ``s2_author_id, paper_key, year, arxiv_id``."""
        if not s2_ids:
            return pl.DataFrame(schema={"s2_author_id": pl.Utf8, "paper_key": pl.Utf8, "year": pl.Int64, "arxiv_id": pl.Utf8})
        self.con.register("_ids", pl.DataFrame({"s2_author_id": s2_ids}, schema={"s2_author_id": pl.Utf8}).to_arrow())
        df = self._frame(
            "SELECT s2_author_id, paper_key, year, arxiv_id FROM s2_author_papers JOIN _ids USING (s2_author_id) WHERE paper_key <> ''"
        )
        self.con.unregister("_ids")
        return df

    def round_state(self, round_: int) -> dict[str, Any] | None:
        """The current version of a round: ``revision, params_hash, parameters, invitations``
        (a round written before versions existed counts as revision 1 with unknown parameters)."""
        rows = self._exec(
            "SELECT revision, params_hash, parameters, invitations FROM pool_rounds WHERE round = ? AND status = 'current'",
            [round_])
        if rows:
            rev, h, params, n = rows[0]
            return {"revision": rev, "params_hash": h, "parameters": json.loads(params), "invitations": n}
        n = self._exec("SELECT count(*) FROM invitations WHERE round = ?", [round_])[0][0]
        if n:
            return {"revision": 1, "params_hash": None, "parameters": {}, "invitations": int(n)}
        return None

    def read_round(self, table: Table, round_: int) -> pl.DataFrame:
        """A pool table's rows of the current version of a round."""
        state = self.round_state(round_)
        if state is None:
            return table.empty()
        return self.read(table).filter((pl.col("round") == round_) & (pl.col("revision") == state["revision"]))

    def save_round(self, round_: int, frames: dict[str, pl.DataFrame], params_hash: str, parameters: dict[str, Any],
                   run_id: str, replace: bool) -> int:
        """Write one round, atomically, and return its revision. Without ``replace`` the current
        version is rewritten in place (an identical re-run); with it, the current version is
        marked superseded and kept, and the new one gets the next revision."""
        from revbench.schemas.tables import POOL_ROUNDS, TABLES

        with self.transaction():
            state = self.round_state(round_)
            last = self._exec("SELECT coalesce(max(revision), 0) FROM pool_rounds WHERE round = ?", [round_])[0][0]
            if state is not None and replace:
                self._exec("UPDATE pool_rounds SET status = 'superseded', superseded_at = ? WHERE round = ? AND status = 'current'",
                           [utcnow(), round_])
                if not last:  # a round from before versions: record what it was
                    self.upsert(POOL_ROUNDS, pl.DataFrame([dict(round=round_, revision=1, status="superseded", params_hash="unknown",
                                                                parameters="{}", invitations=state["invitations"],
                                                                created_at=utcnow(), superseded_at=utcnow())]))
                revision = max(last, state["revision"]) + 1
            else:
                revision = state["revision"] if state is not None else last + 1
                for name in frames:
                    self._exec(f"DELETE FROM {_q(name)} WHERE round = ? AND revision = ?", [round_, revision])
            for name, df in frames.items():
                self.upsert(TABLES[name], df.with_columns(pl.lit(round_, dtype=pl.Int64).alias("round"),
                                                          pl.lit(revision, dtype=pl.Int64).alias("revision")))
            self.upsert(POOL_ROUNDS, pl.DataFrame([dict(
                round=round_, revision=revision, status="current", params_hash=params_hash,
                parameters=json.dumps(parameters, sort_keys=True, default=str), invitations=frames["invitations"].height,
                run_id=run_id, created_at=utcnow(), superseded_at=None)]))
        return revision

    # survey

    def survey_candidates(self, round_: int) -> pl.DataFrame:
        """The current version of a round's invitations with what the email needs: ``author_id,
        email, name, query_ids, example_paper`` (the candidate's own paper behind their strongest
        evidence), ``round, revision``."""
        state = self.round_state(round_)
        if state is None:
            return pl.DataFrame()
        return self._frame(
            """WITH ex AS (
                   SELECT e.author_id, arg_max(p.title, e.similarity) AS example_paper
                   FROM pool_evidence e JOIN papers p ON p.arxiv_id = e.neighbor_id
                   WHERE e.round = ? AND e.revision = ? GROUP BY e.author_id)
               SELECT i.author_id, i.email, i.name, i.query_ids, ex.example_paper, i.round, i.revision
               FROM invitations i LEFT JOIN ex USING (author_id)
               WHERE i.round = ? AND i.revision = ? ORDER BY i.author_id""",
            [round_, state["revision"], round_, state["revision"]])

    def paper_texts(self, ids: list[str]) -> dict[str, dict[str, str]]:
        """``arxiv_id -> {title, abstract}``."""
        if not ids:
            return {}
        self.con.register("_ids", pl.DataFrame({"arxiv_id": ids}).to_arrow())
        rows = self._exec("SELECT arxiv_id, title, abstract FROM papers JOIN _ids USING (arxiv_id)")
        self.con.unregister("_ids")
        return {a: {"title": t, "abstract": ab} for a, t, ab in rows}

    def survey_invitations(self, round_: int | None = None) -> pl.DataFrame:
        from revbench.schemas.tables import SURVEY_INVITATIONS

        df = self.read(SURVEY_INVITATIONS)
        return df if round_ is None else df.filter(pl.col("round") == round_)

    def survey_messages(self, round_: int | None = None) -> pl.DataFrame:
        from revbench.schemas.tables import SURVEY_MESSAGES

        df = self.read(SURVEY_MESSAGES)
        return df if round_ is None else df.filter(pl.col("round") == round_)

    def contacted_emails(self, before_round: int) -> set[str]:
        """Addresses a message was sent to in an earlier round."""
        return {r[0] for r in self._exec(
            """SELECT DISTINCT i.email FROM survey_invitations i JOIN survey_messages m USING (invitation_id)
               WHERE m.state IN ('sent', 'unconfirmed') AND i.round < ?""", [before_round])}

    def opted_out_emails(self) -> set[str]:
        return {r[0] for r in self._exec("SELECT email FROM survey_opt_outs")}

    def set_message_state(self, message_id: str, state: str, reply: str | None = None, attempts: int | None = None,
                          sent_at: datetime | None = None, unconfirmed_at: datetime | None = None,
                          smtp_server: str | None = None) -> None:
        """Move one message on (committed at once: a crash never forgets a sent message)."""
        with self.transaction():
            self._exec(
                """UPDATE survey_messages SET state = ?, smtp_reply = coalesce(?, smtp_reply),
                          attempts = coalesce(?, attempts), sent_at = coalesce(?, sent_at),
                          unconfirmed_at = coalesce(?, unconfirmed_at), smtp_server = coalesce(?, smtp_server)
                   WHERE message_id = ?""",
                [state, reply, attempts, sent_at, unconfirmed_at, smtp_server, message_id])

    def mark_unconfirmed(self) -> int:
        """Messages left 'sending' by a process that died mid-send: they may or may not have left."""
        with self.transaction():
            n = self._exec("SELECT count(*) FROM survey_messages WHERE state = 'sending'")[0][0]
            self._exec("UPDATE survey_messages SET state = 'unconfirmed', unconfirmed_at = ?, smtp_reply = "
                       "'the run sending it stopped before the reply was recorded' WHERE state = 'sending'", [utcnow()])
        return int(n)

    def message_state_counts(self) -> list[tuple[str, str, int]]:
        """``(kind, state, messages)`` of the survey messages (read-only safe on any schema version)."""
        return [(k, st, int(n)) for k, st, n in self._exec(
            "SELECT kind, state, count(*) FROM survey_messages GROUP BY kind, state ORDER BY kind, state")]

    def unconfirmed_messages(self, round_: int | None = None) -> pl.DataFrame:
        """Messages that may or may not have arrived, oldest first: ``message_id, to_email, kind, round,
        unconfirmed_at, smtp_server, smtp_reply`` (the last three null in a warehouse not yet migrated)."""
        migrated = self._exec("SELECT count(*) FROM information_schema.columns WHERE table_name = 'survey_messages' "
                              "AND column_name = 'unconfirmed_at'")[0][0]
        extra = "unconfirmed_at, smtp_server" if migrated else "NULL::TIMESTAMPTZ AS unconfirmed_at, NULL::VARCHAR AS smtp_server"
        return self._frame(
            f"""SELECT message_id, to_email, kind, round, {extra}, smtp_reply FROM survey_messages
                WHERE state = 'unconfirmed' AND (?::BIGINT IS NULL OR round = ?::BIGINT)
                ORDER BY unconfirmed_at NULLS LAST, message_id""", [round_, round_])

    # refresh

    def digest(self, table: Table, columns: Sequence[str]) -> str:
        """Row count and an order-free hash of ``columns`` over ``table``: equal digests mean
        (with overwhelming probability) equal contents, at the cost of one scan."""
        cols = ", ".join(_q(c) for c in columns)
        n, h = self._exec(f"SELECT count(*), coalesce(bit_xor(hash({cols})), 0) FROM {_q(table.name)}")[0]
        return f"{n}:{int(h):016x}"

    def last_refresh_fingerprint(self, stage: str) -> tuple[str, str, datetime] | None:
        """``(fingerprint, refresh_id, finished_at)`` of the last refresh that ran ``stage``."""
        rows = self._exec(
            "SELECT fingerprint, refresh_id, finished_at FROM refresh_stages WHERE stage = ? AND status = 'ran' "
            "ORDER BY finished_at DESC LIMIT 1", [stage])
        return tuple(rows[0]) if rows else None  # type: ignore[return-value]

    def latest_round(self) -> dict[str, Any] | None:
        """The newest round's current version: ``round, revision, invitations, created_at``."""
        rows = self._exec("SELECT round, revision, invitations, created_at FROM pool_rounds WHERE status = 'current' "
                          "ORDER BY round DESC LIMIT 1")
        return dict(zip(("round", "revision", "invitations", "created_at"), rows[0], strict=True)) if rows else None

    def papers_loaded_since(self, when: datetime) -> int:
        """Corpus papers (new, or a new version) loaded by runs that started after ``when``."""
        return int(self._exec("SELECT count(*) FROM papers p JOIN runs r USING (run_id) WHERE r.started_at > ?",
                              [when])[0][0])

    def invitations_sent(self, round_: int) -> int:
        """Invitation emails of a round that left (sent or unconfirmed)."""
        return int(self._exec("SELECT count(*) FROM survey_messages WHERE round = ? AND kind = 'invitation' "
                              "AND state IN ('sent', 'unconfirmed')", [round_])[0][0])

    def latest_release(self) -> dict[str, Any] | None:
        """The newest release built: ``version, status, built_at``."""
        rows = self._exec("SELECT version, status, built_at FROM releases ORDER BY built_at DESC LIMIT 1")
        return dict(zip(("version", "status", "built_at"), rows[0], strict=True)) if rows else None

    def ratings_since(self, when: datetime | None) -> int:
        """Ratings answered after ``when`` (all of them when ``None``)."""
        if when is None:
            return int(self._exec("SELECT count(*) FROM ratings")[0][0])
        return int(self._exec("SELECT count(*) FROM ratings WHERE rated_at > ?", [when])[0][0])

    # ratings

    def survey_epoch_marks(self) -> dict[str, tuple[int, str | None]]:
        """Each survey store epoch pulled from -> ``(high_water, digest of that event)``: the
        marks recorded by pulls, else (events pulled before epochs had marks) the highest id in
        ``survey_events``, whichever is higher."""
        rows = self._exec(
            """SELECT epoch, max(high_water), arg_max(digest, high_water) FROM (
                   SELECT epoch, high_water, high_water_digest AS digest FROM survey_epochs
                   UNION ALL SELECT epoch, event_id, digest FROM survey_events) GROUP BY epoch""")
        return {e: (int(h), d) for e, h, d in rows}


    def ratings_context(self) -> dict[str, pl.DataFrame]:
        """What turning survey events into ratings needs: ``invitations`` (``invitation_id,
        reviewer_id, round, paper_ids``), ``categories`` (``paper_id, category``) and
        ``similarity`` (``reviewer_id, paper_id, similarity``: the candidate's strongest pool
        evidence for the paper, over every revision of its round)."""
        return {
            "invitations": self._frame(
                """SELECT invitation_id, author_id AS reviewer_id, round, paper_ids FROM survey_invitations
                   ORDER BY invitation_id"""),
            "categories": self._frame("SELECT arxiv_id AS paper_id, primary_category AS category FROM papers"),
            "similarity": self._frame(
                """SELECT author_id AS reviewer_id, query_id AS paper_id, max(similarity) AS similarity
                   FROM pool_evidence GROUP BY ALL ORDER BY ALL"""),
        }

    def replace_all(self, table: Table, df: pl.DataFrame) -> int:
        """Replace every row of a derived table with ``df`` in one transaction (a crash keeps the old rows)."""
        with self.transaction():
            self._exec(f"DELETE FROM {_q(table.name)}")
            if df.height:
                src = self._register(table, df)
                cols = ", ".join(_q(c) for c in table.names)
                self._exec(f"INSERT INTO {_q(table.name)} ({cols}) SELECT {cols} FROM {src}")
                self.con.unregister(src)
        return df.height

    def benchmark_frames(self, profile_max_papers: int | None) -> dict[str, pl.DataFrame]:
        """The warehouse benchmark: kept ``ratings`` (``reviewer_id, paper_id, rating``), their
        ``papers`` (``paper_id, title, abstract, year``), each rater's ``profiles`` (their most
        recent corpus papers, at most ``profile_max_papers`` or all with None, rated papers left
        out) and the ``tuples``."""
        ratings = self._frame(
            """SELECT reviewer_id, paper_id, rating::DOUBLE AS rating FROM ratings WHERE status = 'kept'
               ORDER BY reviewer_id, paper_id""")
        papers = self._frame(
            """SELECT arxiv_id AS paper_id, title, abstract, year FROM papers
               WHERE arxiv_id IN (SELECT paper_id FROM ratings WHERE status = 'kept') ORDER BY arxiv_id""")
        profiles = self._frame(
            """WITH raters AS (SELECT DISTINCT reviewer_id FROM ratings WHERE status = 'kept'),
                    authored AS (
                        SELECT DISTINCT l.author_id AS reviewer_id, p.arxiv_id AS paper_id, p.title, p.abstract, p.year,
                               p.updated
                        FROM author_links l JOIN raters r ON r.reviewer_id = l.author_id
                        JOIN papers p ON p.arxiv_id = l.arxiv_id
                        WHERE p.arxiv_id NOT IN (SELECT paper_id FROM ratings)),
                    ranked AS (SELECT *, row_number() OVER (PARTITION BY reviewer_id ORDER BY updated DESC, paper_id) AS k
                               FROM authored)
               SELECT reviewer_id, paper_id, title, abstract, year FROM ranked WHERE k <= coalesce(?, k)
               ORDER BY reviewer_id, paper_id""", [profile_max_papers])
        tuples = self.read(TABLES["rating_tuples"])
        return {"ratings": ratings, "papers": papers, "profiles": profiles, "tuples": tuples}

    def release_inputs(self) -> dict[str, Any]:
        """What a release is built from: the benchmark frames (papers with their category, every
        rater's corpus papers as profile), the people (``person_id, name, email``) and affiliations
        the privacy audit looks for, and the latest completed run of each flow (the runs the
        release came from)."""
        f = self.benchmark_frames(profile_max_papers=None)
        f["papers"] = f["papers"].join(self._frame("SELECT arxiv_id AS paper_id, primary_category AS category FROM papers"),
                                       on="paper_id", how="left")
        # Every spelling of every person the warehouse knows, with an id to name in the audit: a
        # mention not linked to an author yet is named by its paper and position.
        people = self._frame(
            """WITH m AS (SELECT coalesce(l.author_id, m.arxiv_id || '#' || m.position) AS person_id, m.name, m.pdf_name,
                                 m.email
                          FROM mentions m LEFT JOIN author_links l USING (arxiv_id, position))
               SELECT DISTINCT person_id, name, email FROM (
                   SELECT author_id AS person_id, name, NULL AS email FROM authors
                   UNION ALL SELECT author_id, name, unnest(emails) FROM authors
                   UNION ALL SELECT person_id, name, email FROM m
                   UNION ALL SELECT person_id, pdf_name, email FROM m
                   UNION ALL SELECT author_id, name, email FROM survey_invitations
                   UNION ALL SELECT author_id, name, email FROM invitations)
               WHERE name IS NOT NULL OR email IS NOT NULL
               ORDER BY ALL""")
        affiliations = {r[0] for r in self._exec(
            """SELECT institution FROM mentions UNION SELECT department FROM mentions UNION SELECT affiliation FROM mentions
               UNION SELECT unnest(affiliations) FROM authors""") if r[0]}
        runs = dict(self._exec(
            "SELECT flow, arg_max(run_id, started_at) FROM runs WHERE status = 'completed' GROUP BY flow ORDER BY flow"))
        return {**f, "people": people, "affiliations": affiliations, "runs": runs}

    def release_state(self, version: str) -> dict[str, Any] | None:
        """A release's row in ``releases`` (status, who decided, manifest hash), or None."""
        df = self._frame("SELECT * FROM releases WHERE version = ?", [version])
        return df.row(0, named=True) if df.height else None

    def releases(self) -> pl.DataFrame:
        """Every release recorded, oldest build first: ``version, parent, status, manifest_sha256,
        built_at, superseded_by``."""
        return self._frame("SELECT version, parent, status, manifest_sha256, built_at, superseded_by FROM releases "
                           "ORDER BY built_at, version")

    def set_release_status(self, version: str, status: str, decided_by: str, reason: str, run_id: str) -> None:
        """Record the curator's decision on a release. A release published supersedes every
        published one built before it that nothing superseded yet, and is itself superseded by
        the first published one built after it, if any (all stay published)."""
        with self.transaction():
            self._exec("UPDATE releases SET status = ?, decided_by = ?, reason = ?, decided_at = ?, run_id = ? "
                       "WHERE version = ?", [status, decided_by, reason, utcnow(), run_id, version])
            if status != "published":
                return
            self._exec(
                """UPDATE releases SET superseded_by = ? WHERE status = 'published' AND superseded_by IS NULL
                   AND version <> ? AND built_at < (SELECT built_at FROM releases WHERE version = ?)""",
                [version, version, version])
            self._exec(
                """UPDATE releases SET superseded_by = (
                       SELECT n.version FROM releases n, releases me WHERE me.version = ? AND n.status = 'published'
                       AND n.version <> me.version AND n.built_at > me.built_at ORDER BY n.built_at, n.version LIMIT 1)
                   WHERE version = ?""", [version, version])

    def release_results(self, metric: str, split: str) -> pl.DataFrame:
        """``scorer, version, manifest_sha256, value, ci_low, ci_high`` of ``metric`` on ``split``
        for every published release evaluated (the latest evaluation of each), releases in the
        order they were built. Only rows evaluated on the release's recorded manifest count: a
        version's name alone does not attach results to it."""
        return self._frame(
            """WITH latest AS (
                   SELECT e.*, r.built_at, r.manifest_sha256,
                          row_number() OVER (PARTITION BY e.benchmark_version, e.scorer ORDER BY e.evaluated_at DESC) AS k
                   FROM eval_results e JOIN releases r
                     ON r.version = e.benchmark_version AND r.manifest_sha256 = e.benchmark_digest
                   WHERE e.benchmark = 'release' AND e.metric = ? AND e.split = ? AND r.status = 'published')
               SELECT scorer, benchmark_version AS version, manifest_sha256, value, ci_low, ci_high
               FROM latest WHERE k = 1 ORDER BY built_at, version, scorer""", [metric, split])

    def has_table(self, name: str) -> bool:
        return bool(self._exec("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name])[0][0])

    def corpus_papers(self) -> pl.DataFrame:
        """The loaded corpus: ``arxiv_id, title, abstract, year, primary_category``."""
        return self._frame("SELECT arxiv_id, title, abstract, year, primary_category FROM papers ORDER BY arxiv_id")

    def training_inputs(self, profile_years: int, profile_max_papers: int) -> dict[str, pl.DataFrame]:
        """What weak supervision is built from, rated papers held out everywhere (they are the
        benchmark a trained model is judged on): ``papers`` (``paper_id, title, abstract, year``),
        each author's ``recent`` papers for their profile (``reviewer_id, paper_id``: those of
        the last ``profile_years`` years before the newest paper, at most
        ``profile_max_papers``, newest first) and every ``authored`` pair."""
        held_out = "SELECT paper_id FROM ratings"
        papers = self._frame(
            f"""SELECT arxiv_id AS paper_id, title, abstract, year FROM papers
                WHERE arxiv_id NOT IN ({held_out}) ORDER BY arxiv_id""")
        recent = self._frame(
            f"""WITH newest AS (SELECT max(year) AS y FROM papers),
                     authored AS (
                         SELECT DISTINCT l.author_id AS reviewer_id, p.arxiv_id AS paper_id, p.updated
                         FROM author_links l JOIN papers p USING (arxiv_id), newest
                         WHERE p.year > newest.y - ? AND p.arxiv_id NOT IN ({held_out})),
                     ranked AS (SELECT *, row_number() OVER (PARTITION BY reviewer_id ORDER BY updated DESC, paper_id) AS k
                                FROM authored)
                SELECT reviewer_id, paper_id FROM ranked WHERE k <= ? ORDER BY reviewer_id, paper_id""",
            [profile_years, profile_max_papers])
        authored = self._frame(
            "SELECT DISTINCT author_id AS reviewer_id, arxiv_id AS paper_id FROM author_links ORDER BY reviewer_id, paper_id")
        return {"papers": papers, "recent": recent, "authored": authored, "held_out": self.rated_papers()}

    def rated_papers(self) -> list[str]:
        """Every paper with a rating (kept or dropped), sorted."""
        return [r[0] for r in self._exec("SELECT DISTINCT paper_id FROM ratings ORDER BY paper_id")]

    def rejected_papers(self, run_id: str) -> pl.DataFrame:
        """Papers a run rejected: ``arxiv_id, version, title, reason, detail``."""
        return self._frame(
            """SELECT j.arxiv_id, j.version, r.title, j.reason, left(j.detail, 200) AS detail
               FROM rejects j LEFT JOIN arxiv_records r USING (arxiv_id)
               WHERE j.run_id = ? ORDER BY j.reason, j.arxiv_id""", [run_id])

    def links_by_method(self) -> dict[str, int]:
        """Mentions linked by each disambiguation method."""
        return dict(self._exec("SELECT method, count(*) AS n FROM author_links GROUP BY method ORDER BY n DESC"))

    def latest_runs(self, n: int = 5) -> pl.DataFrame:
        """The ``n`` most recently started runs: ``run_id, flow, status, started_at, finished_at``."""
        return self._frame(
            "SELECT run_id, flow, status, started_at, finished_at FROM runs ORDER BY started_at DESC LIMIT ?", [n]
        )

    def reject_counts(self) -> pl.DataFrame:
        return self._frame(
            "SELECT reason, count(*) AS n FROM rejects GROUP BY reason ORDER BY n DESC, reason"
        )

    def snapshot(self) -> dict[str, pl.DataFrame]:
        """Every corpus table without run bookkeeping or timestamps, for comparing runs."""
        out: dict[str, pl.DataFrame] = {}
        volatile = {"run_id", "crawled_at", "fetched_at", "extracted_at", "loaded_at", "recorded_at", "completed_at", "attempts", "detail"}
        for table in (ARXIV_RECORDS, S2_PAPERS, DOCUMENTS, PAPERS, MENTIONS, REJECTS):
            df = self.read(table)
            out[table.name] = df.drop([c for c in df.columns if c in volatile])
        return out

