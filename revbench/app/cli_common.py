"""What every command of the ``revbench`` command line shares: the Typer application, the
``--track`` option, building the settings once and reading a date flag."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar
from datetime import date
from typing import Annotated, Any, TypeVar

import typer

from revbench.app.entry import build_settings, override, prepare_process
from revbench.errors import UsageError
from revbench.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(help="Build, refresh and evaluate benchmarks of reviewer expertise. Add --debug anywhere "
                       "for tracebacks.", no_args_is_help=True, pretty_exceptions_enable=False)

Track = Annotated[
    bool | None,
    typer.Option("--track/--no-track", help="Run as a Prefect flow run (visible in the UI) or in this process; "
                                            "default: tracked when a Prefect API is configured"),
]

MixWorlds = Annotated[
    bool,
    typer.Option("--mix-worlds", help="Fetch from real services even into the demo's SYNTHETIC data folder "
                                      "(REVBENCH_MIX_WORLDS; off: refused before any work)"),
]

_FETCHING: ContextVar[tuple[tuple[str, ...] | None, bool] | None] = ContextVar("revbench_fetching", default=None)
"""While a command registered with :func:`fetching` runs: the stages it runs and whether it has
``--mix-worlds``."""


def fetching(stages: tuple[str, ...] | None, flag: bool = True) -> Callable[[F], F]:
    """Register a command as one that fetches records from outside services into the warehouse
    by running ``stages`` (None: the configured refresh stages, which ``serve`` schedules too):
    its ``setup`` refuses the demo's SYNTHETIC data folder with real services before any work
    (``revbench.worlds``); ``flag`` says it has ``--mix-worlds`` (the others read REVBENCH_MIX_WORLDS)."""
    def wrap(command: F) -> F:
        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            token = _FETCHING.set((stages, flag))
            try:
                return command(*args, **kwargs)
            finally:
                _FETCHING.reset(token)
        return run  # type: ignore[return-value]
    return wrap


def mixed(mix_worlds: bool) -> dict[str, Any]:
    """The setting ``--mix-worlds`` sets, as ``setup``'s override."""
    return {"mix_worlds": True} if mix_worlds else {}


def setup(**overrides: Any) -> Settings:
    """The settings of this command, built once (with the command's overrides), the worlds
    checked apart for a command that fetches (see :func:`fetching`), the process prepared."""
    settings = build_settings()
    if overrides:
        settings = override(settings, overrides)
    command = _FETCHING.get()
    if command is not None:
        from revbench.worlds import FLAG, check_worlds

        stages, flag = command
        check_worlds(settings, stages if stages is not None else settings.refresh.stages, FLAG if flag else None)
    prepare_process(settings)
    return settings


def parse_date(value: str, flag: str) -> date:
    """``value`` of ``flag`` as a date, or one line naming the flag."""
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{flag} {value!r} is not a date YYYY-MM-DD") from None
