"""Evaluation results: a scorer's metrics on a benchmark version, and those on published releases.

Owns ``eval_results`` (written by the evaluate stage).
"""

from __future__ import annotations

import polars as pl

from revbench.errors import RevbenchError
from revbench.schemas.model import Table
from revbench.schemas.tables import EVAL_RESULTS
from revbench.warehouse.ddl import duckdb_type
from revbench.warehouse.slice import Slice


class EvaluateSlice(Slice):
    """The latest results of each scorer, on every benchmark and on the published releases."""

    stage = "evaluate"

    def upsert(self, table: Table, df: pl.DataFrame, only_if: str | None = None,
               sets: dict[str, str] | None = None) -> int:
        """:meth:`Slice.upsert`, refusing an ``eval_results`` row that would take the key of a row of
        another baseline (see :meth:`check_result_keys`) instead of replacing or dropping one of them."""
        if table.name == EVAL_RESULTS.name:
            self.check_result_keys(df)
        return super().upsert(table, df, only_if, sets)

    def insert(self, table: Table, df: pl.DataFrame) -> int:
        """:meth:`Slice.insert`, refusing what :meth:`upsert` refuses in one line."""
        if table.name == EVAL_RESULTS.name:
            self.check_result_keys(df)
        return super().insert(table, df)

    def check_result_keys(self, df: pl.DataFrame) -> None:
        """Raise, naming the row, when a row of ``df`` shares its ``eval_results`` key with a stored
        row, or another row of ``df``, of another baseline: a scorer's own row and a paired difference
        named alike (``a - b``). The key has no ``baseline``; an upsert would replace one number with
        another of different meaning, and a write's own duplicates are dropped before it."""
        if df.height == 0:
            return
        pk = list(EVAL_RESULTS.primary_key)
        base = pl.col("baseline") if "baseline" in df.columns else pl.lit(None, pl.Utf8)
        new = df.select(*pk, base.alias("baseline")).unique()
        runs = new["run_id"].unique().to_list()
        # Tuples, not a frame: reading one back would load pyarrow for the few rows a one-off run writes.
        stored = self._exec(f"SELECT {', '.join(pk)}, baseline FROM {EVAL_RESULTS.name} "
                            f"WHERE run_id IN ({', '.join('?' * len(runs))})", runs)
        seen: dict[tuple[object, ...], tuple[str | None, str]] = {r[:-1]: (r[-1], "a stored row") for r in stored}
        for *key, baseline in new.iter_rows():
            had, where = seen.setdefault(tuple(key), (baseline, "another row of this write"))
            if had != baseline:
                row = ", ".join(f"{c}={v!r}" for c, v in zip(pk, key, strict=True))
                raise RevbenchError(f"eval_results row ({row}) is {_kind(baseline)}, but {where} with that key is "
                                    f"{_kind(had)}: not stored, one would replace the other (a scorer labelled like "
                                    "a paired difference: rename it or give another --baseline)")

    def release_results(self, metric: str, split: str) -> pl.DataFrame:
        """``scorer, version, manifest_sha256, value, ci_low, ci_high`` of ``metric`` on ``split``
        for every published release evaluated (the latest evaluation of each), releases in the
        order they were built. Only rows evaluated on the release's recorded manifest count: a
        version's name alone does not attach results to it."""
        return self._frame(
            f"""WITH latest AS (
                   SELECT e.*, r.built_at, r.manifest_sha256,
                          row_number() OVER (PARTITION BY e.benchmark_version, e.scorer ORDER BY e.evaluated_at DESC) AS k
                   FROM {self._results()} e JOIN releases r
                     ON r.version = e.benchmark_version AND r.manifest_sha256 = e.benchmark_digest
                   WHERE e.benchmark = 'release' AND e.metric = ? AND e.split = ? AND r.status = 'published'
                     AND e.baseline IS NULL)
               SELECT scorer, benchmark_version AS version, manifest_sha256, value, ci_low, ci_high
               FROM latest WHERE k = 1 ORDER BY built_at, version, scorer""", [metric, split])

    def evaluation_results(self) -> pl.DataFrame:
        """Every metric of the latest evaluation of each scorer on each benchmark version (the
        assignment's and the attack's rows from the latest run that made them, so a later plain
        evaluation does not hide them):
        ``benchmark, version, split, scorer, metric, value, ci_low, ci_high, n, coverage, run_id,
        evaluated_at, basis, baseline, release_status`` (the status of the release a ``release`` row was evaluated
        on, when its manifest is the one recorded; null otherwise), oldest version first."""
        return self._frame(
            f"""WITH judged AS (
                   SELECT *, (split LIKE 'assignment:%' OR split LIKE 'attack%') AS judged FROM {self._results()}),
                    latest AS (
                   SELECT benchmark, benchmark_version, scorer, judged, arg_max(run_id, evaluated_at) AS run_id
                   FROM judged GROUP BY ALL)
               SELECT e.benchmark, e.benchmark_version AS version, e.split, e.scorer, e.metric, e.value, e.ci_low,
                      e.ci_high, e.n, e.coverage, e.run_id, e.evaluated_at, e.basis, e.baseline, r.status AS release_status
               FROM judged e JOIN latest l USING (benchmark, benchmark_version, scorer, judged, run_id)
               LEFT JOIN releases r ON e.benchmark = 'release' AND r.version = e.benchmark_version
                                   AND r.manifest_sha256 = e.benchmark_digest
               ORDER BY e.benchmark, min(e.evaluated_at) OVER (PARTITION BY e.benchmark, e.benchmark_version),
                        version, e.scorer, e.split, e.metric""")

    def _results(self) -> str:
        """``eval_results`` with today's columns: a file no write has migrated yet (read by a report,
        which opens it read-only and so leaves it as it is) lacks the newer ones, given here as its
        migration would fill them (``baseline`` read off the scorer's name as before it existed)."""
        have = {r[0] for r in self._exec("SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                                         [EVAL_RESULTS.name])}
        missing = [c for c in EVAL_RESULTS.columns if c.name not in have]
        if not missing:
            return EVAL_RESULTS.name
        given = ", ".join(f'CAST({c.backfill or "NULL"} AS {duckdb_type(c.dtype)}) AS "{c.name}"' for c in missing)
        return f"(SELECT *, {given} FROM {EVAL_RESULTS.name})"


def _kind(baseline: str | None) -> str:
    return "a scorer's own row" if baseline is None else f"the paired difference to {baseline!r}"
