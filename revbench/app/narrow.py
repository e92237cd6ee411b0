"""Printing for a log as well as a terminal: what the command line prints is read in CI, piped
through ``tee`` and mailed by cron at 80 columns, where a table squeezed to fit cuts names and a
wrapped line breaks a path or a URL in two."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

REPORT_WIDTH = 200
"""The width a report file (:meth:`FittingConsole.report_to`) is written at: read in an editor or
``less -S``, where a table of scorer pairs is easier to read whole than one row at a time."""


class FittingConsole(Console):
    """A console that never cuts what it prints, nor folds it into a log (not a terminal: CI, a
    pipe, where the width is 80 columns): a table wider than the line is printed as one block per
    row, each cell on its own line under its column's name, so a scorer's or a service's name is
    read whole, and in a log a line is not wrapped, so a path or a URL stays in one piece."""

    _report: Console | None = None
    _shown = True

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        if self._report is not None:
            self._report.print(*objects, **kwargs)
            if not self._shown:
                return
        self._fit(*objects, **kwargs)

    def tell(self, *objects: Any, **kwargs: Any) -> None:
        """Print on the screen even while :meth:`report_to` keeps the details off it (and into the
        report too): the lines of a short account."""
        if self._report is not None:
            self._report.print(*objects, **kwargs)
        self._fit(*objects, **kwargs)

    def to_report(self, line: str) -> None:
        """One plain line into the report being written, if any (a log record, say)."""
        if self._report is not None:
            self._report.print(line, markup=False, highlight=False, soft_wrap=True)

    @contextmanager
    def report_to(self, path: Path, shown: bool) -> Iterator[None]:
        """Everything printed meanwhile also goes, as plain text, to the file ``path``; on the
        screen only when ``shown`` (``tell`` prints there either way)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as f:
            self._report, self._shown = FittingConsole(file=f, width=REPORT_WIDTH, color_system=None,
                                                       force_terminal=False, highlight=False), shown
            try:
                yield
            finally:
                self._report, self._shown = None, True

    def _fit(self, *objects: Any, **kwargs: Any) -> None:
        # A terminal too: squeezed to its width, rich cuts a table's headers and names ("bm25:p…").
        if len(objects) == 1 and isinstance(objects[0], RichTable) and _natural_width(self, objects[0]) > self.width:
            for line in narrow_lines(objects[0]):
                super().print(line, markup=False, highlight=False, soft_wrap=not self.is_terminal)
            return
        if not self.is_terminal:
            # A log keeps each line whole (a path or a URL folded at 80 columns cannot be copied).
            kwargs.setdefault("soft_wrap", True)
        super().print(*objects, **kwargs)


def _natural_width(con: Console, table: RichTable) -> int:
    """The width ``table`` takes with nothing wrapped or cut."""
    from rich.measure import Measurement

    return Measurement.get(con, con.options.update(width=10_000), table).maximum


def narrow_lines(table: RichTable) -> list[str]:
    """``table`` as plain lines: its title, then per row the first cell and the others indented
    as ``column: value`` (markup removed), a blank line between rows."""
    from rich.text import Text

    def plain(cell: Any) -> str:
        return cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain

    headers = [plain(c.header) for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    out = [plain(table.title)] if table.title else []
    for i in range(table.row_count):
        row = [plain(col[i]) if i < len(col) else "" for col in cells]
        out.append(f"{headers[0]}: {row[0]}" if headers else row[0])
        out += [f"  {h}: {v}" for h, v in zip(headers[1:], row[1:], strict=True) if v != ""]
    return out
