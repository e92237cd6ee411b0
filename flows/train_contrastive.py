"""The contrastive LoRA training flows, on the corpus' unrated papers:

- ``revbench train --objective augment``: two views of each paper (:mod:`revbench.ml.augment`);
- ``revbench train --objective factors``: UniPR's factor pairs (citation, topic, semantic), the
  query side after its factor's instruction (:mod:`revbench.tasks.factor_pairs`).

Each gives an adapter that scores as ``embedding:model=PATH`` (with ``instruction=FACTOR`` for
the factors' encoder, which ``cof:encoder=PATH`` uses for every factor). Everything lands in
``data/models/<name>/``: the training rows (``papers.parquet`` or ``pairs.parquet``: no query
paper, so no rated one), ``provenance.json``, ``checkpoints/`` and ``adapter/`` (the LoRA weights
with ``revbench_model.json``, written last). A second run with the same settings does nothing; a
killed run resumes from its newest checkpoint. Each one's rows file, loss and deciding settings
are its entry in :data:`revbench.objectives.OBJECTIVES`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

from revbench.errors import InputError, UsageError
from revbench.flows.common import Run, flow_run, publish_markdown, publish_table, revbench_flow, stage, stage_task
from revbench.flows.model_folders import (
    check_name, held_out_digest, plot_losses, prepare_folder, read_rows, train_config, write_json,
)
from revbench.flows.results import FlowResult
from revbench.ml.embeddings import check_model
from revbench.ml.training import ADAPTER_DIR, TrainResult, train
from revbench.objectives import objective as objective_entry
from revbench.objectives import settings_digest, settings_of
from revbench.settings import Settings
from revbench.tasks.augment_data import augment_papers
from revbench.warehouse import Warehouse, utcnow


@dataclass(frozen=True, kw_only=True)
class AugmentTrained(TrainResult, FlowResult):
    """A contrastive adapter (``objective`` augment or factors) trained, or found trained with these
    settings (``status`` skipped, with the ``reason``); its fields are
    :class:`revbench.ml.training.TrainResult`'s."""

    status: Literal["trained", "skipped"] = "trained"
    objective: str = "augment"
    scorer: str
    papers_trained: int = 0
    reason: str = ""


@stage_task("augment-papers")
def papers_stage(run: Run, out: Path) -> int:
    """The training papers (``tasks.augment_data.augment_papers``: the corpus less every query paper
    and every paper without a title or abstract, at most TRAIN__ANCHORS of them, seeded), written to
    ``out/papers.parquet``."""
    with stage(run, "augment-papers") as st:
        t = st.settings.train
        with Warehouse.open(st.settings.warehouse_path, read_only=True,
                            lock_wait=st.settings.warehouse.lock_wait_seconds) as wh:
            frames = wh.labels.weak_label_frames()
        got = augment_papers(frames["papers"], frames["queries"], t.anchors, t.seed)
        out.mkdir(parents=True, exist_ok=True)
        got.chosen.write_parquet(out / "papers.parquet")
        st.result.rows_in, st.result.rows_out = frames["papers"].height, got.chosen.height
        st.result.rejected = got.empty
        st.result.notes = {"query_papers_left_out": frames["queries"].height, "empty_left_out": got.empty}
        return got.chosen.height


@stage_task("contrastive-training")
def fit_stage(run: Run, out: Path, objective: str) -> TrainResult:
    """LoRA training on the written rows with the objective's loss, resumable from ``out/checkpoints``."""
    entry = objective_entry(objective)
    rows_file, loss_fn = entry.rows, entry.loss_fn()
    with stage(run, f"{objective}-training") as st:
        papers = read_rows(out / rows_file)
        cfg = train_config(st.settings.train)
        total = cfg.total_steps(papers.height)
        with st.progress(total, f"train {total} steps on {papers.height} {objective} rows") as bar:
            result = train(papers, out, cfg, card={"objective": objective, "revbench_run": run.run_id},
                           progress=lambda step, _t, _l: bar.advance(step - bar.done), loss_fn=loss_fn)
        plot_losses(result.losses, out / ADAPTER_DIR / "loss.png")
        st.result.rows_in, st.result.rows_out = papers.height, result.steps - result.resumed_from
        st.result.notes = {"steps": result.steps, "resumed_from": result.resumed_from}
        if result.resume_note:  # a damaged checkpoint set aside before resuming, and why
            st.result.notes["resume_note"] = result.resume_note
        return result


@stage_task("factor-pairs")
def pairs_stage(run: Run, out: Path) -> dict[str, int]:
    """UniPR's factor pairs among unrated papers, at most TRAIN__ANCHORS / 3 per factor (seeded),
    written to ``out/pairs.parquet``."""
    from revbench.tasks import factor_pairs

    with stage(run, "factor-pairs") as st:
        t = st.settings.train
        with Warehouse.open(st.settings.warehouse_path, read_only=True,
                            lock_wait=st.settings.warehouse.lock_wait_seconds) as wh:
            frames, topics = wh.labels.weak_label_frames(), wh.labels.topic_frame()
        pairs = factor_pairs.factor_pairs(frames, topics, max(1, t.anchors // 3), t.seed)
        by_factor = factor_pairs.counts(pairs)
        if pairs.height < 2:
            raise InputError(f"{pairs.height} factor pair(s) among the unrated papers ({by_factor}): run `revbench graph` "
                             "for citations and topics, or ingest more papers")
        out.mkdir(parents=True, exist_ok=True)
        factor_pairs.with_texts(pairs, frames["papers"]).write_parquet(out / "pairs.parquet")
        st.result.rows_in, st.result.rows_out = frames["papers"].height, pairs.height
        st.result.notes = {"by_factor": by_factor}
        return by_factor


def _contrastive(settings: Settings, name: str, replace: bool, objective: str) -> AugmentTrained:
    """What both flows do: check, decide what the folder holds, build the rows once, train."""
    check_name(name)
    out, t = settings.data_dir / "models" / name, settings.train
    adapter = out / ADAPTER_DIR
    scorer = f"embedding:model={adapter}" if objective == "augment" else f"cof:encoder={adapter}"
    if not settings.warehouse_path.exists():
        raise UsageError(f"no warehouse at {settings.warehouse_path}: run `revbench ingest`"
                         + (" and `revbench graph`" if objective == "factors" else "") + " first (or `revbench demo`)")
    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        held_out = held_out_digest(wh.ratings.rated_papers())
    if prepare_folder(out, settings_digest(settings, objective), held_out, replace,
                      done_mark=f"{ADAPTER_DIR}/revbench_model.json", what="TRAIN__* settings") == "done":
        return AugmentTrained(status="skipped", objective=objective, scorer=scorer, adapter=adapter, steps=0,
                              resumed_from=0, pairs=0, seconds=0.0, pairs_per_second=0.0, first_loss=None, last_loss=None,
                              reason=f"{adapter} was trained with these settings already (--replace to train again)")
    check_model(t.base_model, "TRAIN__BASE_MODEL")
    with flow_run(settings, f"train-{objective}", {"name": name, "replace": replace}) as run:
        if not (out / "provenance.json").exists():  # a resumed run keeps its data
            rows = papers_stage(run, out) if objective == "augment" else pairs_stage(run, out)
            write_json(out / "provenance.json", {
                "warehouse": str(settings.warehouse_path), "run_id": run.run_id, "built_at": utcnow().isoformat(),
                "objective": objective, "settings": settings_of(settings, objective),
                "settings_sha256": settings_digest(settings, objective),
                "held_out": {"papers": held_out.papers, "sha256": held_out.sha256},
                "rows": rows})
        fit = fit_stage(run, out, objective)
        publish_table(f"{objective}-summary", [{"what": k, "value": v} for k, v in {
            "training rows": fit.pairs, "steps": fit.steps, "resumed from step": fit.resumed_from,
            "first loss": fit.first_loss, "last loss": fit.last_loss, "rows per second": fit.pairs_per_second,
            **({"damaged checkpoints": fit.resume_note} if fit.resume_note else {})}.items()],
            f"What the {objective} training used and did")
        base = f"embedding:model={t.base_model}" if objective == "augment" else "cof"
        publish_markdown(f"{objective}-scorer", f"Evaluate it beside its base:\n\n`revbench evaluate -b warehouse -s {base} "
                         f"-s '{scorer}' --baseline {base}`", "The trained encoder")
        return AugmentTrained(**{f.name: getattr(fit, f.name) for f in fields(fit)}, objective=objective, scorer=scorer,
                              papers_trained=fit.pairs)


@revbench_flow("train-augment")
def augment_flow(settings: Settings, name: str = "augment", replace: bool = False) -> AugmentTrained:
    """Fine-tune the base model on augmented views of unrated papers; register the adapter."""
    return _contrastive(settings, name, replace, "augment")


@revbench_flow("train-factors")
def factors_flow(settings: Settings, name: str = "factors", replace: bool = False) -> AugmentTrained:
    """Fine-tune the base model on UniPR's factor pairs with their instructions; register the encoder."""
    return _contrastive(settings, name, replace, "factors")
