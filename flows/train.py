"""The train flow: keyword profiles -> weak supervision -> LoRA training -> a registered scorer.

Everything lands in ``data/models/<name>/``: ``pairs.parquet`` and ``skipped.parquet`` (the
weak-supervision set and the anchors it could not use, with reasons), ``provenance.json``
(where the set came from and the settings that made it), ``checkpoints/`` and ``adapter/``
(the LoRA weights with ``revbench_model.json`` and a model card). The adapter is a scorer:
``rate:model=data/models/<name>/adapter``.

A second run with the same settings on the same warehouse does nothing; one with other
settings refuses unless ``replace`` (the old folder is kept under ``models/.replaced/``). A
killed run resumes from its newest checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

import polars as pl

from revbench.clients.llm import LlmClient, LlmUnavailable
from revbench.errors import InputError, UsageError
from revbench.evaluation.scorers.base import paper_text
from revbench.files import write_atomic
from revbench.flows.common import (
    Run,
    Stage,
    flow_run,
    publish_markdown,
    publish_table,
    revbench_flow,
    stage,
    stage_task,
)
from revbench.flows.encoding import encode_texts
from revbench.flows.model_folders import (
    HeldOut, check_name, held_out_digest, plot_losses, prepare_folder, read_rows, train_config, write_json,
)
from revbench.flows.results import FlowResult
from revbench.ml.backends import runtime_for
from revbench.ml.embeddings import check_model
from revbench.ml.keywords import KEYWORD_TEMPLATE, KeywordCall, keyword_profiles, llm_keywords, paper_keywords
from revbench.ml.training import TrainResult, train
from revbench.objectives import settings_digest, settings_of
from revbench.retry import PermanentError, TransientError
from revbench.schemas.tables import KEYWORD_PROFILES, PAPER_KEYWORDS
from revbench.settings import Settings, TrainSettings
from revbench.tasks import profiles as tasks
from revbench.tasks.weak_supervision import RecipeParams, build_training_set, count_by
from revbench.templates import render
from revbench.warehouse import Warehouse, utcnow

OBJECTIVE = "rate"
"""This flow's entry in :data:`revbench.objectives.OBJECTIVES`."""


def recipe(t: TrainSettings) -> RecipeParams:
    """The weak-supervision part of the settings."""
    return RecipeParams(anchors=t.anchors, paper_centric_share=t.paper_centric_share, candidates=t.candidates,
                        ratios=tuple(t.negative_ratios), seed=t.seed)


@dataclass(frozen=True)
class KeywordCounts:
    """Paper keywords of one profiles stage: extracted now (by extractor), reused from earlier
    runs, rejected LLM answers by reason, and the prompt version asked."""

    extracted: dict[str, int]
    reused: int
    rejected: dict[str, int]
    template_version: str


@dataclass(frozen=True)
class ProfileInputs:
    """What weak supervision is built from: the papers (rated ones held out), who wrote what,
    the reviewers' keyword profiles, how their keywords were found, and the rated paper ids."""

    papers: pl.DataFrame
    authored: pl.DataFrame
    profiles: pl.DataFrame
    keywords: KeywordCounts
    held_out: list[str]


@dataclass(frozen=True)
class Provenance:
    """Where a weak-supervision set came from and the settings that made it (``provenance.json``)."""

    warehouse: str
    run_id: str
    built_at: str
    settings: dict[str, Any]
    settings_sha256: str
    papers: int
    reviewers: int
    triplets: int
    by_view: dict[str, int]
    skipped: dict[str, int]
    keywords: KeywordCounts
    embedding_model: str
    encoded: int
    held_out: HeldOut

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Provenance:
        """As written to ``provenance.json``."""
        return cls(**{**data, "keywords": KeywordCounts(**data["keywords"]), "held_out": HeldOut(**data["held_out"])})


@dataclass(frozen=True, kw_only=True)
class Trained(TrainResult, FlowResult):
    """A train run that trained: what the training did (its fields are
    :class:`revbench.ml.training.TrainResult`'s), the set's provenance and the scorer to evaluate."""

    status: Literal["trained"] = "trained"
    scorer: str
    provenance: Provenance


@dataclass(frozen=True, kw_only=True)
class TrainSkipped(FlowResult):
    """A train run that did nothing: an adapter trained with these settings exists (the reason
    says where); its scorer is the one to evaluate."""

    status: Literal["skipped"] = "skipped"
    scorer: str
    reason: str


def _keyword_client(st: Stage) -> LlmClient | None:
    """The LLM that extracts keywords, when the settings want one and one is configured."""
    t = st.settings.train
    if t.keywords not in ("auto", "llm"):
        return None
    try:
        return LlmClient(st.settings.llm, st.settings.http, cache_dir=st.settings.cache_dir)
    except LlmUnavailable:
        if t.keywords == "llm":
            raise UsageError("TRAIN__KEYWORDS=llm but no LLM is configured (set REVBENCH_LLM__BASE_URL, "
                             "or TRAIN__KEYWORDS=yake)") from None
        return None


def _ask_llm(run: Run, client: LlmClient, todo: pl.DataFrame) -> tuple[dict[str, list[str]], str, dict[str, int]]:
    """The LLM's keywords of ``todo`` by paper, the prompt version, and the rejected answers by reason."""
    run.require("llm")
    rejected: dict[str, int] = {}

    def note(call: KeywordCall) -> None:
        if call.error:
            reason = "service_failed" if call.answer is None else "not_the_json_asked_for"
            rejected[reason] = rejected.get(reason, 0) + 1

    llm, version = llm_keywords(client, todo, render, on_call=note, errors=(TransientError, PermanentError))
    return llm, version, rejected


@stage_task("keyword-profiles")
def profiles_stage(run: Run) -> ProfileInputs:
    """Keywords of every paper in a recent-papers profile (LLM, else YAKE; earlier answers
    reused) and a keyword profile per reviewer, both stored with the prompt version."""
    with stage(run, "profiles") as st:
        t = st.settings.train
        inputs = st.wh.training.training_inputs(t.profile_years, t.profile_max_papers)
        need = tasks.papers_to_profile(inputs["papers"], inputs["recent"])
        client = _keyword_client(st)
        extractor = "llm" if client is not None else "yake"
        current = render(KEYWORD_TEMPLATE, paper={"title": "", "abstract": ""})[1] if extractor == "llm" else None
        known = tasks.reusable_keywords(st.wh.read(PAPER_KEYWORDS), extractor, st.settings.llm.model, current)
        todo = tasks.without_keywords(need, known)
        llm, version, rejected = _ask_llm(run, client, todo) if client is not None and todo.height else ({}, "", {})
        fresh = paper_keywords(todo, llm=llm, template_version=version, per_paper=t.keywords_per_paper)
        now = utcnow()
        st.wh.training.upsert(PAPER_KEYWORDS, tasks.keyword_rows(fresh, st.settings.llm.model, run.run_id, now))
        every = pl.concat([known, fresh]) if known.height else fresh
        profiles = keyword_profiles(inputs["recent"], every)
        st.wh.training.upsert(KEYWORD_PROFILES, tasks.profile_rows(profiles, inputs["recent"], every, run.run_id, now))
        counts = KeywordCounts(tasks.extracted(fresh, extractor), known.height, rejected, version)
        st.result.rows_in, st.result.rows_out, st.result.rejected = need.height, profiles.height, sum(rejected.values())
        st.result.notes = asdict(counts)
        return ProfileInputs(inputs["papers"], inputs["authored"], profiles, counts, inputs["held_out"])


# Not a Prefect task: its pieces are Prefect tasks, and a task submitted from inside another carries
# that task's parameters (the run, with its warehouse connection) to a Dask worker, which cannot take them.
def supervise_stage(run: Run, inputs: ProfileInputs, out: Path) -> Provenance:
    """Embed papers and profiles with the base model (cached), build the triplets, write them
    with their provenance."""
    with stage(run, "supervise") as st:
        t = st.settings.train
        papers = inputs.papers.select("paper_id", pl.Series("text", paper_text(inputs.papers), dtype=pl.Utf8))
        profiles = inputs.profiles
        if papers.height == 0 or profiles.height == 0:
            raise InputError("no papers or no reviewer profiles to train on: run `revbench ingest` and "
                             "`revbench disambiguate` first")
        pv, enc_p, _ = encode_texts(st, t.base_model, papers["text"].to_list(), "papers")
        rv, enc_r, _ = encode_texts(st, t.base_model, profiles["profile"].to_list(), "profiles")
        pairs, skipped = build_training_set(papers, pv, profiles.select("reviewer_id", "profile"), rv,
                                            inputs.authored, recipe(t))
        out.mkdir(parents=True, exist_ok=True)
        pairs.write_parquet(out / "pairs.parquet")
        skipped.write_parquet(out / "skipped.parquet")
        by_view, reasons = count_by(pairs, "view"), count_by(skipped, "reason")
        provenance = Provenance(
            warehouse=str(st.settings.warehouse_path), run_id=run.run_id, built_at=utcnow().isoformat(),
            settings=settings_of(st.settings, OBJECTIVE), settings_sha256=settings_digest(st.settings, OBJECTIVE),
            papers=papers.height, reviewers=profiles.height, triplets=pairs.height, by_view=by_view,
            skipped=reasons, keywords=inputs.keywords, embedding_model=t.base_model,
            encoded=enc_p + enc_r, held_out=held_out_digest(inputs.held_out))
        write_json(out / "provenance.json", asdict(provenance))
        st.result.rows_in = papers.height + profiles.height
        st.result.rows_out = pairs.height
        st.result.rejected = skipped.height
        st.result.notes = {"by_view": by_view, "skipped": reasons}
        return provenance


@stage_task("lora-training")
def train_stage(run: Run, out: Path) -> TrainResult:
    """LoRA training on the written triplets, resumable from ``out/checkpoints``."""
    with stage(run, "train") as st:
        pairs = read_rows(out / "pairs.parquet")
        cfg = train_config(st.settings.train)
        total = cfg.total_steps(pairs.height)
        with st.progress(total, f"train {total} steps on {pairs.height} triplets") as bar:

            def tick(step: int, _total: int, _loss: float) -> None:
                bar.advance(step - bar.done)  # a resumed run starts past its checkpoint

            result = train(pairs, out, cfg, card={"revbench_run": run.run_id}, progress=tick)
        st.result.rows_in = pairs.height
        st.result.rows_out = result.steps - result.resumed_from
        # The loss of every step is in the model card, not in the run's notes; a damaged checkpoint
        # set aside before resuming is said in ``resume_note``.
        st.result.notes = {k: str(v) if k == "adapter" else v for k, v in asdict(result).items()
                           if k != "losses" and (k != "resume_note" or v)}
        write_card(out, result.adapter, st.settings.train, result.losses)
        return result


def write_card(out: Path, adapter: Path, t: TrainSettings, losses: list[float]) -> None:
    """The model card (``adapter/README.md``) from ``templates/models/card.md.j2``."""
    card = json.loads((adapter / "revbench_model.json").read_text())
    provenance = json.loads((out / "provenance.json").read_text())
    text, version = render("models/card.md.j2", card=card, provenance=provenance, settings=t.model_dump(mode="json"),
                           spec=f"rate:model={adapter}", losses=losses)
    plot_losses(losses, adapter / "loss.png")
    card["card_template_version"] = version
    card["held_out"] = provenance.get("held_out")
    write_json(adapter / "revbench_model.json", card)
    write_atomic(adapter / "README.md", text)  # the card is the last file: its presence means the model is complete


def _publish_summary(provenance: Provenance, fit: TrainResult, scorer: str) -> None:
    rows = [{"step": "triplets", "value": provenance.triplets},
            {"step": "skipped anchors", "value": sum(provenance.skipped.values())},
            {"step": "training steps", "value": fit.steps},
            {"step": "resumed from step", "value": fit.resumed_from},
            {"step": "first loss", "value": fit.first_loss},
            {"step": "last loss", "value": fit.last_loss},
            {"step": "pairs per second", "value": fit.pairs_per_second}]
    if fit.resume_note:  # a damaged checkpoint was set aside: the curator reads why here as well as in the log
        rows.append({"step": "damaged checkpoints", "value": fit.resume_note})
    publish_table("train-summary", rows, "What the training used and did")
    publish_markdown("train-scorer", f"Evaluate it beside the others:\n\n`revbench evaluate -b warehouse --scorer "
                     f"rate --scorer '{scorer}' --baseline rate`", "The trained scorer")


@revbench_flow("train")
def train_flow(settings: Settings, name: str = "rate", replace: bool = False) -> Trained | TrainSkipped:
    """Train a RATE-style adapter on the warehouse and register it as a scorer."""
    check_name(name)
    out = settings.data_dir / "models" / name
    t = settings.train
    if not settings.warehouse_path.exists():
        raise UsageError(f"no warehouse at {settings.warehouse_path}: run `revbench ingest` and `revbench disambiguate` "
                         "first (or `revbench demo`)")
    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        held_out = held_out_digest(wh.ratings.rated_papers())
    if prepare_folder(out, settings_digest(settings, OBJECTIVE), held_out, replace) == "done":
        adapter = out / "adapter"
        return TrainSkipped(reason=f"{adapter} was trained with these settings already (--replace to train again)",
                            scorer=f"rate:model={adapter}")
    check_model(t.base_model, "TRAIN__BASE_MODEL")  # trained in PyTorch; candidates are encoded in EMBED__BACKEND's runtime
    runtime_for(settings.embed.backend, settings.cache_dir, t.base_model)
    with flow_run(settings, "train", {"name": name, "replace": replace}) as run:
        if (out / "pairs.parquet").exists() and (out / "provenance.json").exists():
            # A resumed run keeps its data.
            provenance = Provenance.from_json(json.loads((out / "provenance.json").read_text()))
        else:
            inputs = profiles_stage(run)
            provenance = supervise_stage(run, inputs, out)
        if provenance.triplets == 0:
            raise InputError(f"the weak-supervision set is empty ({provenance.skipped}): more papers, more "
                             "TRAIN__CANDIDATES, or TRAIN__ANCHORS are needed")
        fit = train_stage(run, out)
        scorer = f"rate:model={out / 'adapter'}"
        _publish_summary(provenance, fit, scorer)
        return Trained(**{f.name: getattr(fit, f.name) for f in fields(fit)}, scorer=scorer, provenance=provenance)
