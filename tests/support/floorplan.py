"""The floor plan of revbench: every package and root module (a room) on a numbered floor.

A room imports only rooms on its own floor or below, imports inside functions and under
``if TYPE_CHECKING:`` included (``tests/test_structure_floors.py`` checks every import of every
module against it). The floors were read off the imports as they stand; where the drawing chose
between two heights, it chose the one that keeps a documented promise: the tables of objectives
and services sit below ``revbench.ml`` and ``revbench.warehouse`` because the command line reads
them without loading torch or DuckDB. ``docs/gen_design.py`` draws this plan into
``docs/design.md``.

A new package or root module fails the structure tests until it is placed here.
"""

from __future__ import annotations

from typing import NamedTuple


class Floor(NamedTuple):
    """One floor: its number (0 the lowest), its name, what lives there and its rooms."""

    number: int
    name: str
    what: str
    rooms: tuple[str, ...]


FLOORS: tuple[Floor, ...] = (
    Floor(10, "the application", "the command line, the demo, the doctor, the entry point that builds the settings once",
          ("revbench.app", "revbench.__main__")),
    Floor(9, "what reads the runs", "the rebuild of a published benchmark: its pools against the original's rated "
                                    "pairs, the comparison with the original and its report. It runs the evaluation "
                                    "flow and reads what the flows wrote and exported, so it stands above them, on a "
                                    "floor of its own that no flow can reach; it prints nothing: the application "
                                    "drives it and shows it",
          ("revbench.rebuild",)),
    Floor(8, "what runs", "the flows that order the tasks and hold a run's warehouse session; the replay server",
          ("revbench.flows", "revbench.replay")),
    Floor(7, "the work", "tasks, plain functions over frames; the SYNTHETIC world and its truth",
          ("revbench.tasks", "revbench.synth")),
    Floor(6, "evaluation", "the evaluation model, importers, scorers, metrics, report",
          ("revbench.evaluation",)),
    Floor(5, "the doors", "clients and their probes, the survey, backups, a release's read-side checks, "
                          "which world a data folder holds",
          ("revbench.clients", "revbench.survey", "revbench.backup", "revbench.release_checks", "revbench.worlds")),
    Floor(4, "storage", "the only code that opens DuckDB or SQLite or holds SQL",
          ("revbench.warehouse",)),
    Floor(3, "the ML stack", "models, backends, embeddings, keywords, training: loaded by what needs them",
          ("revbench.ml",)),
    Floor(2, "what is shared", "the tables of services and objectives, what a probe answers, the retry policy",
          ("revbench.services", "revbench.objectives", "revbench.health", "revbench.retry")),
    Floor(1, "declarations", "the settings tree, every table, a release's files",
          ("revbench.settings", "revbench.schemas", "revbench.release_files")),
    Floor(0, "the ground", "errors, files written whole, identity keys, reference lists, templates, clean JSON text, "
                           "interruptible workers, the stages' table, the version",
          ("revbench", "revbench.errors", "revbench.files", "revbench.keys", "revbench.reference", "revbench.stages",
           "revbench.templates", "revbench.text_clean", "revbench.workers")),
)
"""Every room of the house, top floor first (as the drawing reads)."""

UPWARD_ALLOWED: dict[tuple[str, str], str] = {}
"""(module, module of a higher floor it imports) -> why it may. None today: the modules' imports,
function-level and ``TYPE_CHECKING`` ones included, form no circle (``TYPE_CHECKING_LOOPS`` in
``tests/test_structure.py`` names none), so every room stands at or above everything it imports."""

SIDE_WALLS: dict[tuple[str, str], str] = {
    ("revbench.tasks", "revbench.warehouse"):
        "a task is a plain function over settings, clients or frames that a test calls with hand-built frames; "
        "the flow holds the run's one warehouse session and hands the task its rows",
    ("revbench.synth", "revbench.warehouse"):
        "the SYNTHETIC world reaches the warehouse as the outside world's answers, through the replay server and "
        "the stages, as a real world does",
    ("revbench.synth", "revbench.tasks"):
        "the world the stages are tested on is not made with their own code: a bug in a task would shape the world "
        "and the truth that check it",
}
"""(room, room it never imports) -> why, where the second is not above the first (same floor or
lower), so the floors alone cannot say it."""

REACHES: dict[tuple[str, str], str] = {
    ("revbench.stages", "revbench.flows"):
        "a stage is its flow and its planner, imported when the refresh runs them: the settings read the table "
        "for every command and load neither Prefect nor a flow",
    ("revbench.objectives", "revbench.flows"):
        "an objective is the flow that trains it, imported when it trains: the command line reads the table for "
        "--help without loading Prefect",
    ("revbench.objectives", "revbench.ml"):
        "an objective's loss lives beside the one training loop, which loads torch; the command line must not",
    ("revbench.services", "revbench.app"):
        "the settings, data folder, Prefect and isolation probes check the application's own surroundings",
    ("revbench.services", "revbench.warehouse"):
        "the warehouse and survey store probes open their databases, which only the warehouse does",
    ("revbench.services", "revbench.clients"):
        "each service's probe lives beside the client that talks to it",
    ("revbench.services", "revbench.survey"):
        "the survey server's probe lives beside the server",
}
"""(module holding ``module:function`` references, room they name on a higher floor) -> why a
low table names code above it; the references are resolved only when that code runs."""


def room_of(module: str) -> str:
    """The room of ``module``: its top package under ``revbench``, or itself for a root module."""
    return ".".join(module.split(".")[:2])


def floor_of(room: str) -> int | None:
    """The floor ``room`` is on, or None where the plan does not place it."""
    return next((f.number for f in FLOORS if room in f.rooms), None)
