"""A model is its files, not its name: new weights, a new adapter or an edited configuration are a
new digest, so new vectors and a new spec; files found where a recipe looks that are not the
published model are refused in one line (by their path they run, and are called by it); a
declared stand-in is marked in every result made with it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from revbench.errors import UsageError
from revbench.evaluation.scorers import Context, make_scorer
from revbench.ml.embeddings import EmbeddingCache, settings_cache
from revbench.ml.models import load_model, model_ref, vector_key
from revbench.ml.recipes import MODELS_SUBDIR, RECIPES
from revbench.settings import Settings
from tests.support.evaluation import bench
from tests.support.models import tiny_bert

FIXTURE = Path(__file__).parent / "fixtures" / "specter2-tiny"


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's Hugging Face cache is not the test's; no cache of an earlier test is either."""
    from huggingface_hub import constants

    (tmp_path / "hf").mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    EmbeddingCache._shared.clear()


def _scores(settings: Settings, model: str) -> tuple[dict[tuple[str, str], float], str]:
    scores = make_scorer(f"embedding:model={model}", Context(settings)).score(bench())
    return {(r, p): s for r, p, s in scores.draws[0].iter_rows()}, scores.spec


def _digest_in(spec: str) -> str:
    return dict(kv.split("=", 1) for kv in spec.split(":", 1)[1].split(","))["model_digest"]


def _nudge_one_weight(folder: Path) -> None:
    """One number of the weights changed, the file rewritten in place at the same size."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    state = load_file(str(path))
    size = path.stat().st_size
    state["embeddings.LayerNorm.bias"][0] += 0.5
    save_file(state, str(path), metadata={"format": "pt"})
    assert path.stat().st_size == size  # only the bytes tell the two apart


def test_one_changed_weight_is_new_vectors_and_a_new_digest(settings: Settings, tmp_path: Path) -> None:
    folder = tiny_bert(tmp_path / "model", seed=11)
    before, spec_before = _scores(settings, str(folder))
    old_key = vector_key(str(folder))
    assert (settings.cache_dir / "embeddings" / old_key).is_dir()
    _nudge_one_weight(folder)
    # The same process, its caches warm: neither the cached vectors nor the loaded model may answer.
    after, spec_after = _scores(settings, str(folder))
    assert after.keys() == before.keys() and after != before
    assert _digest_in(spec_after) != _digest_in(spec_before)
    assert _digest_in(spec_after) == model_ref(str(folder)).digest[:12]
    assert vector_key(str(folder)) != old_key
    # Editing the configuration alone (nothing a vector of this model reads) is still other files.
    key = vector_key(str(folder))
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "hidden_dropout_prob": 0.2}))
    assert vector_key(str(folder)) != key


def test_a_replaced_adapter_is_new_vectors_and_a_new_digest(settings: Settings, tmp_path: Path) -> None:
    import torch

    s = settings.with_overrides(embed={"stand_ins": True})  # the fixture is a tiny stand-in of SPECTER2
    models = s.cache_dir / MODELS_SUBDIR
    shutil.copytree(FIXTURE / "base", models / RECIPES["specter2"].folder_name)
    shutil.copytree(FIXTURE / "adapter", models / "allenai__specter2")
    before, spec_before = _scores(s, "specter2")
    weights = models / "allenai__specter2" / "pytorch_adapter.bin"
    state = torch.load(weights, weights_only=True)
    up = next(k for k in state if k.endswith("adapter_up.bias"))
    state[up] = state[up] + 1.0
    weights.unlink()  # another adapter put in the old one's place
    torch.save(state, weights)
    after, spec_after = _scores(s, "specter2")
    assert after.keys() == before.keys() and after != before
    assert _digest_in(spec_after) != _digest_in(spec_before)
    assert "stand_in=true" in spec_before and "stand_in=true" in spec_after


def test_a_random_bert_where_a_recipe_looks_is_refused_in_one_line(settings: Settings, tmp_path: Path) -> None:
    from revbench.flows.embed import embed_flow
    from tests.support.evaluation import write_openreview

    models = settings.cache_dir / MODELS_SUBDIR
    base = tiny_bert(models / RECIPES["specter2"].folder_name, seed=3)
    shutil.copytree(FIXTURE / "adapter", models / "allenai__specter2")  # an adapter that fits the random base
    for spec in ("embedding:model=specter2", "embedding:model=specter2+scincl"):
        if spec.endswith("scincl"):
            tiny_bert(models / "malteos__scincl", seed=4)
        with pytest.raises(UsageError) as err:
            make_scorer(spec, Context(settings))
        line = str(err.value)
        assert "\n" not in line and line.startswith("model specter2:") and str(base) in line, line
        assert "vocab_size 30522 != 31090" in line and "hidden_size 32 != 768" in line and "num_hidden_layers 2 != 12" in line
        assert f"{models / 'allenai__specter2'} (the adapter): hidden_size 32 != 768" in line
    # Every other door says the same before any work: the cache, the loader, the embed flow.
    with pytest.raises(UsageError, match="vocab_size 30522 != 31090"):
        settings_cache(settings, "specter2")
    with pytest.raises(UsageError, match="vocab_size 30522 != 31090"):
        load_model("specter2", models_dir=models)
    with pytest.raises(UsageError, match=r"model scincl: .*malteos__scincl: .*vocab_size 30522 != 31090"):
        embed_flow.fn(settings, benchmarks=[f"openreview={write_openreview(tmp_path / 'or')}"], models=["scincl"])
    assert not (settings.cache_dir / "embeddings").exists() and not (settings.data_dir / "vectors").exists()


def test_evaluate_refuses_the_random_bert_before_any_scorer(settings: Settings, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.common import run_cli, settings_env
    from tests.support.evaluation import write_openreview

    tiny_bert(settings.cache_dir / MODELS_SUBDIR / "allenai__specter", seed=5)
    for k, v in settings_env(settings).items():
        monkeypatch.setenv(k, v)
    code, _, err = run_cli("evaluate", "-b", f"openreview={write_openreview(tmp_path / 'or')}", "-s", "bm25",
                           "-s", "embedding:model=specter", "--bootstrap", "0")
    assert code == 2 and err.count("\n") == 1 and "vocab_size 30522 != 31116" in err, err
    assert not (settings.data_dir / "reports").exists()


def test_the_same_folder_by_its_path_runs_and_is_called_by_its_path(settings: Settings) -> None:
    folder = tiny_bert(settings.cache_dir / MODELS_SUBDIR / "allenai__specter", seed=6)
    scorer = make_scorer(f"embedding:model={folder}", Context(settings))
    scores = scorer.score(bench())
    assert scores.draws[0].height == 4
    digest = model_ref(str(folder)).digest
    assert f"model={folder}," in scores.spec and f"model_digest={digest[:12]}" in scores.spec
    assert "stand_in" not in scores.spec and "model=specter," not in scores.spec and scores.scorer == f"embedding:model={folder}"
    assert vector_key(str(folder)).split("/")[0].endswith(f"@{digest[:12]}")


def test_a_stand_in_result_says_so(settings: Settings, tmp_path: Path) -> None:
    from revbench.flows.embed import embed_flow
    from tests.support.evaluation import write_openreview

    s = settings.with_overrides(embed={"stand_ins": True})
    folder = tiny_bert(s.cache_dir / MODELS_SUBDIR / "malteos__scincl", seed=7)
    _, spec = _scores(s, "scincl")
    ref = model_ref("scincl", models_dir=s.cache_dir / MODELS_SUBDIR)
    assert ref.stand_in and spec.endswith(f"model_digest={ref.digest[:12]},stand_in=true")
    row = embed_flow.fn(s, benchmarks=[f"openreview={write_openreview(tmp_path / 'or')}"], models=["scincl"]).rows[0]
    manifest = json.loads((Path(row.export) / "manifest.json").read_text())
    assert manifest["stand_in"] is True and manifest["model_digest"] == ref.digest
    assert manifest["model_weights"] == str(folder) and manifest["recipe"] == "scincl"
    assert Path(row.export).parent.name == f"scincl@{ref.digest[:12]}"
    # The published files (here: the packaged MiniLM, the one recipe whose weights ship) are no stand-in.
    _, minilm = _scores(s, "minilm")
    assert "stand_in" not in minilm and not model_ref("minilm").mismatch


def test_the_digest_is_computed_once_per_file_stamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from revbench.ml import models

    folder = tiny_bert(tmp_path / "model", seed=8)
    read: list[Path] = []
    real = models.file_sha256
    monkeypatch.setattr(models, "file_sha256", lambda *p: read.extend(p) or real(*p))
    models._file_digest.cache_clear()
    first = model_ref(str(folder)).digest
    n = len(read)
    assert n >= 3 and {p.name for p in read} >= {"config.json", "model.safetensors", "tokenizer.json"}
    assert model_ref(str(folder)).digest == first and len(read) == n  # nothing read again
    (folder / "README.md").write_text("a model card changes no vector")
    assert model_ref(str(folder)).digest == first
