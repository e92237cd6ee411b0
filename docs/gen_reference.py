"""The CLI, settings and stages reference pages, generated from the code at every docs build.

An mkdocs hook (``hooks:`` in mkdocs.yml): ``on_files`` adds ``reference/cli.md``,
``reference/settings.md``, ``reference/stages.md`` and ``models.md`` as generated pages, so they are never
committed and cannot drift from the command line, the settings tree or the stage table.
``python docs/gen_reference.py cli|settings|stages`` prints one.

The CLI page walks the typer app's click command (usage, help, and each option as ``--help``
shows it); the settings page reads ``render_env_example()``, the same walk of the settings tree
that writes ``.env.example``.
"""

from __future__ import annotations

import html
import re
import sys
from typing import Any

INTRO_CLI = """# Command line

Every command and option of `revbench`, generated from the code at each docs build.
`python -m revbench` is the same command line; `revbench COMMAND --help` prints the same text.
Every command also takes `--debug` (tracebacks with errors). Exit codes are listed in
[When things go wrong](../troubleshooting.md).
"""

INTRO_SETTINGS = """# Settings

Every setting, generated at each docs build from the settings tree (`revbench/settings.py`),
the same walk that writes `.env.example` (`revbench env-example` prints it).

A setting is an environment variable `REVBENCH_<SECTION>__<NAME>` (a double underscore between
section and name), read from the environment or from `.env` in the working directory; the
environment wins. A list setting is a JSON list (`REVBENCH_ARXIV__CATEGORIES='["cs.AI", "cs.CL"]'`).
An unknown `REVBENCH_` name is an error naming the closest real one, and a value of the wrong type
or range names its variable; see [When things go wrong](../troubleshooting.md). A demo's data
directory carries the demo's own settings (`data/.demo-settings.json`); a variable you set wins
over them.
"""


def text(s: str) -> str:
    """Help text as markdown: code spans kept as they are; outside them HTML, emphasis characters
    and pipes are escaped, so the text reads as written and a table cell stays one cell (a table
    already ignores a pipe inside a code span)."""
    parts = s.replace("``", "`").split("`")  # docstrings write code the reStructuredText way
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([*_|\[\]])", r"\\\1", html.escape(parts[i], quote=False))
    return "`".join(parts)


def command_pages() -> str:
    """Markdown for every command of ``revbench.app.cli.app``, depth first, in the app's order."""
    import typer.main

    from revbench.app.cli import app

    root = typer.main.get_command(app)
    out = [INTRO_CLI]

    def walk(cmd: Any, ctx: Any) -> None:
        if getattr(cmd, "hidden", False):
            return
        path = ctx.command_path
        out.append(f"\n## `{path}`\n")
        if cmd.help:
            out.extend(text(p.strip()) + "\n" for p in cmd.help.replace("\b", "").split("\n\n") if p.strip())
        out.append(f"```text\n{cmd.get_usage(ctx)}\n```\n")
        rows = [p.get_help_record(ctx) for p in cmd.get_params(ctx)]
        rows = [r for r in rows if r and not r[0].startswith("--help")]
        if rows:
            out.append("| option | meaning |\n|---|---|")
            out.extend(f"| `{name}` | {text(help_ or '')} |" for name, help_ in rows)
        subs = getattr(cmd, "commands", {})
        if subs:
            out.append("\n" + "".join(f"- [`{path} {n}`](#{anchor(f'{path} {n}')})\n" for n in sorted(subs)))
            for n, sub in subs.items():
                walk(sub, sub.context_class(sub, info_name=n, parent=ctx))

    walk(root, root.context_class(root, info_name="revbench"))
    return "\n".join(out)


def anchor(title: str) -> str:
    """The id mkdocs' table of contents gives a heading ``title``."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())


def settings_page() -> str:
    """Markdown tables of every setting, one per section, from ``render_env_example()``."""
    from revbench.settings import Settings, render_env_example

    out = [INTRO_SETTINGS, "\n## general\n", "| variable | default | meaning |\n|---|---|---|"]
    comment = ""
    for line in render_env_example().splitlines()[1:]:
        section = re.match(r"# \[(\w+)\] ?(.*)", line)
        if section:
            name, first = section.groups()
            field = Settings.model_fields.get(name)
            doc = " ".join((field.annotation.__doc__ or first).split()) if field is not None else first
            out += [f"\n## {name}\n", text(doc) + "\n", "| variable | default | meaning |\n|---|---|---|"]
        elif line.startswith("# "):
            comment = line[2:]
        elif "=" in line:
            var, value = line.split("=", 1)
            out.append(f"| `{var}` | {f'`{value}`' if value else '(none)'} | {text(comment)} |")
    return "\n".join(out) + "\n"


INTRO_STAGES = """# Stages

The stages of `revbench refresh`, in the order it runs them, generated at each docs build from the
stage table (`STAGES` in `revbench/stages.py`). `REVBENCH_REFRESH__STAGES` and `--stages` take
these names. Before a stage runs, its plan reads what it watches and says why it runs or why not
([The refresh](../stages/refresh.md)); the refresh then calls its flow with the plan's arguments
and those below. To add a stage: [Add a stage](../extending/stage.md).
"""


def stages_page() -> str:
    """Markdown table of the refresh's stages, one row per entry of ``revbench.stages.STAGES``."""
    from revbench.stages import STAGES

    out = [INTRO_STAGES, "| stage | run alone | flow | plan | watches | the refresh passes |", "|---|---|---|---|---|---|"]
    for s in STAGES:
        passes = [f"`{k}={v!r}`" for k, v in s.flow_args.items()] + (["`synthetic` (its plan gets the window)"] if s.window else [])
        watches = ", ".join(f"`{i}`" if " " not in i else i for i in s.inputs)
        out.append(f"| {s.name} | `{s.command}` | `{s.flow}` | `{s.planner}` | {watches} | {', '.join(passes)} |")
    return "\n".join(out) + "\n"


INTRO_MODELS = """# Models and recipes

A model name in a scorer (`embedding:model=NAME`, `rate:model=NAME`, `cof:semantic=embedding;model=NAME`)
or a setting (`REVBENCH_POOLS__MODEL`, `REVBENCH_EMBED__MODELS`) may be a **recipe**: the published
encoder used exactly as its authors use it. This page is generated from `revbench/ml/recipes.py`
at each docs build; `revbench models` prints the same table with whether each model's files are
on this machine.

A plain Hugging Face name is not a recipe. `embedding:model=allenai/specter2` loads the
repository with sentence-transformers' defaults: mean pooling over the tokens, no adapter, the
text revbench joins with a space. The numbers look plausible, but they do not come from the
published model. Write `embedding:model=specter2`.

## The recipes

| name | weights | published architecture | pooling | input | tokens | vectors | source |
|---|---|---|---|---|---|---|---|
"""

MODELS_AFTER = """
*CLS* is the last hidden state of the first token. *title + [SEP] + abstract* joins the title,
the tokenizer's separator token and the abstract with nothing between them, as SPECTER was trained
(an absent abstract is empty). The separator is checked against the tokenizer when the model
loads, so a folder holding another model's files fails in one line. Texts longer than the limit
are cut by the tokenizer.

## Where the weights come from

Nothing is downloaded. Every run is offline. A recipe looks in two places:

1. `<cache dir>/models/<org>__<name>/` (for example `data/cache/models/allenai__specter/`), a folder
   as `save_pretrained` writes it: `config.json`, `model.safetensors` or `pytorch_model.bin`, and
   `tokenizer.json` or `vocab.txt` (an adapter's folder: `adapter_config.json` and `pytorch_adapter.bin`);
2. the Hugging Face cache (`HF_HOME`, or `HF_HUB_CACHE`), as `hf download allenai/specter`
   leaves it on a machine with a network.

When neither place has them, `revbench evaluate` stops before any scorer runs (and before torch
loads), with exit status 2. Its one line names the recipe, the folders it looked in, and these
two ways to provide the files; an ensemble (`specter2+scincl`) names every missing model in that
one line. Any other Hugging Face name is looked for in the Hugging Face cache alone: revbench
sets `HF_HUB_OFFLINE=1` unless you set it, so a name not cached stops the run the same way
(`HF_HUB_OFFLINE=0` lets sentence-transformers download it where there is a network).

## The files are checked: a recipe is the published model

What is found in either place must be the published model. Each recipe states the architecture
of its repository's published `config.json` (the column above: `model_type`, `hidden_size`,
`num_hidden_layers`, `vocab_size`) and, for SPECTER2, what the `adapters` library writes at the
top of the adapter's `adapter_config.json` (the base's `model_type` and `hidden_size`; the
adapter's bottleneck configuration is checked field by field when it loads, below). A folder
that states otherwise is refused when the scorer is built, before any scorer runs, and equally
by `revbench embed`, the pools and every other stage that encodes. The one line names the
recipe, the folder and each field that differs:

```
model specter2: the files found for it are not allenai/specter2_base's published model (bert, 768 wide,
12 layers, vocabulary 31090): data/cache/models/allenai__specter2_base: hidden_size 32 != 768,
num_hidden_layers 2 != 12, vocab_size 30522 != 31090; ...
```

Other weights are welcome by their path: `embedding:model=data/cache/models/allenai__specter2_base`
loads the folder as a plain sentence-transformers model (mean pooling, no adapter, revbench's
own text), and every result calls it by that path and its digest, never by a recipe's name.

## The digest: a model is its files

A model name is resolved once, where a run starts, into a `ModelRef` (`revbench/ml/models.py`):
the recipe, the folders its files were found in (weights, adapter), the runtime, the precision,
and a sha256 over the files that make the vectors: the weights, the adapter, the tokenizer and
the configuration (`config.json`, sentence-transformers' own, and the modules `modules.json`
lists; a model card or an ONNX copy beside them is no part of it). The hashing encoder's digest
is of its parameters and scikit-learn's version; the packaged MiniLM is digested like any folder;
a Hugging Face name by the snapshot in the Hugging Face cache. A file is read once per stamp
(size, times, inode), so asking again costs a few `stat` calls.

The digest is part of everything made with the model:

- the vectors' cache key, `embeddings/<name>@<12 hex>/[<runtime>-]<precision>-<limit>/`
  (`embeddings/specter2@0123456789ab/float32-512`), the embed flow's export folder under
  `vectors/`, and the ONNX export under `onnx/`: changing one byte of a weight file, replacing
  an adapter or editing `config.json` gives new vectors, never the old ones under the old name;
- the model a process keeps loaded, which is loaded again when the files changed;
- the spec stored with every result row of the `embedding` scorer, `model_digest=<12 hex>`
  (`A+B` for an ensemble);
- the embed flow's `manifest.json` (`model_digest`, `model_weights`, `model_adapter`, `recipe`,
  `stand_in`); an export whose digest is not the model's is not loaded.

## Stand-ins

The tests place tiny random models where the recipes look (below). They are declared:
`REVBENCH_EMBED__STAND_INS=true` accepts a folder whose architecture differs from the
published one as a stand-in, and every result made with one says so: the spec ends in
`stand_in=true` and the export's manifest has `"stand_in": true`. The setting is off by
default, and nothing but a test should turn it on.

## SPECTER2's adapter

SPECTER2's proximity adapter is published in the file format of the `adapters` library
(AdapterHub): `adapter_config.json` and `pytorch_adapter.bin`. The model card loads it with that
library. Every release of `adapters` pins transformers 4.x and cannot be imported beside the
transformers revbench installs. Upstream support for transformers 5 was still an open request
(adapter-hub/adapters#834) when this recipe was written.

So revbench computes the adapter itself, in `revbench/ml/bottleneck.py`: the Pfeiffer bottleneck
after each layer's feed-forward block, read from the library's own files. Any configuration
other than the one it computes is refused in one line that names the field, as is any other
weight layout.

The test fixture `tests/embed/fixtures/specter2-tiny` was made by the library itself, in an
environment pinned to its versions. It holds a stand-in base, an adapter saved under SPECTER2's
name `[PRX]`, and the vectors the library computes when it loads them as the model card does.
revbench's vectors from the same files match to within 1e-5; when the fixture was made they were
identical. OpenReview's production code currently loads the `specter2_aug2023refresh` base and
adapter, a later training of the same recipe.

## OpenReview's ensemble: `model=A+B`

`embedding:model=specter2+scincl` is OpenReview's production affinity (openreview-expertise,
`expertise/models/specter2_scincl/ensemble.py`). For each of the two models:

1. compute the cosine of every submission with every profile paper of the benchmark, giving a
   matrix;
2. rescale that whole matrix to [0, 1] with its own minimum and maximum;
3. take, for each reviewer, the maximum over their papers.

The two scores are then merged as `merge_alpha * A + (1 - merge_alpha) * B`
(`merge_alpha=0.5` by default), clamped to [0, 1] and rounded to 4 places. This runs in single
precision, as the reference's tensors are.

An ensemble takes exactly two models, and it pools by max: any other `pooling` is refused,
because the result would be a different method. The min-max rescaling depends on every
submission and profile paper in the benchmark, so the same pair can score differently in
another benchmark. The reference has the same property.

A test computes the reference's merge with torch from the same vectors
(`tests/embed/test_recipes.py`). On 150 pairs every score is equal to the last of its 4 places.
The two codes sum single-precision products in different orders, so a score that sits exactly
on a rounding boundary could in principle differ by 0.0001. The test allows that and no more.

## Tests without the weights

The tests build tiny stand-ins themselves: random two-layer BERT weights over the packaged
MiniLM's vocabulary (`tests/support/models.py`). They place them where the recipes look: the
models folder, or a Hugging Face cache layout, and declare them (`REVBENCH_EMBED__STAND_INS`).
Each test then checks a recipe's vectors against the recipe written out with `transformers`
alone: the tokenizer at 512 tokens, the first token's hidden state, L2 normalisation.
`tests/embed/test_model_identity.py` checks the rest of this page: a changed weight, adapter or
configuration is new vectors and a new digest, a random BERT where a recipe looks is refused in
one line and runs by its path, and a stand-in's results say so.
"""


def models_page() -> str:
    """The recipe table of ``revbench.ml.recipes.RECIPES``, with the page's prose around it."""
    from revbench.ml.recipes import RECIPES

    out = [INTRO_MODELS.rstrip("\n")]
    for r in RECIPES.values():
        weights = f"`{r.repo}`" + (f" + adapter `{r.adapter}` (as `{r.adapter_name}`)" if r.adapter else "")
        pooling = "CLS" if r.pooling == "cls" else r.pooling
        out.append(f"| `{r.name}` | {weights} | {r.published} | {pooling} | {text(r.input)} | {r.max_tokens} | {r.normalise} "
                   f"| {text(r.source)} |")
    return "\n".join(out) + "\n" + MODELS_AFTER


INTRO_SCORERS = """# Scorers

Every registered scorer (`revbench evaluate -s NAME:key=value,...`), generated at each docs build
from the scorer registry (`revbench/evaluation/scorers/`): what it computes, its parameters, and
how it fares when it is judged by the assignment it yields (`--assignment`) and attacked by a
colluding author and reviewer (`--attack`), from `benchmarks/results/judged.json`
(`python -m benchmarks.judged_bench`: the calibrated SYNTHETIC world, pooled over its seeds).
What the two judgements measure is in [Benchmarks](../benchmarks.md#assignment-and-collusion).
"""


def _judged_lines(name: str, judged: dict[str, Any]) -> list[str]:
    """The judged numbers of every spec of scorer ``name`` in ``judged.json``'s summary."""
    summary = judged.get("summary", {})
    out = []
    for spec, a in summary.get("assignment", {}).get("candidates", {}).items():
        if spec.split(":")[0] != name or a.get("assigned_rating") is None:
            continue
        diff = a.get("diff_rating")
        vs = (f", {diff['value']:+.2f} [{diff['lo']:+.2f}, {diff['hi']:+.2f}] against {judged.get('baseline')}"
              if diff else "")
        out.append(f"- `{spec}`: assigned reviewers' mean rating {a['assigned_rating']:.2f} over the rated candidates{vs}; "
                   f"papers with an expert {100 * a['papers_with_expert']:.0f}%.")
        one = summary.get("attack", {}).get("1", {}).get(spec)
        if one:
            cells = ", ".join(f"{100 * c['success_at_k']:.0f}% from rank {st}" for st, c in sorted(one.items(), key=lambda x: int(x[0])))
            out.append(f"  The collusion attack (one kept paper) reaches the top k: {cells}.")
    why = summary.get("immune", {}).get(name)
    if why:
        out.append(f"- Immune to the collusion attack by construction: {why}.")
    return out


def scorers_page() -> str:
    """Each registered scorer: its docstring, its parameters with their defaults, its judged numbers."""
    import importlib
    import inspect
    import json
    from pathlib import Path

    from revbench.evaluation.scorers.base import REGISTRY, SCORER_MODULES

    for module in sorted(set(SCORER_MODULES.values())):
        importlib.import_module(module)
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "judged.json"
    judged = json.loads(path.read_text()) if path.exists() else {}
    out = [INTRO_SCORERS.rstrip("\n")]
    for name in sorted(SCORER_MODULES):
        cls = REGISTRY[name]
        doc = cls.__dict__.get("__doc__") or sys.modules[cls.__module__].__doc__ or ""
        out += ["", f"## `{name}`", "", inspect.cleandoc(doc).strip() or "(no description)", ""]
        fields = cls.params_model.model_fields
        if fields:
            out += ["| parameter | default |", "|---|---|"]
            out += [f"| `{k}` | `{f.default!r}` |" for k, f in fields.items()]
        lines = _judged_lines(name, judged)
        if lines:
            out += ["", "Judged on the calibrated SYNTHETIC world:", "", *lines]
    return "\n".join(out) + "\n"


PAGES = {"reference/cli.md": command_pages, "reference/settings.md": settings_page, "reference/stages.md": stages_page,
         "models.md": models_page, "reference/scorers.md": scorers_page}


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated reference pages to the site's files."""
    from mkdocs.structure.files import File

    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    return files


if __name__ == "__main__":
    print(PAGES["models.md" if sys.argv[1] == "models" else f"reference/{sys.argv[1]}.md"]())
