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


def say_error(message: str) -> None:
    """One line of error on stderr, as every command ends a refusal (rich markup in ``message`` escaped by the caller)."""
    err_console.print(f"[red]error:[/] {message}", soft_wrap=True, highlight=False, markup=True)


def unexpected(exc: BaseException, debug: bool = False) -> int:
    """An error no check foresaw, as one line (the traceback on request: ``--debug``); its exit code."""
    hint = "" if debug else " (add --debug for the traceback)"
    say_error(f"{type(exc).__name__}: {exc}".replace("[", "\\[") + hint)
    return 1
