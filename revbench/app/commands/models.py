"""The models' commands: ``embed`` (a benchmark's texts through each model), ``train`` (a model
trained by one of the training objectives) and ``models`` (the encoders' published recipes and
whether their weights are here), with what each prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table as RichTable

from revbench import objectives
from revbench.app.cli_common import Track, setup
from revbench.app.console import console
from revbench.app.entry import build_settings, resolve_track
from revbench.errors import UsageError

if TYPE_CHECKING:  # the flows load only when a command runs one
    from revbench.flows.embed import EmbedResult
    from revbench.flows.train import Trained, TrainSkipped
    from revbench.flows.train_attention import AttentionTrained
    from revbench.flows.train_contrastive import AugmentTrained


def embed(
    benchmark: Annotated[list[str], typer.Option("--benchmark", "-b", help="NAME=PATH as for evaluate (warehouse alone: this warehouse)")],
    model: Annotated[list[str], typer.Option("--model", "-m", help="Model name or path, adapter folder, or hashing (default: REVBENCH_EMBED__MODELS)")] = [],  # noqa: B006
    track: Track = None,
) -> None:
    """Embed a benchmark's texts with each model (GPU when present), cached and exported with a manifest."""
    settings = setup()
    from revbench.flows.embed import embed_flow

    out = embed_flow.run(settings, benchmarks=benchmark, models=model or None, track=resolve_track(track, long_flow=False))
    print_embed(out)


def train(
    name: Annotated[str | None, typer.Option(help="Model folder under DATA_DIR/models/ (default: the objective's name)")] = None,
    objective: Annotated[str, typer.Option(help=objectives.help_text())] = objectives.OBJECTIVE_NAMES[0],
    base_model: Annotated[str | None, typer.Option(help="Model to adapt or whose vectors to attend over (default: REVBENCH_TRAIN__BASE_MODEL)")] = None,
    max_steps: Annotated[int | None, typer.Option(min=0, help="Stop after this many steps (0: all epochs)")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Train again over a model trained with other settings (the old folder is kept under models/.replaced/)")] = False,
    track: Track = None,
) -> None:
    """Train a model on the warehouse by one of the training objectives (--objective); resumes a killed run."""
    if objective not in objectives.OBJECTIVE_NAMES:
        raise UsageError(f"--objective {objective!r}: expected {objectives.choices()}")
    changes = {k: v for k, v in {"train.base_model": base_model, "train.max_steps": max_steps}.items() if v is not None}
    settings = setup(**changes)
    flow = objectives.objective(objective).runner()
    print_train(flow.run(settings, name=name or objective, replace=replace, track=resolve_track(track, long_flow=True)))


def models(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per recipe, for a machine to read")] = False,
) -> None:
    """The encoders by their published recipes (embedding:model=NAME), and whether their weights are here."""
    import json

    from revbench.ml.models import model_ref
    from revbench.ml.recipes import MODELS_SUBDIR, RECIPES, missing_line

    settings = build_settings()
    models_dir = settings.cache_dir / MODELS_SUBDIR
    rows = []
    for r in RECIPES.values():
        lacking = missing_line(r, models_dir)
        ref = model_ref(r.name, models_dir=models_dir) if lacking is None else None
        # files that are not the published model are not that recipe "here": say what they are
        mismatch = ref.refusal if ref is not None and ref.mismatch else None
        rows.append({"name": r.name, "weights": r.repo, "adapter": r.adapter, "pooling": r.pooling, "input": r.input,
                     "max_tokens": r.max_tokens, "normalise": r.normalise, "here": lacking is None and mismatch is None,
                     "missing": lacking, "mismatch": mismatch, "digest": ref.short if ref is not None else None,
                     "source": r.source})
    if as_json:
        for row in rows:
            console.print(json.dumps(row), markup=False, highlight=False, soft_wrap=True)
        return
    table = RichTable(title="Model recipes (embedding:model=NAME; two joined by + are OpenReview's ensemble)")
    for col in ("name", "weights", "pooling", "input", "tokens", "here"):
        table.add_column(col, overflow="fold")
    for row in rows:
        weights = row["weights"] + (f" + adapter {row['adapter']}" if row["adapter"] else "")
        table.add_row(row["name"], weights, str(row["pooling"]).upper() if row["pooling"] == "cls" else str(row["pooling"]),
                      str(row["input"]), str(row["max_tokens"]),
                      f"yes ({row['digest']})" if row["here"] else "other weights" if row["mismatch"] else "no")
    console.print(table)
    console.print(f"Weights are read from {models_dir}/<org>__<name> or the Hugging Face cache (HF_HOME); "
                  "nothing is downloaded. `revbench models --json` gives each recipe's source.", soft_wrap=True)


def print_embed(out: EmbedResult) -> None:
    """Texts per benchmark and model: encoded now, reused, and where the export is."""
    t = RichTable(title=f"Embeddings on {out.device}")
    for col in ("benchmark", "model", "texts", "encoded now", "reused", "export"):
        t.add_column(col, justify="right" if col in ("texts", "encoded now", "reused") else "left")
    for r in out.rows:
        t.add_row(r.benchmark, r.model, str(r.texts), str(r.encoded), str(r.reused), r.export)
    console.print(t)


def print_train(out: Trained | TrainSkipped | AttentionTrained | AugmentTrained) -> None:
    """What the training did and the scorer it registered."""
    if out.status == "skipped":
        console.print(f"Nothing to do: {out.reason}.\nScorer: [cyan]{out.scorer}[/]", soft_wrap=True)
        return
    resumed = f", resumed at step {out.resumed_from}" if out.resumed_from else ""
    if getattr(out, "resume_note", ""):  # a damaged checkpoint set aside: the curator should know
        console.print(out.resume_note, markup=False, highlight=False, soft_wrap=True)  # type: ignore[union-attr]
    objective = "attention" if hasattr(out, "temperature") else getattr(out, "objective", "rate")
    if objective != "rate":
        what = {"attention": f"Attention over reviewers' papers: {getattr(out, 'submissions', 0)} training papers "
                             f"({getattr(out, 'skipped_papers', 0)} left out)",
                "augment": f"Two views of each of {getattr(out, 'pairs', 0)} unrated papers",
                "factors": f"{getattr(out, 'pairs', 0)} factor pairs (citation, topic, semantic) among unrated papers"}
        tail = (f", learned temperature {out.temperature:.3f}" if objective == "attention"  # type: ignore[union-attr]
                else f", {out.pairs_per_second:.1f} rows/s")  # type: ignore[union-attr]
        console.print(f"{what[objective]}, {out.steps} steps{resumed}: loss {out.first_loss:.4f} -> "  # type: ignore[union-attr]
                      f"{out.last_loss:.4f}{tail}", soft_wrap=True)  # type: ignore[union-attr]
        console.print(f"Scorer: [cyan]{out.scorer}[/]", soft_wrap=True)
        return
    p = out.provenance  # type: ignore[union-attr]
    console.print(
        f"{p.triplets} triplets ({', '.join(f'{k} {v}' for k, v in sorted(p.by_view.items()))}) from "
        f"{p.papers} papers and {p.reviewers} keyword profiles; skipped anchors: "
        + (", ".join(f"{k} {v}" for k, v in sorted(p.skipped.items())) or "none"))
    console.print(f"{out.steps} steps{resumed}: loss {out.first_loss:.4f} -> {out.last_loss:.4f}, "  # type: ignore[union-attr]
                  f"{out.pairs_per_second:.1f} triplets/s")  # type: ignore[union-attr]
    console.print(f"Scorer: [cyan]{out.scorer}[/] (evaluate it with --scorer rate --scorer '{out.scorer}' --baseline rate)")
