"""A model that is not on this machine stops a run in one line, exit 2, before torch loads: a hub
name not in the Hugging Face cache while downloads are off names itself and how to get it (a
recipe's repository names the recipe), and an ensemble names every missing model, not the first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from revbench.errors import UsageError
from revbench.evaluation.scorers import Context, make_scorer
from revbench.ml.presence import absent_line
from revbench.settings import Settings
from tests.support.common import run_cli, settings_env

ROOT = Path(__file__).resolve().parents[2]
HUB = "someorg/not-cached-encoder"


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The Hugging Face cache this machine may have is not the test's: each test gets an empty one."""
    from huggingface_hub import constants

    cache = tmp_path / "hf"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def _snapshot(cache: Path, repo: str) -> Path:
    """``repo`` as the hub cache keeps a download (refs/main naming a snapshot); no weights are
    needed to say it is here."""
    root = cache / f"models--{repo.replace('/', '--')}"
    revision = "0" * 40
    (root / "snapshots" / revision).mkdir(parents=True)
    (root / "snapshots" / revision / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(revision)
    return root / "snapshots" / revision


def test_a_hub_name_not_cached_is_refused_when_the_scorer_is_built(settings: Settings) -> None:
    with pytest.raises(UsageError) as err:
        make_scorer(f"embedding:model={HUB}", Context(settings))
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"model {HUB}: no folder of that name, not in ")
    assert "models--someorg--not-cached-encoder" in line and f"hf download {HUB}" in line
    assert "HF_HUB_OFFLINE=0" in line and "HF_HOME" in line


def test_a_recipes_repository_names_the_recipe() -> None:
    line = absent_line(["allenai/specter2"], None)
    assert line is not None and "adapter of the published specter2: model=specter2 runs its recipe" in line


def test_a_cached_hub_name_or_downloads_on_is_not_refused(empty_hf_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert absent_line([HUB], None) is not None
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert absent_line([HUB], None) is None  # sentence-transformers may download it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _snapshot(empty_hf_cache, HUB)
    assert absent_line([HUB], None) is None
    assert absent_line(["hashing", "minilm", "all-MiniLM-L6-v2", "/no/such/folder"], None) is None  # paths: loading says


def test_an_ensemble_names_every_missing_model(settings: Settings) -> None:
    with pytest.raises(UsageError) as err:
        make_scorer("embedding:model=specter2+scincl", Context(settings))
    line = str(err.value)
    assert "\n" not in line and line.startswith("2 models are not here: specter2 (")
    assert "; scincl (" in line and "allenai/specter2_base" in line and "malteos/scincl" in line
    assert "hf download allenai/specter2_base; hf download allenai/specter2; hf download malteos/scincl" in line


def test_the_refusal_comes_before_torch_loads(settings: Settings, empty_hf_cache: Path) -> None:
    code = ("import sys\n"
            "from revbench.errors import UsageError\n"
            "from revbench.evaluation.scorers import Context, make_scorer\n"
            "from revbench.settings import Settings\n"
            f"s = Settings().with_overrides(data_dir={str(settings.data_dir)!r})\n"
            "try:\n"
            f"    make_scorer('embedding:model={HUB}+scincl', Context(s))\n"
            "except UsageError as exc:\n"
            "    print('refused', 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n")
    env = {**settings_env(settings), "HF_HUB_CACHE": str(empty_hf_cache), "HF_HUB_OFFLINE": "1",
           "PATH": "/usr/bin:/bin", "HOME": str(empty_hf_cache.parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.stdout.strip() == "refused False False", out.stdout + out.stderr


def test_evaluate_exits_2_in_one_line(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.evaluation import write_openreview

    data = write_openreview(tmp_path / "or")
    for k, v in settings_env(settings).items():
        monkeypatch.setenv(k, v)
    code, _, err = run_cli("evaluate", "-b", f"openreview={data}", "-s", "bm25", "-s", f"embedding:model={HUB}",
                           "--bootstrap", "0")
    assert code == 2 and err.count("\n") == 1 and f"hf download {HUB}" in err, err
    assert not (settings.data_dir / "reports").exists()  # refused before bm25 (or anything) ran
