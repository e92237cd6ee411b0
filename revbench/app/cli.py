"""The ``revbench`` command line: builds the settings once and hands them to the flows. Its
commands live in ``revbench.app.commands``, one module per stage, each beside what it prints.

A one-off ``evaluate`` of prediction files alone may be answered before any of it is loaded
(``revbench.app.lean_evaluate``: the same output; RATE's files with the standard library alone,
the gold standard's with numpy).

Every error ends in one line on stderr (``--debug`` adds the traceback) and an exit code:
2 for a request that cannot run as given (nothing was done), 3 for an unreachable service,
4 for a warehouse held by another run, 5 for a damaged warehouse, 130 for an interrupt,
1 for anything else.
"""

from __future__ import annotations

import faulthandler
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from revbench.errors import RevbenchError, clear_interrupt, interrupt_noted

# Nothing heavier at load: `revbench evaluate` on prediction files alone is answered before typer,
# rich, pydantic and the rest are loaded (revbench.app.lean_evaluate), and this module is what
# the console script loads first.


def __getattr__(name: str) -> Any:
    """``app``, the application, built on first use (module attributes, PEP 562)."""
    if name == "app":
        return _application()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _application() -> Any:
    """The Typer application with every command registered (once)."""
    from revbench.app import cli_ui
    from revbench.app.cli_common import app
    from revbench.app.commands import backup, corpus, evaluate, models, operate, pools, ratings, release, survey, worlds

    # Registered here, not where they are defined, so that ``--help`` and the generated reference keep
    # one order across the modules: the stages' commands first, the operator's after them.
    for command in (corpus.ingest, corpus.graph, worlds.demo, evaluate.evaluate, models.embed, models.train, pools.pools,
                    operate.refresh, corpus.disambiguate, ratings.ratings, release.report, operate.serve, cli_ui.ui,
                    operate.status, operate.doctor, backup.backup, backup.restore, ratings.labels, models.models,
                    worlds.world):
        app.command()(command)
    app.command("env-example")(operate.env_example)
    app.add_typer(release.release_app, name="release")
    app.add_typer(survey.survey_app, name="survey")
    return app


def main(argv: list[str] | None = None, lean: bool = True) -> None:
    """The ``revbench`` console script. ``lean``: offer the command line to the lean lane first
    (``revbench.app.lean_evaluate``); without it the full path runs every command (tests compare the two)."""
    if hasattr(signal, "SIGUSR1"):
        # `kill -USR1 PID` prints every thread's stack to stderr and the command goes on: what
        # an operator (or a test that timed out) asks a run that seems stuck.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    args = list(sys.argv[1:] if argv is None else argv)
    if lean and args[:1] == ["evaluate"]:
        from revbench.app.lean_evaluate import run_lean

        code = run_lean(args)
        if code is not None:
            _exit(code)
    from revbench.app.entry import install_unraisable_hook

    install_unraisable_hook()
    debug = "--debug" in args
    # -v anywhere on the line: the details a default run leaves out (every note, third-party
    # warnings, the revbench logger's DEBUG lines).
    from revbench.app import entry

    entry.VERBOSE[0] = "--verbose" in args or "-v" in args
    entry.quiet_third_party_warnings()
    _exit(run([a for a in args if a not in ("--debug", "--verbose", "-v")], debug))


def command_line(args: list[str]) -> Callable[..., Any]:
    """What runs ``args``: for a command named first (not a sub-app), the group with that command
    alone; for anything else (``--help``, ``release ...``, a typo) the whole application.

    Typer builds every registered command's click options from its signature when the group is
    made, about 18 ms for all of them: a tenth of a one-off ``evaluate``'s own work, spent on 26
    commands it never runs. The command itself is built the same way either way, under the same
    program name, so its options, help and errors do not change (``tests/app/test_cli_modes.py``
    compares them for every command)."""
    import copy

    import typer.main

    app = _application()
    name = args[0] if args else ""
    only = [c for c in app.registered_commands
            if (c.name or typer.main.get_command_name(getattr(c.callback, "__name__", ""))) == name]
    if len(only) != 1 or any(g.name == name for g in app.registered_groups):
        return app
    lean = copy.copy(app)
    lean.registered_commands, lean.registered_groups = only, []
    # A group always, even of one command (``get_command`` would make the command the program).
    return typer.main.get_group(lean)


def _say(message: str) -> None:
    from revbench.app.console import say_error

    say_error(message)


def run(args: list[str], debug: bool = False) -> int:
    """Run the command line on ``args``; errors become one line and an exit code."""
    import traceback

    import typer

    clear_interrupt()
    try:
        rv = command_line(args)(args, standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except typer.TyperException as exc:  # a bad flag, as typer reports it
        command = " ".join(a for a in args[:1] if not a.startswith("-"))
        _say(f"{exc.format_message()} (see `revbench {command} --help`)".replace("  ", " "))
        return exc.exit_code
    except RevbenchError as exc:
        if debug:
            traceback.print_exc()
        _say(str(exc).replace("[", "\\["))
        return exc.exit_code
    except Exception as exc:  # an error we did not expect: one line, the traceback on request
        if interrupt_noted():  # our interrupt, wrapped in a library's error on its way out
            return _interrupted()
        if debug:
            traceback.print_exc()
        from revbench.app.console import unexpected

        return unexpected(exc, debug)
    if code == 130:  # typer turns Ctrl-C (and our SIGTERM) into exit code 130
        return _interrupted()
    return code


def _interrupted() -> int:
    _say("interrupted; a run in progress was marked cancelled and keeps what it committed: "
         "run the same command again to resume")
    return 130


def _exit(code: int) -> None:
    """End the process the way the interpreter would, less its last step: threads are joined
    and exit handlers run (Prefect drains its logs and events and stops its temporary server
    there), then the process exits without tearing down every module. That teardown costs about
    0.25 s with polars, DuckDB and pyarrow loaded (a quarter of a one-off command) and, after an
    interrupted tracked run, makes DuckDB's bindings print pages of "leaked instance" notices
    for objects Prefect still held; nothing is left to clean (the warehouse is closed, files written)."""
    import atexit

    threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize does first
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
