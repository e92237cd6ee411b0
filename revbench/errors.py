"""Errors revbench raises on purpose. Each message is the whole story in one line: it names the
file and row, the flag or setting, or the service and its URL, and says what was expected. The
command line prints it as it is (no traceback) and exits with the error's code."""

from __future__ import annotations

import threading

_INTERRUPTED = threading.Event()


def note_interrupt() -> None:
    """Record that Ctrl-C or SIGTERM arrived. The KeyboardInterrupt raised for it can surface
    wrapped in a library's own error (DuckDB reports one raised while it scanned a registered
    frame as an invalid-input error), and the run must still end as interrupted."""
    _INTERRUPTED.set()


def interrupt_noted() -> bool:
    """Whether an interrupt arrived since the last ``clear_interrupt``."""
    return _INTERRUPTED.is_set()


def clear_interrupt() -> None:
    """Forget an earlier interrupt (each command and each run starts clean)."""
    _INTERRUPTED.clear()


class RevbenchError(Exception):
    """An expected failure with a message a user can act on."""

    exit_code = 1


class UsageError(RevbenchError):
    """A flag, setting or request that cannot run as given; nothing was done."""

    exit_code = 2


class InputError(UsageError):
    """An input file that is not in its declared format; nothing was written."""


class ReleaseTampered(InputError):
    """A release folder whose files differ from its ``manifest.json`` (or whose manifest differs
    from the one recorded when it was built): refused by name, like any input not as declared
    (exit 2); nothing was read from it or written."""


class ServiceUnavailable(RevbenchError):
    """A service a stage needs did not answer; the run stops as failed and rejects nothing."""

    exit_code = 3

    def __init__(self, service: str, url: str, detail: str):
        super().__init__(f"{service} at {url} is unreachable ({detail}); nothing was rejected, "
                         "re-run once it answers")
        self.service = service
        self.url = url
        self.detail = detail

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        # Raised in a Dask worker, it travels back to the flow by pickle.
        return (type(self), (self.service, self.url, self.detail))


class PieceFailed(RevbenchError):
    """A piece of a stage failed in another process (a Dask worker): the message names the
    worker, the piece and what was missing there (a model, a module, a path, a service)."""

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (type(self), (str(self),))


class WarehouseBusy(RevbenchError):
    """Another process holds the warehouse."""

    exit_code = 4


class WarehouseDamaged(RevbenchError):
    """The warehouse (or the survey store beside it) is not a readable file of ours."""

    exit_code = 5


class SurveyStoreGone(WarehouseDamaged):
    """The survey store's file left its path (moved aside or deleted) while a process had it
    open: nothing is recorded, in it or anywhere, until a store is back at the path."""


class NoSpace(RevbenchError):
    """A write refused for want of space (a full disk, a quota, a file-size limit): the output
    being written was removed, nothing half-written is left; free space and run again."""

    exit_code = 7
