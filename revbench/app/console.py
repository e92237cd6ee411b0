"""What the command line prints with: its two consoles and the printing every stage shares (each
stage's printers live beside its commands, in ``revbench.app.commands``)."""

from __future__ import annotations

from revbench.app.narrow import FittingConsole

console = FittingConsole()
err_console = FittingConsole(stderr=True)


def print_markdown(markdown: str) -> None:
    """A markdown report (tables render as tables)."""
    from rich.markdown import Markdown

    console.print(Markdown(markdown))
