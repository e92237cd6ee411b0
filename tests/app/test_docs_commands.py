"""Every command line the docs show names a real command, and the command line's own parser
accepts it (issue 52: every command in the docs' examples is run by a test or by the docs build).

Running them all would take hours (demos, benchmarks, live services). What goes stale unnoticed is
the line itself (a flag renamed, a command removed), and the parser that the ``revbench`` console
script uses checks that in milliseconds, running nothing: each line is parsed by ``make_context``
on the command it names (the typer app's click group, walked group by group), which converts every
value but calls no command. No option of the app has a callback, so parsing does no work; lines
with ``--help`` are checked with ``--help`` left out, so its eager callback never prints or exits.

What is collected, from README.md, tests/README.md, benchmarks/README.md and docs/**/*.md:

- every line of a fenced shell block (``bash``, ``sh``, ``shell``, ``console`` or unlabelled; a
  ``\\`` continues it onto the next), each part of a pipe or ``&&`` list, after ``VAR=value``
  assignments, ``sudo``/``exec``/``env``, ``docker compose run|exec ... SERVICE`` and inside
  ``sh -c '...'``; lines forwarding ``"$@"`` (a wrapper's definition) are skipped;
- 4-space indented code blocks outside lists and admonitions (there, indentation is prose);
- inline code spans that start with a command, in prose, table cells and shell comments, and in
  ``text`` blocks (printed output) a command quoted at the start of a line or after a colon. These
  are fragments: they name a command and the flags a sentence is about, so a required option they
  leave out is not a failure; an unknown command or option, or a value of the wrong type, is. With
  the placeholders below mapped they all parse cleanly, so all of them are in.

A command is ``revbench``, ``.venv/bin/revbench`` (any ``bin/revbench``), ``python -m revbench``,
or in docs/going-live.md ``rb``, which that page defines as revbench run as its user. ``python -m
benchmarks.X`` (and ``revbench.X``) must name a module of the repository whose argparse declares
every flag given (read from its ``add_argument`` calls, without importing it).

Placeholders are values, so they parse: ``<...>`` and ``...`` stand for anything, ``[...]`` marks
what is optional (it is checked as if given), ``a|b`` is a choice (the first is checked), and an
upper-case word (``PATH``, ``DIR``, ``N``) given to a number option is read as 1. Option and
command names are never mapped: a wrong one fails, naming the file and line. What a value means
beyond its type (a scorer's name, a service for ``doctor --only``) is the command's to check when
it runs, one line and exit 2, so it is not checked here.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main

# typer vendors click (typer._click); these two are the errors a fragment may raise and still pass.
from typer._click.exceptions import MissingParameter, NoArgsIsHelpError

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"", "bash", "sh", "shell", "console"}
GLOBAL_FLAGS = {"--debug", "--verbose", "-v"}  # revbench.app.cli.main takes them anywhere on the line
# Commands that run the next word as a command, with their options that take a value.
WRAPPERS = {"sudo": {"-u", "-g", "--user", "--group"}, "env": set(), "exec": set(), "time": {"-f", "-o"}, "nohup": set(),
            "command": set(), "nsenter": {"-t", "--target"}, "{": set()}
DOCKER_VALUE_FLAGS = {"-v", "-e", "-w", "-u", "-p", "--volume", "--env", "--workdir", "--user", "--name", "--entrypoint",
                      "--publish", "--env-file"}
ALIASES = {"docs/going-live.md": {"rb"}}  # the page defines `rb` as revbench run as the revbench user
PLACEHOLDER = "PLACEHOLDER"
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
ENV = re.compile(r"[A-Za-z_]\w*=.*")
PYTHON = re.compile(r"(\S*/)?python3?")
QUOTED = re.compile(r"(?:^|:\s+)((?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*/)?(?:revbench|rb|python3?)\s.*)$")


@dataclass(frozen=True)
class Snippet:
    """Shell text from a page: where it starts, the text, and whether it is a fragment (a span)."""

    where: str
    text: str
    fragment: bool


@dataclass(frozen=True)
class DocCommand:
    """One command found in a snippet: ``revbench`` with its arguments, or ``python -m`` a module."""

    where: str
    line: str
    module: str  # "revbench" for the command line itself
    args: tuple[str, ...]
    fragment: bool


def pages(root: Path = ROOT) -> list[Path]:
    """The pages whose commands are checked."""
    return [root / "README.md", root / "tests" / "README.md", root / "benchmarks" / "README.md",
            *sorted((root / "docs").rglob("*.md"))]


def split_comment(line: str) -> tuple[str, str]:
    """``line`` as its code and its shell comment (a ``#`` starting a word outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1:]
    return line, ""


def spans(text: str, where: str, start: int) -> Iterator[Snippet]:
    """The inline code spans of ``text`` (which begins on line ``start``) as fragments."""
    for m in SPAN.finditer(text):
        line = start + text.count("\n", 0, m.start())
        yield Snippet(f"{where}:{line}", " ".join(m.group(2).split()), True)


def snippets(path: Path, text: str | None = None, root: Path = ROOT) -> list[Snippet]:
    """Every piece of shell on the page at ``path``: code lines whole, spans and comments as fragments."""
    rel = path.relative_to(root).as_posix()
    lines = (path.read_text() if text is None else text).splitlines()
    out: list[Snippet] = []
    fence: tuple[str, str] | None = None  # (marker, language) while inside a fenced block
    pending, pending_at = "", 0  # a code line continued with a backslash
    prose: list[tuple[int, str]] = []  # the paragraph being read, for spans that cross lines
    container = False  # inside a list item or an admonition, where indentation is not code
    prev_blank, in_indented = True, False

    def code(n: int, line: str) -> None:
        nonlocal pending, pending_at
        if line.lstrip().startswith("$ "):
            line = line.lstrip()[2:]
        if not pending:
            pending_at = n
        body, comment = split_comment(line)
        if comment:
            out.extend(spans(comment, rel, n))
            out.extend(Snippet(f"{rel}:{n}", m.group(1), True) for m in QUOTED.finditer(comment.strip()))
        if body.rstrip().endswith("\\"):
            pending += body.rstrip()[:-1] + " "
            return
        if (pending + body).strip():
            out.append(Snippet(f"{rel}:{pending_at}", pending + body, False))
        pending = ""

    def flush() -> None:
        if prose:
            out.extend(spans("\n".join(t for _, t in prose), rel, prose[0][0]))
            prose.clear()

    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(2).startswith(fence[0][0]) and len(m.group(2)) >= len(fence[0]) and not m.group(3):
                fence = None
            elif fence[1] in SHELL:
                code(n, line)
            elif fence[1] == "text":
                out.extend(Snippet(f"{rel}:{n}", q.group(1), True) for q in QUOTED.finditer(line.strip()))
            continue
        if m:
            flush()
            fence = (m.group(2), m.group(3).lower())
            continue
        blank = not line.strip()
        if re.match(r"\s*([-*+]|\d+[.)])\s|(!!!|\?\?\?)", line):
            container = True
        elif not blank and not line[:1].isspace():
            container = False
        indented = line.startswith(("    ", "\t")) and not blank
        if indented and not container and (prev_blank or in_indented):
            flush()
            in_indented = True
            code(n, line[4:] if line.startswith("    ") else line[1:])
        else:
            in_indented = in_indented and blank
            if blank:
                flush()
            else:
                prose.append((n, line))
        prev_blank = blank
    flush()
    return out


def normalise(text: str) -> str:
    """The placeholders of ``text`` as plain words the shell splitter keeps whole."""
    text = re.sub(r"<[A-Za-z][^<>\n]*>", PLACEHOLDER, text)  # <UTC time>, <module>: one value
    text = re.sub(r"\s\|\s*(?=\[)", " ", text)  # [--port N] | [--socket PATH]: either, both checked
    text = re.sub(r"(?<!\S)\[|\](?!\S)", " ", text)  # [--metric loss]: optional, checked as given
    text = re.sub(r"(?<=[\w.])\|(?=[\w.-])", "\x00", text)  # yes|no is a choice, not a pipe
    return re.sub(r"(?<=\s)\d+(?=>)", "", text)  # 2>&1: the descriptor, not an argument


def tokens(text: str) -> list[list[str]]:
    """``text`` split the shell's way into the simple commands of its pipes and lists."""
    lex = shlex.shlex(normalise(text), posix=True, punctuation_chars=True)
    lex.whitespace_split, lex.commenters = True, ""
    try:
        words = list(lex)
    except ValueError:  # an unclosed quote in a sentence-like span: no command to check
        return []
    out: list[list[str]] = [[]]
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w == "()":
            out[-1][-1:] = []  # NAME() { ... }: a function's name, not a command
            out.append([])
        elif w and set(w) <= set("|&;()"):
            out.append([])
        elif w and set(w) <= set("<>&"):
            skip = True  # a redirection and its target
        else:
            out[-1].append(w.replace("\x00", "|"))
    return [seg for seg in out if seg]


def is_head(word: str, aliases: set[str]) -> bool:
    """Whether ``word`` runs revbench or python (whose ``-m`` then says what)."""
    return word in ("revbench", *aliases) or word.endswith("/bin/revbench") or bool(PYTHON.fullmatch(word))


def command(words: list[str], aliases: set[str]) -> tuple[str, list[str]] | None:
    """The command a simple command runs (``revbench`` or a ``python -m`` module) and its arguments."""
    i = 0
    while i < len(words):
        w = words[i]
        if ENV.fullmatch(w):
            i += 1
        elif w.rsplit("/", 1)[-1] in WRAPPERS:  # /usr/bin/time too
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 2 if words[i] in WRAPPERS[w.rsplit("/", 1)[-1]] else 1
        elif w in ("sh", "bash") and words[i + 1:i + 2] == ["-c"] and len(words) > i + 2:
            inner = [command(seg, aliases) for seg in tokens(words[i + 2])]
            return next((c for c in inner if c), None)
        elif w in ("docker", "docker-compose"):
            j = i + 1 + (w == "docker" and words[i + 1:i + 2] == ["compose"])
            if words[j:j + 1] not in (["run"], ["exec"]):
                return None
            j += 1
            while j < len(words) and words[j].startswith("-"):
                j += 2 if words[j] in DOCKER_VALUE_FLAGS else 1
            i = j + 1  # past the service
        else:
            break
    rest = words[i:]
    if not rest:
        return None
    if not is_head(rest[0], aliases):
        # a wrapper not known above (sudo nsenter ... /opt/revbench/venv/bin/revbench doctor): only an
        # installed revbench's path is taken anywhere, `revbench` alone is also a user and a folder
        at = next((k for k, w in enumerate(rest) if w.endswith("/bin/revbench")), None)
        return None if at is None else ("revbench", rest[at + 1:])
    if not PYTHON.fullmatch(rest[0]):
        return "revbench", rest[1:]
    if "-m" in rest[1:-1]:
        k = rest.index("-m", 1)
        return rest[k + 1], rest[k + 2:]
    return None


def doc_commands(root: Path = ROOT, texts: dict[Path, str] | None = None) -> list[DocCommand]:
    """Every command of the pages under ``root`` (or of ``texts``, pages given with their text)."""
    found = []
    for path in (list(texts) if texts else pages(root)):
        aliases = ALIASES.get(path.relative_to(root).as_posix(), set())
        for s in snippets(path, texts[path] if texts else None, root):
            for seg in tokens(s.text):
                c = command(seg, aliases)
                if c is None or not (c[0] == "revbench" or c[0].startswith(("benchmarks.", "revbench."))):
                    continue
                head = next((w for w in seg if not ENV.fullmatch(w)), "")
                if s.fragment and (not is_head(head, aliases) or c == ("revbench", [])):
                    continue  # a span is a command only when it starts with one; `revbench` alone is its name
                if any("$@" in a for a in c[1]):
                    continue  # a wrapper forwarding its arguments
                found.append(DocCommand(s.where, " ".join(seg), c[0], tuple(c[1]), s.fragment))
    return found


def placeholder(value: str) -> bool:
    """Whether ``value`` stands for a value the reader chooses."""
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]*", value)) or PLACEHOLDER in value or "..." in value or "…" in value


def sample(param: Any, value: str) -> str:
    """``value`` as the docs mean it for ``param``: a choice's first, a placeholder a number accepts."""
    value = value.split("|")[0] if "|" in value else value
    kind = param.type_descriptor.annotation
    numeric = kind in (int, float) or getattr(kind, "__args__", ()) in ((int,), (float,))
    return "1" if numeric and placeholder(value) else value


def fill(cmd: Any, args: list[str], fragment: bool) -> list[str]:
    """``args`` with each option's placeholder value mapped by :func:`sample`; a group's stop at its
    sub-command, whose own options are filled when it is reached. A fragment may end in an option's
    name alone (`revbench demo --world` names the option): it gets a placeholder value."""
    by_name = {o: p for p in cmd.params if p.param_type_name == "option" for o in [*p.opts, *p.secondary_opts]}
    out: list[str] = []
    it = iter(args)
    for a in it:
        name, eq, value = a.partition("=")
        param = by_name.get(name)
        if param is None or param.is_flag:
            out.append(a)
            if hasattr(cmd, "commands") and not a.startswith("-"):
                out.extend(it)
        elif eq:
            out.append(f"{name}={sample(param, value)}")
        else:
            out.append(a)
            value = next(it, PLACEHOLDER if fragment else None)
            if value is not None:
                out.append(sample(param, value))
    return out


@cache
def root_group() -> Any:
    """The click group of the whole command line, as ``revbench.app.cli.command_line`` builds it."""
    from revbench.app.cli import app

    return typer.main.get_group(app)


def check_cli(args: tuple[str, ...], fragment: bool) -> str | None:
    """Why the command line would refuse ``revbench ARGS`` before running it, or None."""
    # --evaluate/--no-evaluate in a synopsis: either flag, so both names are checked
    words = [w for a in args for w in (a.split("/") if re.fullmatch(r"--[\w-]+(/--[\w-]+)+", a) else [a])]
    words = [a for a in words if a not in GLOBAL_FLAGS and a not in ("...", "…")]
    helped = "--help" in words
    words = [a for a in words if a != "--help"]
    cmd, ctx, name = root_group(), None, "revbench"
    try:
        while True:
            words = fill(cmd, words, fragment)
            group = hasattr(cmd, "commands")
            if group and not words:
                return None  # a group alone: its help, or its own run (`revbench release`)
            ctx = cmd.make_context(name, words, parent=ctx, resilient_parsing=False)
            if not group:
                return None
            # what the group leaves to its sub-command: typer's group keeps its name apart, as click's does
            rest = [*ctx._protected_args, *ctx.args]
            if not rest:
                return None
            name, sub, words = cmd.resolve_command(ctx, rest)
            cmd = sub
    except (MissingParameter, NoArgsIsHelpError) as exc:
        if fragment or helped:
            return None  # a fragment names the flags it is about; --help needs none
        return f"{exc.ctx.command_path if exc.ctx else 'revbench'}: {exc.format_message()}"
    except typer.TyperException as exc:
        where = getattr(exc, "ctx", None)
        return f"{where.command_path if where else 'revbench'}: {exc.format_message()}"  # type: ignore[attr-defined]


def module_file(module: str, root: Path = ROOT) -> Path | None:
    """The file ``python -m MODULE`` runs, or None when the repository has none."""
    base = root.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__main__.py") if p.is_file()), None)


def argparse_flags(path: Path) -> set[str]:
    """Every flag the ``add_argument`` calls in ``path`` declare (read, not imported: some benchmarks
    import torch or start servers at the top)."""
    flags = {"-h", "--help"}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")}
    return flags


def check_module(module: str, args: tuple[str, ...], root: Path = ROOT) -> str | None:
    """Why ``python -m MODULE ARGS`` names no module of the repository or a flag it lacks, or None."""
    if placeholder(module):
        return None  # benchmarks.<module>
    path = module_file(module, root)
    if path is None:
        return f"no module {module} in the repository"
    flags = argparse_flags(path)
    unknown = [a for a in args if a.startswith("-") and not re.fullmatch(r"-[\d.]+", a) and a.split("=")[0] not in flags]
    return f"{path.relative_to(root)} has no flag {', '.join(unknown)}" if unknown else None


def failures(found: list[DocCommand], root: Path = ROOT) -> list[str]:
    """One line per command the command line or its module would refuse, naming the file and line."""
    out = []
    for c in found:
        why = check_cli(c.args, c.fragment) if c.module == "revbench" else check_module(c.module, c.args, root)
        if why:
            out.append(f"{c.where}: `{c.line}`: {why}")
    return out


def test_parsing_calls_nothing() -> None:
    """make_context runs a parameter's callback: none may exist for the check above to stay a parse
    (--help's, added per context, is never given; see check_cli)."""
    def params(cmd: Any) -> Iterator[Any]:
        yield from cmd.params
        for sub in getattr(cmd, "commands", {}).values():
            yield from params(sub)

    assert [p.name for p in params(root_group()) if p.callback is not None or p.is_eager] == []


def test_every_command_in_the_docs_parses() -> None:
    found = doc_commands()
    # A collector gone blind would pass every page: the pages hold far more than this many.
    assert sum(c.module == "revbench" for c in found) > 150
    assert sum(c.module.startswith("benchmarks.") for c in found) > 30
    assert failures(found) == []


def test_a_wrong_command_is_reported_with_its_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "x_bench.py").write_text('import argparse\np = argparse.ArgumentParser()\n'
                                                       'p.add_argument("--papers", type=int)\n')
    page = tmp_path / "page.md"
    text = ("Run `revbench evaluate --no-such-flag` or `revbench evaluate -s tpms`.\n\n"
            "```bash\n"
            "revbench evaluate -b warehouse -s tpms --no-such-flag\n"
            "revbench no-such-command --seed 3\n"
            "REVBENCH_X=1 revbench demo --seed N --papers 300 2>&1 | tee log   # fine: N is a placeholder\n"
            "revbench demo --seed seven\n"
            "revbench labels --experts 3\n"
            "revbench survey sned --round 1; revbench status now\n"
            "revbench release verify data/releases/v1 && revbench release --version v1 --approve yes|no\n"
            ".venv/bin/python -m benchmarks.x_bench --papers 10 \\\n"
            "    --no-such-flag\n"
            "python -m benchmarks.gone --papers 10\n"
            "```\n")
    found = doc_commands(tmp_path, {page: text})
    assert failures(found, tmp_path) == [
        "page.md:1: `revbench evaluate --no-such-flag`: revbench evaluate: No such option: --no-such-flag",
        "page.md:4: `revbench evaluate -b warehouse -s tpms --no-such-flag`: revbench evaluate: No such option: "
        "--no-such-flag",
        "page.md:5: `revbench no-such-command --seed 3`: revbench: No such command 'no-such-command'.",
        "page.md:7: `revbench demo --seed seven`: revbench demo: Invalid value for '--seed': "
        "Input should be a valid integer, unable to parse string as an integer",
        "page.md:8: `revbench labels --experts 3`: revbench labels: Missing option '--from'.",
        "page.md:9: `revbench survey sned --round 1`: revbench survey: No such command 'sned'. Did you mean 'send'?",
        "page.md:9: `revbench status now`: revbench status: Got unexpected extra argument(s) (now)",
        "page.md:11: `.venv/bin/python -m benchmarks.x_bench --papers 10 --no-such-flag`: "
        "benchmarks/x_bench.py has no flag --no-such-flag",
        "page.md:13: `python -m benchmarks.gone --papers 10`: no module benchmarks.gone in the repository",
    ]


def test_the_collector_reads_blocks_spans_and_comments_as_the_pages_use_them(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    text = ("- a list item\n\n    revbench in a list is prose, `revbench status --json` a span\n\n"
            "Some prose.\n\n    revbench doctor --only smtp\n\n"
            "```text\nor decide on the command line: revbench ratings --decide keep|drop --curator NAME\n```\n"
            "```python\nrun('revbench evaluate')\n```\n"
            "```bash\nmake bench   # .venv/bin/python -m benchmarks.cli_bench [--repeat 3]\n"
            "rb() { docker compose run --rm --no-deps worker revbench \"$@\"; }\n"
            "docker compose run --rm -e X=1 worker revbench doctor --only survey\n"
            "sudo -u revbench sh -c 'cd /var/lib/revbench && revbench backup --to DIR/<UTC time>'\n```\n")
    lines = [(c.where, c.module, c.args, c.fragment) for c in doc_commands(tmp_path, {page: text})]
    assert lines == [
        ("page.md:3", "revbench", ("status", "--json"), True),
        ("page.md:7", "revbench", ("doctor", "--only", "smtp"), False),
        ("page.md:10", "revbench", ("ratings", "--decide", "keep|drop", "--curator", "NAME"), True),
        ("page.md:16", "benchmarks.cli_bench", ("--repeat", "3"), True),
        ("page.md:18", "revbench", ("doctor", "--only", "survey"), False),
        ("page.md:19", "revbench", ("backup", "--to", f"DIR/{PLACEHOLDER}"), False),
    ]


@pytest.mark.parametrize("args", [("evaluate", "--help"), ("--help",), ("survey",), ("release",), ("survey", "send", "--help")])
def test_help_and_a_bare_group_parse_without_running(args: tuple[str, ...]) -> None:
    assert check_cli(args, fragment=False) is None


def test_the_benchmarks_readme_names_each_modules_real_flags() -> None:
    """The table's last column lists each module's flags: each must be one its argparse declares."""
    wrong, checked = [], 0
    for line in (ROOT / "benchmarks" / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(\w+)`", cells[0]) if len(cells) > 2 else None
        if m and (path := module_file(f"benchmarks.{m.group(1)}")):
            flags = {s.split()[0] for s in re.findall(r"`(--[^`]+)`", cells[-1])}
            wrong += [f"{m.group(1)}: {f}" for f in sorted(flags - argparse_flags(path))]
            checked += len(flags)
    assert checked > 40 and wrong == []
