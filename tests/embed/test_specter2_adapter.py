"""SPECTER2's adapter computed here equals what the ``adapters`` library computes on the same
files (reference vectors made in an environment pinned to the library's transformers, see
fixtures/specter2-tiny/make_fixture.py), and an adapter this loader does not compute is refused
in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from revbench.errors import UsageError
from revbench.ml.models import load_model
from revbench.ml.recipes import MODELS_SUBDIR, RECIPES

FIXTURE = Path(__file__).parent / "fixtures" / "specter2-tiny"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))  # this machine's cache is not the test's
    d = tmp_path / MODELS_SUBDIR
    shutil.copytree(FIXTURE / "base", d / RECIPES["specter2"].folder_name)
    shutil.copytree(FIXTURE / "adapter", d / "allenai__specter2")
    return d


def test_the_adapter_is_the_libraries_to_float_precision(models: Path) -> None:
    got = load_model("specter2", models_dir=models, stand_ins=True).encode(REFERENCE["texts"], normalize_embeddings=False)
    want = np.asarray(REFERENCE["cls_with_adapter"], dtype=np.float32)
    without = np.asarray(REFERENCE["cls_without_adapter"], dtype=np.float32)
    assert got.shape == want.shape == (5, 32)
    assert np.abs(got - want).max() < 1e-5
    assert np.abs(want - without).max() > 0.1  # the adapter changes every vector: the test could fail
    # The base alone (a plain CLS recipe on the same files) is the library's model without the adapter.
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    t = Transformer(str(models / "allenai__specter2_base"), max_seq_length=512)
    plain = SentenceTransformer(modules=[t, Pooling(32, pooling_mode="cls")], device="cpu")
    assert np.abs(plain.encode(REFERENCE["texts"]) - without).max() < 1e-5


def _edit_config(folder: Path, **changes: object) -> None:
    path = folder / "adapter_config.json"
    saved = json.loads(path.read_text())
    saved["config"].update(changes)
    path.write_text(json.dumps(saved))


@pytest.mark.parametrize(("change", "needle"), [
    ({"ln_after": True}, "ln_after=True"),
    ({"mh_adapter": True}, "mh_adapter=True"),
    ({"non_linearity": "swish"}, "non_linearity='swish'"),
    ({"scaling": 2.0}, "scaling=2.0"),
])
def test_a_configuration_computed_otherwise_is_refused(models: Path, change: dict[str, object], needle: str) -> None:
    _edit_config(models / "allenai__specter2", **change)
    with pytest.raises(UsageError) as err:
        load_model("specter2", models_dir=models, stand_ins=True)
    assert needle in str(err.value) and "adapter_config.json" in str(err.value) and "\n" not in str(err.value)


def test_damaged_weights_are_refused_in_one_line(models: Path) -> None:
    weights = models / "allenai__specter2" / "pytorch_adapter.bin"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(UsageError, match="pytorch_adapter.bin: not readable") as err:
        load_model("specter2", models_dir=models, stand_ins=True)
    assert "\n" not in str(err.value)


def test_weights_for_another_model_are_refused(models: Path) -> None:
    import torch

    weights = models / "allenai__specter2" / "pytorch_adapter.bin"
    state = torch.load(weights, weights_only=True)
    torch.save({k: v for k, v in state.items() if ".layer.1." not in k}, weights)  # one layer's adapter gone
    with pytest.raises(UsageError, match=r"weights for layers \[0\], the model has 2"):
        load_model("specter2", models_dir=models, stand_ins=True)
    torch.save({**state, "bert.encoder.layer.0.attention.output.adapters.[PRX].adapter_up.weight": state[next(iter(state))]},
               weights)
    with pytest.raises(UsageError, match="unexpected weight"):
        load_model("specter2", models_dir=models, stand_ins=True)


def test_evaluate_runs_openreviews_production_ensemble_by_name(models: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from revbench.settings import Settings
    from tests.support.common import run_cli, settings_env
    from tests.support.evaluation import write_openreview
    from tests.support.models import tiny_bert

    s = Settings(data_dir=tmp_path / "data").with_overrides(embed={"stand_ins": True})  # the fixture is a tiny stand-in
    shutil.copytree(models, s.cache_dir / MODELS_SUBDIR)
    tiny_bert(s.cache_dir / MODELS_SUBDIR / "malteos__scincl", seed=4)
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    data = write_openreview(tmp_path / "or")
    out = tmp_path / "rows.json"
    code, _, err = run_cli("evaluate", "-b", f"openreview={data}", "-s", "embedding:model=specter2",
                           "-s", "embedding:model=specter2+scincl", "--bootstrap", "0", "--json-out", str(out))
    assert code == 0, err
    scorers = {r["scorer"] for r in json.loads(out.read_text())}
    assert {"embedding:model=specter2", "embedding:model=specter2+scincl"} <= scorers, scorers
