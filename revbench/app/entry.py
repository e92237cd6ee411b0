"""What every entry point does once: build the settings, set third-party defaults, choose whether
a flow runs tracked by Prefect or in this process."""

from __future__ import annotations

import _thread
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from revbench.errors import UsageError, interrupt_noted, note_interrupt
from revbench.files import write_atomic
from revbench.settings import Settings, check_environment, settings_error

DEMO_SINCE = date(2026, 9, 1)
DEMO_UNTIL = date(2026, 10, 31)
"""The window of the SYNTHETIC demo world."""
QUIET_LIBRARIES = ("httpx", "httpx2", "httpcore", "urllib3", "arxiv", "grobid_client", "bm25s", "sentence_transformers",
                   "openai", "faiss")


FLAGS = {
    "pools.tau": "--tau", "pools.queries_per_category": "--per-category", "arxiv.categories": "--categories",
    "disambiguate.use_llm": "--fallback", "refresh.stages": "--stages", "refresh.until": "--until",
    "runner.kind": "--runner", "mix_worlds": "--mix-worlds", "release.evaluate_rejected": "--allow-rejected",
}
"""Command-line flags that set a setting: their values pass the setting's own validation."""


DEMO_SETTINGS = ".demo-settings.json"
DEMO_NOTE_SHOWN = ".demo-settings-noted"
"""What the last note on the demo's settings said, so the same note is not said again."""
"""Kept in a demo's data folder: the settings the demo ran with that later commands on its
data depend on (the ratings rules on its fast clock, its round size, its own keys)."""


def build_settings(*, demo_data: bool = True, **overrides: Any) -> Settings:
    """The one settings object of this process: environment and ``.env``, then ``overrides``,
    then (with ``demo_data``) the settings a demo stored with its data, where no variable sets
    them. An unknown ``REVBENCH_`` variable or a value of the wrong type is one line naming it."""
    check_environment(os.environ, Path(".env"))
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        raise settings_error(exc) from None
    except SettingsError as exc:  # a value pydantic-settings could not even parse
        section = re.search(r'field "(\w+)"', str(exc))
        name = f"REVBENCH_{section.group(1).upper()}" if section else "REVBENCH_"
        raise UsageError(f"a {name}__* setting cannot be read ({exc.__cause__ or exc}); "
                         "`revbench env-example` shows each one's form") from None
    if not demo_data:
        return settings
    return apply_demo_settings(settings, explicit_settings(os.environ, Path(".env")) | _flat_names(overrides))


def _flat_names(tree: dict[str, Any], prefix: str = "REVBENCH_") -> set[str]:
    names: set[str] = set()
    for key, value in tree.items():
        names.add(f"{prefix}{key.upper()}")
        if isinstance(value, dict):
            names |= _flat_names(value, f"{prefix}{key.upper()}__")
    return names


def explicit_settings(environ: Mapping[str, str], dotenv: Path) -> set[str]:
    """The ``REVBENCH_`` variables the user set, in the environment or in ``dotenv``."""
    names = {k.upper() for k in environ if k.upper().startswith("REVBENCH_")}
    if dotenv.is_file():
        from dotenv import dotenv_values

        names |= {k.upper() for k in dotenv_values(dotenv) if k.upper().startswith("REVBENCH_")}
    return names


def save_demo_settings(data_dir: Path, changes: dict[str, dict[str, Any]], key_files: dict[str, str]) -> Path:
    """Store with a demo's data the settings ``changes`` it ran with (``{"ratings": {...}}``) and
    the files of its own keys (``{"survey.signing_key": ".survey-demo-key"}``, kept out of the
    file so it holds no secret), for :func:`apply_demo_settings`."""
    path = data_dir / DEMO_SETTINGS
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"settings": changes, "key_files": key_files}, indent=1, sort_keys=True)
    write_atomic(path, text + "\n")
    return path


def apply_demo_settings(settings: Settings, explicit: set[str]) -> Settings:
    """``settings`` with what a demo stored in its data folder (:func:`save_demo_settings`), so
    that later commands on that data decide as the demo did (``revbench ratings`` raises the
    flags the demo raised). A variable in ``explicit`` (the user's own) wins; a note on stderr
    says what was applied."""
    path = settings.data_dir / DEMO_SETTINGS
    if not path.is_file():
        return settings
    try:
        stored = json.loads(path.read_text())
        changes: dict[str, dict[str, Any]] = {s: dict(v) for s, v in stored.get("settings", {}).items()}
        key_files = dict(stored.get("key_files", {}))
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path} cannot be read ({exc}); delete it to run without the demo's settings") from None
    for dotted, name in key_files.items():
        section, _, field = dotted.partition(".")
        key = settings.data_dir / name
        if key.is_file():
            changes.setdefault(section, {})[field] = key.read_text().strip()
    applied: dict[str, dict[str, Any]] = {}
    for section, fields in changes.items():
        for field, value in fields.items():
            var = f"REVBENCH_{section.upper()}__{field.upper()}"
            if var not in explicit and f"REVBENCH_{section.upper()}" not in explicit:
                applied.setdefault(section, {})[field] = value
    if not applied:
        return settings
    try:
        out = settings.with_overrides(**applied)
    except ValidationError as exc:
        raise UsageError(f"{path} holds a setting this revbench does not accept ({settings_error(exc)}); "
                         "delete it to run without the demo's settings") from None
    except ValueError as exc:
        raise UsageError(f"{path} holds a setting this revbench does not know ({exc}); "
                         "delete it to run without the demo's settings") from None

    def show(section: str, field: str, value: Any) -> str:
        if f"{section}.{field}" in key_files:
            return "(the demo's key)"
        return value if isinstance(value, str) else json.dumps(value)

    shown = ", ".join(f"REVBENCH_{s.upper()}__{f.upper()}={show(s, f, v)}" for s, fields in applied.items()
                      for f, v in fields.items())
    # Said once per data folder and set of settings (every command, with -v): after that it is the
    # folder's known state, and repeating it before each command buried what the command printed.
    seen = settings.data_dir / DEMO_NOTE_SHOWN
    if VERBOSE[0] or _read(seen) != shown:
        print(f"note: {settings.data_dir} holds a demo's data; the settings it ran with apply: {shown} "
              f"(a REVBENCH_ variable you set wins; delete {path} to drop them; -v repeats this note)", file=sys.stderr)
        try:
            write_atomic(seen, shown)
        except OSError:  # a read-only data folder: the note comes again next time, nothing else changes
            pass
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


VERBOSE = [False]
"""Set by the console script's ``-v``: notes said once come every time, third-party warnings show,
the ``revbench`` logger speaks at DEBUG."""

THIRD_PARTY_WARNINGS = ("numba", "ranx", "sklearn", "torch", "transformers", "sentence_transformers", "great_expectations",
                        "pydantic", "prefect", "dask", "distributed", "faiss", "datasets", "huggingface_hub", "matplotlib",
                        "setuptools", "pkg_resources", "jupyter_client", "altair", "marshmallow")
"""Packages whose warnings mean nothing to a user of revbench (about their internals or their
own dependencies): hidden unless ``-v``."""


class _ThirdPartyWarningRecord(logging.Filter):
    """Drops a captured warning (a ``py.warnings`` record: ``path:line: Category: message``)
    raised in a third-party file, unless ``-v``."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return bool(VERBOSE[0]) or not ("site-packages" in text or "dist-packages" in text)


def quiet_third_party_warnings() -> None:
    """Hide warnings raised by or about third-party packages (``THIRD_PARTY_WARNINGS``, or any
    file under site-packages) for this process; revbench's own warnings still show."""
    import warnings

    shown = warnings.showwarning
    if getattr(shown, "_revbench_quiet", False):
        return

    def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        owner = category.__module__.split(".")[0]
        if not VERBOSE[0] and (owner in THIRD_PARTY_WARNINGS or "site-packages" in filename
                               or "dist-packages" in filename):
            return
        shown(message, category, filename, lineno, file, line)

    show._revbench_quiet = True  # type: ignore[attr-defined]
    warnings.showwarning = show
    # Importing GX (the ingest's validations) calls logging.captureWarnings(True), which replaces
    # the hook above and hands warnings to logging: the same rule, on the logger they then go to.
    logging.getLogger("py.warnings").addFilter(_ThirdPartyWarningRecord())
    if not VERBOSE[0]:
        # GX sets this module's logger to INFO when it is imported ("Created temporary directory
        # ... for ephemeral docs site" on every validation): a filter on it outlives that.
        logging.getLogger("great_expectations.data_context.types.base").addFilter(
            lambda record: record.levelno >= logging.WARNING)
        # Hugging Face's own bars ("Loading weights") and advice print on every model load,
        # before ours say what is encoded; read by transformers and huggingface_hub at import.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def override(settings: Settings, changes: dict[str, Any]) -> Settings:
    """``settings`` with dotted changes (``{"pools.tau": 0.5}``) applied and validated like the
    settings themselves; an error names the command-line flag that set the value."""
    sections: dict[str, Any] = {}
    for dotted, value in changes.items():
        section, _, field = dotted.partition(".")
        if field:
            sections.setdefault(section, {})[field] = value
        else:
            sections[section] = value
    try:
        return settings.with_overrides(**sections)
    except ValidationError as exc:
        raise settings_error(exc, FLAGS) from None


def check_output_file(path: Path, flag: str) -> None:
    """A file the command will write: its folder exists and is writable, and it is not a folder."""
    parent = path.expanduser().resolve().parent
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; give a file path")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path} is not writable")


def check_output_dir(path: Path, flag: str) -> None:
    """A folder the command will write into (created if missing): writable, or creatable."""
    path = path.expanduser()
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give a folder")
    existing = next((p for p in [path, *path.resolve().parents] if p.exists()), None)
    if existing is None or not os.access(existing, os.W_OK):
        raise UsageError(f"{flag} {path} is not writable")


def prefect_home(settings: Settings) -> Path:
    """The Prefect home of this process: ``PREFECT_HOME`` when set, else the data folder's ``prefect``."""
    given = os.environ.get("PREFECT_HOME", "").strip()
    return Path(given).expanduser().resolve() if given else (settings.data_dir / "prefect").resolve()


def prepare_process(settings: Settings, prefect: bool = True, find_ui: bool = True, run_lines: bool = True) -> None:
    """Third-party defaults and logging, before anything imports Prefect or GX (they read their
    settings at import). A variable the user already set wins. Without ``prefect`` (the survey
    server, which never talks to it) no Prefect home is made: it may write its store folder alone.
    With ``find_ui`` and no Prefect API configured, a Prefect server already serving the home's
    database (``revbench ui``) becomes this process's API: a second server on it would fight it.
    Without ``run_lines`` (the demo's short account) Prefect's console lines (a flow run began, a
    task run finished, its temporary server started) stay in the Prefect UI unless ``-v``."""
    defaults = {
        "PREFECT_HOME": str(prefect_home(settings)),
        # The temporary Prefect server cold-starts in ~20 s on two cores; its default timeout is shorter.
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",  # Prefect's client-side telemetry
        # A piece that finds its service's slots taken sleeps what the server's Retry-After says
        # (10 s by default) before asking again: slots then sit idle, and after Ctrl-C the run
        # waits for those sleeps. Our temporary server answers 1 s.
        "PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS": "1",
        "GX_ANALYTICS_ENABLED": "false",
        # What revbench logs inside a tracked run (a run waiting for a curator, a service that
        # stopped answering) goes to that run's log in the Prefect UI as well as the terminal;
        # outside a run there is no run log to send it to, which is no cause for a warning.
        "PREFECT_LOGGING_EXTRA_LOGGERS": "revbench",
        "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",
        # The default embedding model ships inside a package; other models are named by path or
        # by a hub name the user makes available (set HF_HUB_OFFLINE=0 to download).
        "HF_HUB_OFFLINE": "1",
    }
    if not VERBOSE[0]:
        # The temporary server runs in a child process that writes to our terminal: under load its
        # services log a failed batch as an ERROR with a traceback, then retry it ("1 to retry, 0
        # dropped"). A request it truly fails reaches the client, which says so in one line.
        defaults["PREFECT_SERVER_LOGGING_LEVEL"] = "CRITICAL"
        if not run_lines:
            # The console handler only: the API handler still sends every line to the run's log.
            defaults["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] = "ERROR"
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    # Prefect creates its home but not the folders above it.
    if prefect:
        home = Path(os.environ["PREFECT_HOME"]).expanduser()
        home.mkdir(parents=True, exist_ok=True)
        if find_ui and prefect_api_url(home) is None:
            from revbench.app.prefect_ui import running_ui

            found, note = running_ui(home, VERBOSE[0])
            if found is not None:
                os.environ["PREFECT_API_URL"] = found.api_url
            if note:
                print(note, file=sys.stderr)
    if threading.current_thread() is threading.main_thread():
        # SIGTERM stops a command the way Ctrl-C does: the run is marked cancelled, committed
        # work is kept, and the next run resumes.
        signal.signal(signal.SIGTERM, _terminate)
        signal.signal(signal.SIGINT, _terminate)
    log = logging.getLogger("revbench")
    log.setLevel("DEBUG" if VERBOSE[0] else settings.log_level.upper())
    if not log.handlers:
        from rich.console import Console
        from rich.logging import RichHandler

        # A stderr console looks up sys.stderr when it writes, so redirected streams are honoured.
        # In a log (not a terminal) a record is one plain line, never folded at 80 columns mid-path.
        err = Console(stderr=True)
        if err.is_terminal:
            log.addHandler(RichHandler(console=err, show_path=False, show_time=False, markup=False))
        else:
            plain = _StderrHandler()
            plain.setFormatter(logging.Formatter("%(levelname)-8s %(message)s"))
            log.addHandler(plain)
        for handler in log.handlers:
            handler.addFilter(_not_run_log_only)
        log.propagate = False
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


def _not_run_log_only(record: logging.LogRecord) -> bool:
    """Keeps off the terminal a line the command prints itself (``flows.common.RUN_LOG_ONLY``)."""
    return not getattr(record, "run_log_only", False)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Plain lines to whatever ``sys.stderr`` is when a record comes (a test or a caller may have
    redirected it since the handler was made)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _terminate(signum: int, frame: Any) -> None:
    note_interrupt()
    raise KeyboardInterrupt(f"signal {signum}")


_previous_unraisable: list[Any] = [sys.unraisablehook]


def install_unraisable_hook() -> None:
    """For the console script's process only (a host such as pytest keeps its own hook)."""
    if sys.unraisablehook is not _unraisable:
        _previous_unraisable[0] = sys.unraisablehook
        sys.unraisablehook = _unraisable


def _unraisable(args: Any) -> None:
    """An interrupt raised while a C library was calling back into Python cannot propagate:
    Python would print 'Exception ignored' with a traceback and carry on. Deliver it again
    instead, so the command still stops with its one line."""
    if isinstance(args.exc_value, KeyboardInterrupt) and interrupt_noted():
        _thread.interrupt_main()
        return
    _previous_unraisable[0](args)


def prefect_api_url(home: Path | None = None) -> str | None:
    """The Prefect API a run would use: ``PREFECT_API_URL`` in the environment, else the active
    profile's in ``<home>/profiles.toml`` (default ``$PREFECT_HOME``, else ``~/.prefect``), read
    without importing Prefect; None when there is none (runs start a temporary server)."""
    return prefect_setting("PREFECT_API_URL", home)


def prefect_setting(name: str, home: Path | None = None) -> str | None:
    """A Prefect client setting (``PREFECT_API_URL``, ``PREFECT_API_AUTH_STRING``) as a run would
    find it: the environment, else a ``.env`` in the working directory (Prefect reads it too, so a
    URL there must not leave revbench deciding as if there were none), else the active profile (see
    ``prefect_api_url``); None when unset."""
    value = os.environ.get(name, "").strip()
    if value:
        return value
    if Path(".env").is_file():
        from dotenv import dotenv_values

        value = str(dotenv_values(".env").get(name) or "").strip()
        if value:
            return value
    home = home or Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect")).expanduser()
    try:
        text = (home / "profiles.toml").read_text()
    except OSError:
        return None
    import tomllib  # only where there is a profile to read: most one-off commands have none

    try:
        profiles = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    return str(profiles.get("profiles", {}).get(active, {}).get(name) or "").strip() or None


def prefect_api_configured() -> bool:
    """Whether a Prefect API is configured (see ``prefect_api_url``)."""
    return prefect_api_url() is not None


def resolve_track(track: bool | None, long_flow: bool) -> bool:
    """Tracked when asked (``--track``/``--no-track``), else when a Prefect API is configured,
    else for the long flows only (their temporary server's cost is small beside their work)."""
    if track is not None:
        return track
    return prefect_api_configured() or long_flow
