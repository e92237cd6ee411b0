"""The embed flow: a benchmark's texts embedded by each configured model, exported with a manifest.

The texts are the ones the evaluate flow's embedding scorers read: the submissions, every
profile paper of every draw, and each reviewer's RATE keyword profile. Encoding goes through
the cache keyed by (model, text hash) that the pools stage fills, so a second run encodes
nothing; on a GPU the model runs in half precision with batches cut by token budget. Each
(benchmark, model) is exported to ``vectors/<benchmark>-<version>/<model>@<digest>/<runtime,
precision, limit>/`` as ``vectors.parquet`` and ``manifest.json`` (counts, sha256, and the
model's files: their folders and digest, and whether they are a declared stand-in); the evaluate
flow's embedding scorers load that export, when it was made by the same files, before they encode
anything.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from revbench.evaluation.inputs import load_inputs
from revbench.evaluation.model import Benchmark
from revbench.evaluation.plan import plan_benchmarks
from revbench.files import file_sha256, write_atomic
from revbench.flows.common import Run, flow_run, publish_table, revbench_flow, stage
from revbench.flows.encoding import encode_texts
from revbench.flows.results import FlowResult
from revbench.ml.backends import runtime_for
from revbench.errors import UsageError
from revbench.ml.embeddings import check_model, export_dir, settings_cache, text_hash
from revbench.ml.models import device
from revbench.settings import Settings
from revbench.tasks.embed import benchmark_texts, counts_by_kind, export_dtype, vector_frame
from revbench.warehouse import utcnow


@dataclass(frozen=True)
class EmbeddedBenchmark:
    """One benchmark by one model: its texts, how many were encoded now and how many came from
    the cache, and the export folder."""

    benchmark: str
    model: str
    texts: int
    encoded: int
    reused: int
    export: str


@dataclass(frozen=True)
class EmbedResult(FlowResult):
    """The device that encoded, and one row per (benchmark, model)."""

    run_id: str
    device: str
    rows: list[EmbeddedBenchmark]


# Not a Prefect task: its pieces are Prefect tasks, and a task submitted from inside another carries
# that task's parameters (the run, with its warehouse connection) to a Dask worker, which cannot take them.
def embed_stage(run: Run, bench: Benchmark, model: str) -> EmbeddedBenchmark:
    """One benchmark by one model: encode what is missing, export the vectors with a manifest."""
    with stage(run, f"embed:{model}") as st:
        texts = benchmark_texts(st.settings, bench, model)
        vecs, encoded, pieces = encode_texts(st, model, texts["text"].to_list(), f"{bench.name} texts")
        cache = settings_cache(st.settings, model)
        runtime, ref = cache.runtime, cache.ref
        out = export_dir(st.settings.data_dir, bench.name, bench.version, ref, runtime)
        out.mkdir(parents=True, exist_ok=True)
        frame = vector_frame(texts, [text_hash(t) for t in texts["text"].to_list()], vecs)
        tmp = out / "vectors.parquet.tmp"
        frame.write_parquet(tmp)
        digest = file_sha256(tmp)
        tmp.replace(out / "vectors.parquet")  # whole or absent
        manifest = {"benchmark": bench.name, "benchmark_version": bench.version, "model": model,
                    "model_digest": ref.digest, "model_weights": ref.weights, "model_adapter": ref.adapter,
                    "recipe": ref.recipe.name if ref.recipe is not None else None, "stand_in": ref.stand_in,
                    "dim": int(vecs.shape[1]) if vecs.size else 0, "rows": frame.height,
                    "by_kind": counts_by_kind(texts),
                    "files": {"vectors.parquet": digest}, "device": device(), "runtime": runtime,
                    "dtype": export_dtype(device(), runtime),
                    "encoded_this_run": encoded, "exported_at": utcnow().isoformat()}
        write_atomic(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
        st.result.rows_in, st.result.rows_out = frame.height, encoded
        st.result.notes = {"pieces": pieces, "export": str(out)}
        return EmbeddedBenchmark(bench.name, model, frame.height, encoded, frame.height - encoded, str(out))


@revbench_flow("embed")
def embed_flow(settings: Settings, benchmarks: list[str], models: list[str] | None = None) -> EmbedResult:
    """Embed every benchmark's texts with every model (default: EMBED__MODELS) and export them."""
    plan = plan_benchmarks(settings, benchmarks)
    models = models or settings.embed.models
    for m in models:  # before the benchmarks load: a wrong name costs nothing
        if "+" in m:
            parts = " ".join(f"-m {p}" for p in m.split("+") if p)
            raise UsageError(f"--model {m!r}: an ensemble is a way of scoring (embedding:model={m}), not a model; "
                             f"embed each of its models ({parts}) and evaluate the ensemble")
    loaded, _ = load_inputs(plan, allow_partial=False, profile_max_papers=settings.ratings.profile_max_papers,
                            lock_wait=settings.warehouse.lock_wait_seconds)
    for m in models:
        check_model(m, "--model", runtime_for(settings.embed.backend, settings.cache_dir, m), settings.cache_dir,
                    stand_ins=settings.embed.stand_ins)
    with flow_run(settings, "embed", {"benchmarks": benchmarks, "models": models}) as run:
        rows = [embed_stage(run, b, m) for b in loaded for m in models]
        publish_table("embed-summary", [asdict(r) for r in rows],
                      "Texts per benchmark and model: encoded this run, reused from the cache")
        return EmbedResult(run.run_id, device(), rows)
