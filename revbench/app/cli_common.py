"""What every command of the ``revbench`` command line shares: the Typer application, the
``--track`` option, building the settings once and reading a date flag."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

import typer

from revbench.app.entry import build_settings, override, prepare_process
from revbench.errors import UsageError
from revbench.settings import Settings

app = typer.Typer(help="Build, refresh and evaluate benchmarks of reviewer expertise. Add --debug anywhere "
                       "for tracebacks.", no_args_is_help=True, pretty_exceptions_enable=False)

Track = Annotated[
    bool | None,
    typer.Option("--track/--no-track", help="Run as a Prefect flow run (visible in the UI) or in this process; "
                                            "default: tracked when a Prefect API is configured"),
]


def setup(**overrides: Any) -> Settings:
    """The settings of this command, built once (with the command's overrides), the process prepared."""
    settings = build_settings()
    if overrides:
        settings = override(settings, overrides)
    prepare_process(settings)
    return settings


def parse_date(value: str, flag: str) -> date:
    """``value`` of ``flag`` as a date, or one line naming the flag."""
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{flag} {value!r} is not a date YYYY-MM-DD") from None
