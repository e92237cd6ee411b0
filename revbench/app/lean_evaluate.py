"""The lean lane of ``revbench evaluate``: a one-off look at prediction files answered before the
command line loads typer, pydantic, polars or DuckDB: loading them is most of the full path's
time, several times what RATE's own ``evaluation_script.py`` takes (``benchmarks/results/cli.json``).
RATE's flat files (``-p NAME=PATH`` alone, ``--bootstrap 0``) take the standard library alone
(``revbench.evaluation.lean``); the CMU gold standard's (``-b goldstandard=DIR -p NAME=PATH``, any
``--bootstrap``) take numpy too, for the bootstrap the full path draws (``revbench.evaluation.lean_gold``).

``revbench.app.cli.main`` offers it every command line; :func:`run_lean` answers only one it can
answer exactly as the full path would (the same lines printed, the same files written, byte for
byte but the run id and the time) and returns None for anything else, having written nothing: then
the full path runs the command, and says what is wrong with it, if anything. It takes
``-p``/``--predictions NAME=PATH`` (repeated), one ``-b goldstandard=DIR``, ``--bootstrap``, ``--seed N``,
``--no-track``, ``--json-out FILE``, ``--no-plot`` and ``--report DIR`` with ``--no-plot`` (the plot needs
matplotlib), where the settings are the defaults or ``REVBENCH_DATA_DIR`` alone (no ``.env``, no demo's
settings), no Prefect API, profile or UI would make the run tracked or speak, and every file passes
the lane's reading of it. The full path stores nothing either then: an evaluation of prediction
files alone, on no benchmark or on one read from files, is stored only with ``--record`` or
``--track``, which the lane leaves to it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from revbench.evaluation import lean

REPORT_FILES = "report.md, results.json, separation.json, predictions/, trec/, exports.json"
VALUE_FLAGS = {"-p": "predictions", "--predictions": "predictions", "--bootstrap": "bootstrap", "--seed": "seed",
               "--report": "report", "--json-out": "json_out", "-b": "benchmark", "--benchmark": "benchmark"}
BARE_FLAGS = ("--no-track", "--no-plot")
RICH_ENVIRON = ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "JUPYTER_COLUMNS", "JUPYTER_LINES")
"""Variables that change what rich prints, or how wide: with any of them set, rich prints."""
PLAIN = re.compile(r"[ -~]*")
"""Names printed as they are: printable ASCII (``[``, ``]``, ``\\``, ``:`` and ``*`` excepted below)."""
BOLD = re.compile(r"\*\*(.+?)\*\*")
DIFFERENCE = " - "
"""``revbench.evaluation.model.DIFFERENCE``, which the plan refuses in a ``-p`` name (not imported:
the model loads polars). The lane reads no difference rows: it makes none, and marks its own rows
with a null ``baseline`` (``lean.result_rows``)."""


def parse(args: list[str]) -> dict[str, list[str]] | None:
    """``args`` as flag -> values, when every flag is one the lane takes, each value given once
    (``-p`` repeated), at least one ``-p`` and ``--bootstrap 0``, or with one ``-b`` (the gold
    standard, read with numpy) any ``--bootstrap`` up to a million and a seed numpy takes; None otherwise."""
    if args[:1] != ["evaluate"]:
        return None
    given: dict[str, list[str]] = {"predictions": []}
    i = 1
    while i < len(args):
        name, eq, value = args[i].partition("=") if args[i].startswith("--") else (args[i], "", "")
        if name in BARE_FLAGS and not eq:
            given[name] = []
            i += 1
            continue
        key = VALUE_FLAGS.get(name)
        if key is None or (not eq and i + 1 == len(args)):
            return None
        value, i = (value, i + 1) if eq else (args[i + 1], i + 2)
        # Click would take "-x" as the value; a typo is the full path's to name.
        if not value or "\0" in value or (value.startswith("-") and key != "seed"):
            return None
        if key in given and key != "predictions":
            return None
        given.setdefault(key, []).append(value)
    if not given["predictions"] or not re.fullmatch(r"[-+]?[0-9]+", given.get("seed", ["0"])[0]):
        return None
    if any(DIFFERENCE in item.partition("=")[0] for item in given["predictions"]):
        return None  # a name the full path refuses (``plan.DIFFERENCE``: it would look like a paired difference)
    if "benchmark" not in given and given.get("bootstrap") != ["0"]:
        return None
    # Typer's default; a negative seed is numpy's error (the full path's to say).
    if "benchmark" in given and (given["benchmark"][0].partition("=")[0].strip() != "goldstandard"
                                 or not re.fullmatch(r"0|[1-9][0-9]{0,5}", given.setdefault("bootstrap", ["1000"])[0])
                                 or int(given.get("seed", ["0"])[0]) < 0):
        return None
    if "report" in given and "--no-plot" not in given:
        return None
    return given


def data_dir(environ: Mapping[str, str]) -> Path | None:
    """``Settings().data_dir`` as ``revbench.app.entry.build_settings`` reads it, where nothing but
    ``REVBENCH_DATA_DIR`` could set a setting (any other ``REVBENCH_`` variable may be unknown or
    invalid: an error), there is no ``.env`` and no demo's settings in the folder; else None."""
    if any(k != "REVBENCH_DATA_DIR" and k.upper().startswith("REVBENCH_") for k in environ) or os.path.lexists(".env"):
        return None
    value = environ.get("REVBENCH_DATA_DIR", "data")
    if not value or value != value.strip():
        return None
    folder = Path(value)
    return None if os.path.lexists(folder / ".demo-settings.json") else folder


def _listening(host: str, port: int) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def prefect_home(environ: Mapping[str, str], folder: Path, no_track: bool) -> Path | None:
    """The Prefect home ``prepare_process`` makes, where the full path would run untracked and say
    nothing about Prefect: no profile to read, a Prefect API only with ``--no-track``, else no
    ``revbench ui`` marked and nothing serving Prefect's default address (``running_ui``); else None."""
    given = environ.get("PREFECT_HOME")
    if given is not None and (not given or given != given.strip()):
        return None
    home = Path(given).expanduser() if given is not None else (folder / "prefect").resolve()
    if os.path.lexists(home / "profiles.toml"):
        return None
    if environ.get("PREFECT_API_URL", "").strip():
        return home if no_track else None
    if os.path.lexists(home / "revbench-ui.json") or _listening("127.0.0.1", 4200):
        return None
    return home


def _writable_folder(path: Path) -> bool:
    """``entry.check_output_dir`` passes."""
    path = path.expanduser()
    if path.exists() and not path.is_dir():
        return False
    existing = next((p for p in [path, *path.resolve().parents] if p.exists()), None)
    return existing is not None and os.access(existing, os.W_OK)


def _writable_file(path: Path) -> bool:
    """``entry.check_output_file`` passes."""
    parent = path.expanduser().resolve().parent
    return (not path.is_dir() and parent.is_dir() and os.access(parent, os.W_OK)
            and not (path.exists() and not os.access(path, os.W_OK)))


def read_files(items: list[str]) -> list[lean.FlatFile] | None:
    """Each ``NAME=PATH`` (``plan.parse_named``) read as RATE's flat file, when ``plan_evaluation``
    and ``load_inputs`` would accept them all together: no ``@BENCHMARK`` (there is none), no two
    names or two file names writing the same export files; None otherwise."""
    named: list[tuple[str, Path]] = []
    for item in items:
        name, eq, path = item.partition("=")
        if not eq or not name.strip() or not path.strip() or "@" in name:
            return None
        named.append((name.strip(), Path(path.strip()).expanduser()))
    for i, (a, pa) in enumerate(named):
        if any(lean.share_files(a, b) or lean.export_key(pa.stem) == lean.export_key(pb.stem) for b, pb in named[:i]):
            return None
    try:
        return [lean.read_flat(name, path) for name, path in named]
    except (lean.Declined, OSError):
        return None


def _plain(text: str) -> bool:
    return PLAIN.fullmatch(text) is not None and not any(c in text for c in "[]\\:*")


def console_width(environ: Mapping[str, str]) -> int | None:
    """The width rich gives a console that is no terminal (``Console.size``): the first of stdin,
    stdout and stderr that is one, else 80; None where rich would decide otherwise (a terminal,
    colours forced, a width or an encoding of its own)."""
    try:
        if sys.stdout.isatty() or not (getattr(sys.stdout, "encoding", None) or "utf-8").lower().startswith("utf"):
            return None
    except (AttributeError, ValueError):  # rich takes a closed stream for no terminal; it prints, we need not
        return None
    if any(k in environ for k in RICH_ENVIRON):
        return None
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def plain_table(t: lean.Table, width: int) -> list[str]:
    """What ``print_tables`` prints of ``t`` on a console ``width`` wide that is no terminal: rich's
    table (heavy head, the title above it, never wrapped in a log), or ``narrow.narrow_lines``
    where the table is wider than the line; then the notes."""
    title = t.title.lstrip("# ")
    rows = [[BOLD.sub(r"\1", c) for c in row] for row in t.rows]
    widths = [max(len(c) for c in col) for col in zip(t.header, *rows, strict=True)]
    if sum(w + 3 for w in widths) + 1 > width:
        out = [title]
        for row in rows:
            out += [f"{t.header[0]}: {row[0]}"] + [f"  {h}: {v}" for h, v in zip(t.header[1:], row[1:], strict=True) if v]
    else:
        def line(cells: list[str], edges: str) -> str:
            return edges[0] + edges[1].join(f" {c.ljust(w) if i == 0 else c.rjust(w)} "
                                            for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + edges[2]

        def rule(edges: str) -> str:
            return edges[0] + edges[2].join(edges[1] * (w + 2) for w in widths) + edges[3]

        out = [title, rule("┏━┳┓"), line(t.header, "┃┃┃"), rule("┡━╇┩"), *[line(r, "│││") for r in rows], rule("└─┴┘")]
    return out + [f"  {note}" for note in t.notes]


def print_tables(tables: list[lean.Table], console: object) -> None:
    """Report tables as ``revbench evaluate`` prints them on ``console`` (a ``FittingConsole``),
    best values in bold: ``revbench.evaluation.report.ReportTable`` or :class:`lean.Table`."""
    from rich.table import Table as RichTable

    for t in tables:
        if not t.header:
            # A line in place of a table: what is absent and why.
            console.print(t.title.lstrip("# "), markup=False)  # type: ignore[attr-defined]
            continue
        table = RichTable(title=t.title.lstrip("# "), title_justify="left")
        for i, h in enumerate(t.header):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in t.rows:
            table.add_row(*[BOLD.sub(r"[bold]\1[/]", c.replace("[", "\\[")) for c in row])
        console.print(table)  # type: ignore[attr-defined]
        for note in getattr(t, "notes", []):
            console.print(f"  {note}", markup=False, highlight=False)  # type: ignore[attr-defined]


def report_line(report_dir: str, run_id: str, plot: bool = False, attack: bool = False) -> str:
    """The last line ``revbench evaluate`` prints (rich markup): where the report is, and the run."""
    return (f"Report: [cyan]{report_dir}[/] ({REPORT_FILES}" + (", loss.png" if plot else "")
            + (", attack.png" if plot and attack else "") + f"); run {run_id}")


def show(tables: list[lean.Table], report_dir: str, run_id: str, names: list[str]) -> None:
    """Print the tables and the report's line: as plain lines where rich would print plain text
    and every name is plain (rich costs the lane a quarter of its time), else through rich."""
    width = console_width(os.environ)
    if width is not None and all(_plain(n) for n in [*names, report_dir]):
        lines = [line for t in tables for line in plain_table(t, width)]
        sys.stdout.write("".join(f"{line}\n" for line in [*lines, report_line(report_dir, run_id).replace("[cyan]", "")
                                                          .replace("[/]", "")]))
        sys.stdout.flush()
        return
    from revbench.app.console import console

    print_tables(tables, console)
    console.print(report_line(report_dir, run_id))


def _uuid4() -> str:
    """``str(uuid.uuid4())`` without the uuid module (it loads ``platform``)."""
    b = bytearray(os.urandom(16))
    b[6], b[8] = b[6] & 0x0F | 0x40, b[8] & 0x3F | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _earlier_index(path: Path) -> str | None | bool:
    """The text of an earlier ``exports.json`` (None: none, or one ``export_formats`` cannot read
    and starts anew); False where it is something the lane does not mirror (a folder)."""
    if not os.path.lexists(path):
        return None
    if not path.is_file():
        return False
    try:
        return path.read_text()
    except (OSError, ValueError):
        return None


def run_lean(args: list[str]) -> int | None:
    """Run ``revbench ARGS`` in the lean lane and return its exit code; None (nothing written)
    where the full path must run it."""
    given = parse(args)
    folder = data_dir(os.environ) if given is not None else None
    if given is None or folder is None:
        return None
    home = prefect_home(os.environ, folder, "--no-track" in given)
    report = Path(given["report"][0]) if "report" in given else folder / "reports" / "evaluate"
    json_out = Path(given["json_out"][0]) if "json_out" in given else None
    if home is None or any(v[0].startswith("~") for k, v in given.items() if k in ("report", "json_out")):
        return None  # "~" is expanded where it is checked, not where it is written
    if not _writable_folder(report) or (json_out is not None and not _writable_file(json_out)):
        return None
    if "benchmark" in given:
        return run_gold(given, report, json_out, home)
    files = read_files(given["predictions"])
    earlier = _earlier_index(report / "exports.json")
    if files is None or earlier is False:
        return None
    try:
        kept = lean.merged_index(earlier if isinstance(earlier, str) else None, [f.benchmark for f in files])
        home.mkdir(parents=True, exist_ok=True)  # prepare_process makes it, tracked or not
    except (lean.Declined, OSError):
        return None
    from datetime import UTC, datetime

    run_id, now = _uuid4(), datetime.now(UTC).isoformat()
    rows, tables, index = [], [], []
    # The full path's order: each benchmark's predictions and exports, then the report's files.
    try:
        for f in files:
            metrics = lean.metric_rows(f)
            rows += lean.result_rows(metrics, run_id, now)
            tables.append(lean.report_table(metrics))
            _write(report / lean.predictions_file(f), json.dumps(lean.openreview(f)))
            exported, entries = lean.export_files(f)
            for rel, text in exported.items():
                _write(report / rel, text)
            index += entries
        _write(report / "exports.json", json.dumps(kept + index, indent=1))
        _write(report / "report.md", "\n".join(t.to_markdown() for t in tables) + "\n")
        _write(report / "results.json", json.dumps(rows, indent=1))
        _write(report / "separation.json", json.dumps([], indent=1))
        if json_out is not None:
            json_out.write_text(json.dumps(rows, indent=1))
    except OSError as exc:
        return refused(exc)
    show(tables, str(report), run_id, [n for f in files for n in (f.name, f.path.stem)])
    return 0


def refused(exc: OSError) -> int:
    """A write the system refused (something in the way under the report folder, a full disk):
    the full path's one line for an error no check foresaw, and its exit code."""
    from revbench.app.console import unexpected

    return unexpected(exc)


def run_gold(given: dict[str, list[str]], report: Path, json_out: Path | None, home: Path) -> int | None:
    """``evaluate -b goldstandard=DIR -p ...`` (``revbench.evaluation.lean_gold``): everything read,
    checked and computed before the first file is written; None where the full path must run it."""
    import warnings

    from revbench.evaluation import lean_gold  # numpy: only the gold standard's lane loads it

    try:
        # The full path shows a warning raised in revbench's code and hides numpy's own: the lane shows none.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gold = lean_gold.read_gold(given["benchmark"][0])
            preds = lean_gold.read_predictions(given["predictions"], gold)
            rows, seps = lean_gold.metric_rows(gold, preds, int(given["bootstrap"][0]), int(given.get("seed", ["0"])[0]))
            tables = lean_gold.report_tables(rows, seps)
            exported, entries = lean_gold.export_files(gold, preds)
        earlier = _earlier_index(report / "exports.json")
        if caught or earlier is False:
            return None
        kept = lean.merged_index(earlier if isinstance(earlier, str) else None, [lean_gold.GOLD])
        home.mkdir(parents=True, exist_ok=True)  # prepare_process makes it, tracked or not
    except Exception:  # noqa: BLE001  # whatever the lane cannot read, the full path reads and names
        return None
    from datetime import UTC, datetime

    run_id, now = _uuid4(), datetime.now(UTC).isoformat()
    results = lean.result_rows(rows, run_id, now, gold.version)
    try:
        for rel, text in exported.items():  # the full path's order: the exports, then the report's files
            _write(report / rel, text)
        _write(report / "exports.json", json.dumps(kept + entries, indent=1))
        _write(report / "report.md", "\n".join(t.to_markdown() for t in tables) + "\n")
        _write(report / "results.json", json.dumps(results, indent=1))
        _write(report / "separation.json", json.dumps(seps, indent=1))
        if json_out is not None:
            json_out.write_text(json.dumps(results, indent=1))
    except OSError as exc:
        return refused(exc)
    show(tables, str(report), run_id, [p.name for p in preds])
    return 0
