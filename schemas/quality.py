"""great-expectations suites derived from the table declarations, run on frames before a load.

GX's SQL path fails on DuckDB (duckdb_engine raises IndexError), so frames are validated in
pandas form before they reach the warehouse; the import is deferred because it costs seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from revbench.errors import RevbenchError
from revbench.schemas.model import Column, Table


@dataclass
class ExpectationOutcome:
    """One expectation's verdict in a readable form."""

    table: str
    expectation: str
    column: str
    success: bool
    unexpected_count: int
    examples: list[Any] = field(default_factory=list)


@dataclass
class ValidationReport:
    """The verdict of every suite run for one load."""

    outcomes: list[ExpectationOutcome]
    rows: dict[str, int]

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    @property
    def failures(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]

    def to_markdown(self) -> str:
        """A report a curator can read in the Prefect UI."""
        verdict = "passed" if self.success else "FAILED: nothing was written"
        lines = [f"## Data quality: {verdict}", ""]
        lines.append("| table | rows |")
        lines.append("|---|---|")
        lines.extend(f"| {t} | {n} |" for t, n in self.rows.items())
        lines.append("")
        lines.append("| table | expectation | column | ok | unexpected | examples |")
        lines.append("|---|---|---|---|---|---|")
        for o in sorted(self.outcomes, key=lambda o: (o.success, o.table)):
            ex = ", ".join(repr(e)[:40] for e in o.examples[:3])
            mark = "yes" if o.success else "**no**"
            lines.append(f"| {o.table} | {o.expectation} | {o.column} | {mark} | {o.unexpected_count} | {ex} |")
        return "\n".join(lines)


class DataQualityError(RevbenchError):
    """A suite failed; the load it guarded wrote nothing."""

    def __init__(self, report: ValidationReport):
        self.report = report
        bad = "; ".join(f"{o.table}.{o.column}: {o.expectation} ({o.unexpected_count})" for o in report.failures)
        super().__init__(f"data quality checks failed: {bad}")


def expectations_for(table: Table) -> list[Any]:
    """The GX expectations implied by a table declaration."""
    import great_expectations.expectations as gxe

    exps: list[Any] = []
    for col in scalar_columns(table):
        if not col.nullable:
            exps.append(gxe.ExpectColumnValuesToNotBeNull(column=col.name))
        if col.pattern:
            exps.append(gxe.ExpectColumnValuesToMatchRegex(column=col.name, regex=col.pattern))
        if col.allowed:
            exps.append(gxe.ExpectColumnValuesToBeInSet(column=col.name, value_set=list(col.allowed)))
        if col.min_value is not None or col.max_value is not None:
            exps.append(
                gxe.ExpectColumnValuesToBeBetween(
                    column=col.name, min_value=col.min_value, max_value=col.max_value
                )
            )
        if col.min_length is not None:
            exps.append(gxe.ExpectColumnValueLengthsToBeBetween(column=col.name, min_value=col.min_length))
    if len(table.primary_key) == 1:
        exps.append(gxe.ExpectColumnValuesToBeUnique(column=table.primary_key[0]))
    else:
        exps.append(gxe.ExpectCompoundColumnsToBeUnique(column_list=list(table.primary_key)))
    return exps


_CONTEXT: Any = None


def _context() -> Any:
    global _CONTEXT
    if _CONTEXT is None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        ctx = gx.get_context(mode="ephemeral")
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        _CONTEXT = ctx
    return _CONTEXT


def scalar_columns(table: Table) -> list[Column]:
    """Columns GX can check; list and struct columns are type-checked by the warehouse instead."""
    return [c for c in table.columns if not isinstance(c.dtype, (pl.List, pl.Struct))]


def _scalar_frame(table: Table, df: pl.DataFrame) -> Any:
    return df.select([c.name for c in scalar_columns(table)]).to_pandas()


def validate_frames(frames: dict[Table, pl.DataFrame]) -> ValidationReport:
    """Run each table's derived suite on its frame; empty frames pass trivially."""
    import great_expectations as gx

    ctx = _context()
    outcomes: list[ExpectationOutcome] = []
    rows: dict[str, int] = {}
    for table, df in frames.items():
        df = table.conform(df)
        rows[table.name] = df.height
        if df.height == 0:
            continue
        name = f"{table.name}"
        try:
            source = ctx.data_sources.get(name)
        except (KeyError, ValueError):
            source = ctx.data_sources.add_pandas(name)
        try:
            asset = source.get_asset(name)
        except (LookupError, ValueError):
            asset = source.add_dataframe_asset(name)
        try:
            batch_def = asset.get_batch_definition("whole")
        except (KeyError, ValueError):
            batch_def = asset.add_batch_definition_whole_dataframe("whole")
        suite = gx.ExpectationSuite(name=f"{table.name}_suite")
        for exp in expectations_for(table):
            suite.add_expectation(exp)
        result = batch_def.get_batch(batch_parameters={"dataframe": _scalar_frame(table, df)}).validate(
            suite, result_format="SUMMARY"
        )
        for r in result.results:
            cfg = r.expectation_config
            column = cfg.kwargs.get("column") or ",".join(cfg.kwargs.get("column_list", []))
            res = r.result or {}
            outcomes.append(
                ExpectationOutcome(
                    table=table.name,
                    expectation=cfg.type,
                    column=column,
                    success=bool(r.success),
                    unexpected_count=int(res.get("unexpected_count") or 0),
                    examples=list(res.get("partial_unexpected_list") or [])[:5],
                )
            )
    return ValidationReport(outcomes=outcomes, rows=rows)
