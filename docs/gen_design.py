"""The drawing of the floors in docs/design.md, rendered from the floor plan, never typed.

The plan is ``tests/support/floorplan.py``, the table the structure tests check every import
against; the page holds its drawing between ``<!-- floorplan -->`` and ``<!-- /floorplan -->``
(HTML comments: neither GitHub nor mkdocs shows them). After moving or adding a room:

    .venv/bin/python docs/gen_design.py           # rewrite the block from the plan
    .venv/bin/python docs/gen_design.py --check   # exit 1 when the block differs

``tests/test_structure_floors.py`` runs the check, so the page cannot drift from the plan.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "design.md"
BLOCK = re.compile(r"(<!-- floorplan -->\n)(?P<body>.*?)(<!-- /floorplan -->)", re.S)


def plan() -> ModuleType:
    """The floor plan module (the repository root put on the path when run as a script)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("tests.support.floorplan")


def _code(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _part(title: str, items: list[str]) -> list[str]:
    """A titled list, or the title ending in "none" when it is empty."""
    return ["", f"{title}:", "", *(f"- {item}" for item in items)] if items else ["", f"{title}: none."]


def render() -> str:
    """The block's text: the floors top first, then what may cross them."""
    p = plan()
    # Blank lines around each part: Markdown reads a table or a list glued to the line before as text.
    lines = ["", "| floor | | rooms | what lives there |", "|---|---|---|---|"]
    lines += [f"| {f.number} | {f.name} | {_code(f.rooms)} | {f.what} |" for f in p.FLOORS]
    lines += _part("Imports from a higher floor allowed by name",
                   [f"`{a}` imports `{b}`: {why}" for (a, b), why in p.UPWARD_ALLOWED.items()])
    lines += _part("Side walls, pairs the floors cannot keep apart (the second is not above the first)",
                   [f"`{a}` imports nothing of `{b}`: {why}" for (a, b), why in p.SIDE_WALLS.items()])
    lines += _part("Tables that name code above them as `module:function`, imported only when that code runs",
                   [f"`{a}` (floor {p.floor_of(p.room_of(a))}) names `{b}` (floor {p.floor_of(b)}): {why}"
                    for (a, b), why in p.REACHES.items()])
    return "\n".join(lines) + "\n\n"


def refresh(text: str) -> str:
    """``text`` with its floor plan block rendered anew (ValueError when it has none)."""
    if not BLOCK.search(text):
        raise ValueError(f"{PAGE.relative_to(ROOT)}: no <!-- floorplan --> block")
    return BLOCK.sub(lambda m: m.group(1) + render() + m.group(3), text, count=1)


def main(argv: list[str]) -> int:
    text = PAGE.read_text()
    new = refresh(text)
    if "--check" in argv:
        if new != text:
            print("stale floor plan block in docs/design.md (run: python docs/gen_design.py)")
            return 1
        return 0
    if new != text:
        PAGE.write_text(new)
        print("rewrote docs/design.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
