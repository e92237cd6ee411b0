"""Printing for a log as well as a terminal: what the command line prints is read in CI, piped
through ``tee`` and mailed by cron at 80 columns, where a table squeezed to fit cuts names and a
wrapped line breaks a path or a URL in two."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table as RichTable


class FittingConsole(Console):
    """A console that never cuts or folds what it prints into a log (not a terminal: CI, a pipe,
    where the width is 80 columns): a table wider than that is printed as one block per row, each
    cell on its own line under its column's name, so a scorer's or a service's name is read whole,
    and a line is not wrapped, so a path or a URL stays in one piece."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        if not self.is_terminal:
            if len(objects) == 1 and isinstance(objects[0], RichTable):
                table = objects[0]
                if _natural_width(self, table) > self.width:
                    for line in narrow_lines(table):
                        super().print(line, markup=False, highlight=False, soft_wrap=True)
                    return
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
