"""The reviewer-attention training flow (``revbench train --objective attention``): weak labels
from the graph on papers no one rated -> their texts embedded by the base model (cached) -> the
attention module trained on those frozen vectors -> a pooling for the embedding scorer.

Everything lands in ``data/models/<name>/``: ``labels.parquet`` and ``skipped.parquet`` (the
training submissions' candidates and the papers left out, with reasons), ``provenance.json``,
``checkpoints/``, and ``attention.pt`` with ``revbench_attention.json`` (its card, written last).
The scorer: ``embedding:model=<base>,pooling=attention:data/models/<name>``. A second run with
the same settings does nothing; a killed run resumes from its newest checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from revbench.errors import InputError, UsageError
from revbench.flows.common import Run, flow_run, publish_markdown, publish_table, revbench_flow, stage, stage_task
from revbench.flows.encoding import encode_texts
from revbench.flows.model_folders import HeldOut, check_name, held_out_digest, plot_losses, prepare_folder, write_json
from revbench.flows.results import FlowResult
from revbench.ml.embeddings import check_model
from revbench.objectives import settings_digest, settings_of
from revbench.settings import Settings, TrainSettings
from revbench.tasks import attention_data
from revbench.warehouse import Warehouse, utcnow

OBJECTIVE = "attention"
"""This flow's entry in :data:`revbench.objectives.OBJECTIVES` (its settings are there)."""


@dataclass(frozen=True, kw_only=True)
class AttentionTrained(FlowResult):
    """An attention module trained (or found trained with these settings: ``status`` skipped)."""

    status: Literal["trained", "skipped"] = "trained"
    folder: str
    scorer: str
    submissions: int = 0
    skipped_papers: int = 0
    steps: int = 0
    resumed_from: int = 0
    resume_note: str = ""
    """Why the run did not resume from its newest checkpoint (damaged: set aside), if it did not."""
    first_loss: float | None = None
    last_loss: float | None = None
    temperature: float | None = None
    reason: str = ""
    losses: list[float] = field(default_factory=list, repr=False)


def scorer_spec(t: TrainSettings, out: Path) -> str:
    """The embedding scorer that pools with the module in ``out``."""
    return f"embedding:model={t.base_model},pooling=attention:{out}"


# Not a Prefect task: its pieces are Prefect tasks, and a task submitted from inside another carries
# that task's parameters (the run, with its warehouse connection) to a Dask worker, which cannot take them.
def labels_stage(run: Run, out: Path) -> dict[str, int]:
    """Weak labels on unrated papers, their texts embedded by the base model; written to ``out``."""
    with stage(run, "attention-labels") as st:
        t = st.settings.train
        with Warehouse.open(st.settings.warehouse_path, read_only=True,
                            lock_wait=st.settings.warehouse.lock_wait_seconds) as wh:
            frames = wh.labels.weak_label_frames()
        if frames["cites"].height == 0 and t.attention_labels == "citations":
            raise InputError("the warehouse holds no citations: run `revbench graph` first, or set "
                             "REVBENCH_TRAIN__ATTENTION_LABELS=authorship")
        built = attention_data.attention_set(frames, t.attention_labels, t.attention_experts, t.attention_negatives,
                                             t.anchors, t.profile_max_papers, t.seed)
        if built.weak.submissions.height == 0:
            raise InputError(f"no unrated paper has a {t.attention_labels} positive among the experts with more than "
                             f"{t.attention_experts} papers: lower REVBENCH_TRAIN__ATTENTION_EXPERTS")
        from revbench.evaluation.scorers.base import model_text

        pv, enc_p, _ = encode_texts(st, t.base_model, model_text(built.weak.submissions, t.base_model), "papers")
        rv, enc_r, _ = encode_texts(st, t.base_model, model_text(built.weak.profiles, t.base_model), "profiles")
        out.mkdir(parents=True, exist_ok=True)
        built.weak.submissions.write_parquet(out / "submissions.parquet")
        built.weak.profiles.write_parquet(out / "profiles.parquet")
        built.weak.labels.write_parquet(out / "labels.parquet")
        built.skipped.write_parquet(out / "skipped.parquet")
        np.save(out / "paper_vectors.npy", pv)
        np.save(out / "profile_vectors.npy", rv)
        counts = {"submissions": built.weak.submissions.height, "reviewers": built.weak.profiles["reviewer_id"].n_unique(),
                  "labels": built.weak.labels.height, "positives": int(built.weak.labels["label"].sum()),
                  "skipped": built.skipped.height, "encoded": enc_p + enc_r}
        st.result.rows_in, st.result.rows_out, st.result.rejected = t.anchors, counts["submissions"], counts["skipped"]
        st.result.notes = counts
        return counts


@stage_task("attention-training")
def fit_stage(run: Run, out: Path) -> AttentionTrained:
    """Train on the written labels and vectors, resumable from ``out/checkpoints``."""
    from revbench.ml.attention import AttentionConfig, train_attention
    from revbench.tasks.weak_labels import WeakLabels

    with stage(run, "attention-training") as st:
        t = st.settings.train
        try:
            weak = WeakLabels(pl.read_parquet(out / "submissions.parquet"), pl.read_parquet(out / "profiles.parquet"),
                              pl.read_parquet(out / "labels.parquet"), 0)
            pv, rv = np.load(out / "paper_vectors.npy"), np.load(out / "profile_vectors.npy")
        except Exception as exc:  # noqa: BLE001 - parquet and numpy raise several kinds for a damaged file
            raise InputError(f"{out}: its training data is damaged ({type(exc).__name__}): pass --replace to build it "
                             "again (the damaged folder is kept under models/.replaced/)") from None
        ex = attention_data.examples(weak, pv, rv)
        cfg = AttentionConfig(base_model=t.base_model, dim=int(pv.shape[1]), learning_rate=t.attention_learning_rate,
                              temperature=t.attention_temperature, batch_size=t.attention_batch_size, epochs=t.epochs,
                              max_steps=t.max_steps, checkpoint_every=t.checkpoint_every, seed=t.seed)
        total = cfg.total_steps(ex.n)
        with st.progress(total, f"train attention {total} steps on {ex.n} papers") as bar:
            fit = train_attention(ex, out, cfg, card={"revbench_run": run.run_id, "labels": t.attention_labels},
                                  progress=lambda step, _t, _l: bar.advance(step - bar.done))
        plot_losses(fit.losses, out / "loss.png")
        st.result.rows_in, st.result.rows_out = ex.n, fit.steps - fit.resumed_from
        st.result.notes = {"steps": fit.steps, "resumed_from": fit.resumed_from, "temperature": fit.temperature,
                           **({"resume_note": fit.resume_note} if fit.resume_note else {})}
        return AttentionTrained(folder=str(out), scorer=scorer_spec(t, out), submissions=ex.n, steps=fit.steps,
                                resumed_from=fit.resumed_from, resume_note=fit.resume_note, first_loss=fit.first_loss,
                                last_loss=fit.last_loss, temperature=fit.temperature, losses=fit.losses)


def _provenance(settings: Settings, run: Run, held_out: HeldOut, counts: dict[str, int]) -> dict[str, object]:
    return {"warehouse": str(settings.warehouse_path), "run_id": run.run_id, "built_at": utcnow().isoformat(),
            "settings": settings_of(settings, OBJECTIVE), "settings_sha256": settings_digest(settings, OBJECTIVE),
            "held_out": asdict(held_out), "counts": counts}


@revbench_flow("train-attention")
def attention_flow(settings: Settings, name: str = "attention", replace: bool = False) -> AttentionTrained:
    """Train reviewer attention on weak labels of unrated papers and register it as a pooling."""
    check_name(name)
    out, t = settings.data_dir / "models" / name, settings.train
    if not settings.warehouse_path.exists():
        raise UsageError(f"no warehouse at {settings.warehouse_path}: run `revbench ingest`, `revbench disambiguate` "
                         "and `revbench graph` first (or `revbench demo`)")
    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        held_out = held_out_digest(wh.ratings.rated_papers())
    if prepare_folder(out, settings_digest(settings, OBJECTIVE), held_out, replace, done_mark="revbench_attention.json",
                      what="TRAIN__ATTENTION_* settings") == "done":
        return AttentionTrained(status="skipped", folder=str(out), scorer=scorer_spec(t, out),
                                reason=f"{out} holds an attention module trained with these settings already "
                                       "(--replace to train again)")
    check_model(t.base_model, "TRAIN__BASE_MODEL")
    with flow_run(settings, "train-attention", {"name": name, "replace": replace}) as run:
        if not (out / "provenance.json").exists():  # a resumed run keeps its data
            counts = labels_stage(run, out)
            write_json(out / "provenance.json", _provenance(settings, run, held_out, counts))
        counts = json.loads((out / "provenance.json").read_text())["counts"]
        fit = fit_stage(run, out)
        publish_table("attention-summary", [{"what": k, "value": v} for k, v in
                                            {**counts, "steps": fit.steps, "resumed from step": fit.resumed_from,
                                             "first loss": fit.first_loss, "last loss": fit.last_loss,
                                             "learned temperature": fit.temperature}.items()],
                      "What the attention training used and did")
        publish_markdown("attention-scorer", f"Evaluate it beside max, mean and top-3 mean:\n\n`revbench evaluate -b "
                         f"warehouse -s embedding:pooling=max -s embedding:pooling=mean -s embedding:pooling=topk_mean:3 "
                         f"-s '{fit.scorer}' --baseline embedding:pooling=max`", "The trained pooling")
        return AttentionTrained(**{**{f: getattr(fit, f) for f in fit.__dataclass_fields__},
                                   "skipped_papers": int(counts.get("skipped", 0))})
