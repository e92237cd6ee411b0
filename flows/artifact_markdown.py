"""Markdown tables narrow enough for the Prefect UI: its table cells never wrap (``white-space:
nowrap``), and at 1,280 pixels its artifact page leaves a table about 710 of them beside the run's
details, so a table of long cells is cut off behind a scroll bar that the UI hides. Every markdown
artifact goes through :func:`narrow_tables` on its way there (``publish_markdown``); the report
files keep their one-line cells.

The UI renders ``<br>`` in a cell as a line break (and no other markup), so a cell gets narrow by
breaking its lines: an interval goes under its value, a header breaks between its words, and text
longer than its share of the row wraps at its spaces, links and code spans kept whole. The
evaluation's scorer pairs, one table of both splits in the report file, come one table per split
(:func:`evaluation_markdown`), without the column that named the split on every row.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the flows import this module; only the evaluation's artifact needs the report
    from revbench.evaluation.report import ReportTable

WRAP = 16
"""The fewest characters per line of a cell: at the UI's 14-pixel font, about 120 pixels."""
LINE_BUDGET = 80
"""Characters of one table row at most, shared by its columns (a cell of a two-column table keeps
40 a line): at the UI's font about 600 of the 710 pixels, the rest for the cells' padding."""
HEADER_WRAP = 6
"""Characters per line of a header: the values beneath are narrower than most names."""
INTERVAL = re.compile(r"(\*\*)?([^\s*|]+) \[(-?[\d.]+%?), (-?[\d.]+%?)\](?!\()(\*\*)?")
"""A value and its interval, ``0.271 [0.19, 0.38]`` (bold when best), as the reports write them."""
ATOM = re.compile(r"\[[^\]]*\]\([^)]*\)|`[^`]*`|\S+")
"""What a line is cut between: a markdown link or a code span whole, else a word."""
BREAK_AFTER = re.compile(r"(?<=[=:,_/])")
"""Where a word longer than a line may still be cut: after ``=``, ``:``, ``,``, ``_`` or ``/``."""
DELIMITER = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def _shown(atom: str) -> int:
    """How many characters ``atom`` takes on screen: a link its text, a code span its code."""
    if atom.startswith("[") and "](" in atom:
        return len(atom[1:atom.index("](")])
    return len(atom.strip("`*"))


def _pieces(atom: str, width: int) -> list[str]:
    """A plain word longer than ``width`` cut after the separator nearest its middle, and again
    while a piece is still too long (``embedding:pooling=`` and ``topk_mean:3``); links, code and
    bold kept whole."""
    if _shown(atom) <= width or atom.startswith(("[", "`", "*")):
        return [atom]
    cuts = [m.start() for m in BREAK_AFTER.finditer(atom) if 0 < m.start() < len(atom)]
    if not cuts:
        return [atom]
    cut = min(cuts, key=lambda c: abs(c - len(atom) / 2))
    return _pieces(atom[:cut], width) + _pieces(atom[cut:], width)


def wrap_line(line: str, width: int = WRAP) -> list[str]:
    """``line`` in lines of at most ``width`` shown characters (a link, a code span or a word
    without separators longer than that stays whole on a line of its own)."""
    lines: list[str] = []
    current, used = "", 0
    for atom in ATOM.findall(line):
        for k, piece in enumerate(_pieces(atom, width)):
            glue = "" if k or not current else " "  # the pieces of one word join without a space
            n = _shown(piece)
            if current and used + len(glue) + n > width:
                lines.append(current)
                current, used = piece, n
            else:
                current, used = current + glue + piece, used + len(glue) + n
    return [*lines, current] if current or not lines else lines


def narrow_cell(cell: str, width: int = WRAP) -> str:
    """One body cell made narrow: an interval under its value, then each of its lines wrapped."""
    cell = INTERVAL.sub(lambda m: (f"{m[1] or ''}{m[2]}{m[5] or ''}<br>{m[1] or ''}[{m[3]}, {m[4]}]{m[5] or ''}"), cell)
    # " <br>": the break shows as a new line, and the cell's text (what a search or a copy reads)
    # keeps the space between the words it broke.
    return " <br>".join(w for line in cell.split("<br>") for w in wrap_line(line.strip(), width))


def narrow_header(cell: str) -> str:
    """A header broken between its words (at underscores, spaces, case changes and before an
    ``@``: ``easy_accuracy``, ``papers with an expert``, ``InstitutionDiversity@5``, ``NDCG@10``)
    in lines of about :data:`HEADER_WRAP` characters; one with code, or broken already, left whole."""
    cell = cell.strip()
    if "`" in cell or "<br>" in cell or len(cell) <= HEADER_WRAP:
        return cell
    # Pieces keep what joined them (an underscore stays at the end of its line: the name is exact).
    pieces = [p for p in re.split(r"(?<=_)|(?<= )|(?<=[a-z])(?=[A-Z])|(?=@)", cell) if p]
    lines = [""]
    for p in pieces:
        if lines[-1].strip() and len(lines[-1].strip()) + len(p.strip()) > HEADER_WRAP:
            lines.append(p)
        else:
            lines[-1] += p
    return "<br>".join(lines).strip()  # a line broken at a space keeps it before the break


def _cells(row: str) -> list[str]:
    """The cells of a table row, its escaped pipes (``\\|``) kept inside their cell."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def evaluation_markdown(tables: list[ReportTable], warnings: list[str]) -> str:
    """The evaluation's report for its artifact: a table with a ``split`` column (the scorer
    pairs, two splits in one table) as one table per split, named in its title, then
    :func:`narrow_tables`; the warnings after, as the report file has them."""
    from revbench.evaluation.report import ReportTable

    parts = []
    for t in tables:
        if "split" not in t.header:
            parts.append(t.to_markdown())
            continue
        i = t.header.index("split")
        for split in dict.fromkeys(r[i] for r in t.rows):
            rows = [[c for k, c in enumerate(r) if k != i] for r in t.rows if r[i] == split]
            parts.append(ReportTable(f"{t.title} · {split}", [h for k, h in enumerate(t.header) if k != i], rows,
                                     t.notes).to_markdown())
    return narrow_tables("\n".join(parts + [f"\n> warning: {line}" for line in warnings]))


def narrow_tables(markdown: str, width: int | None = None) -> str:
    """``markdown`` with every table's cells narrowed (:func:`narrow_header`, :func:`narrow_cell`),
    a cell's lines ``width`` characters (by default the table's share of :data:`LINE_BUDGET`, at
    least :data:`WRAP`); the rest of the text unchanged."""
    lines = markdown.split("\n")
    out: list[str] = []
    in_table, in_code, wrap = False, False, WRAP
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_code = not in_code  # a fenced block (a manifest, an email) is shown as it is
        starts = (not in_code and line.lstrip().startswith("|") and i + 1 < len(lines)
                  and DELIMITER.match(lines[i + 1].strip()))
        if starts:
            in_table, header = True, _cells(line)
            wrap = width or max(WRAP, LINE_BUDGET // max(len(header), 1))
            out.append("| " + " | ".join(narrow_header(c) for c in header) + " |")
        elif in_table and DELIMITER.match(line.strip()):
            out.append(line)
        elif in_table and line.lstrip().startswith("|"):
            out.append("| " + " | ".join(narrow_cell(c, wrap) for c in _cells(line)) + " |")
        else:
            in_table = False
            out.append(line)
    return "\n".join(out)
