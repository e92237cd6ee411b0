"""No code from data: a pickle planted where a checkpoint, an attention module's weights or an
adapter's weights belong runs nothing and is named in one line; a damaged newest checkpoint is
set aside and the run resumes from the one before it (or starts over) and says so, ending with
the weights an uninterrupted run has."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from revbench.errors import InputError, UsageError
from revbench.ml.attention import (
    AttentionConfig,
    AttentionExamples,
    AttentionResult,
    load_attention,
    pad_profiles,
    train_attention,
)
from revbench.ml.bottleneck import CONFIG_FILE, DEFAULTS, PFEIFFER, read_adapter
from revbench.ml.checkpoint import STATE_FILE, TENSORS_FILE, checkpoints
from revbench.ml.recipes import ATTENTION_CARD_FILE, ATTENTION_WEIGHTS_FILE


class Planted:
    """Unpickled, it creates ``marker``: the side effect a loader that runs code would show."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def plant(path: Path, marker: Path, how: str = "torch") -> None:
    """A pickle that creates ``marker`` when loaded, written as ``torch.save`` or a bare pickle does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "torch":
        torch.save({"weights": Planted(marker)}, path)
    else:
        path.write_bytes(pickle.dumps(Planted(marker), protocol=4))


def examples(n: int = 20, dim: int = 8) -> AttentionExamples:
    rng = np.random.default_rng(0)
    papers = rng.normal(size=(n, dim)).astype(np.float32)
    papers /= np.linalg.norm(papers, axis=1, keepdims=True)
    vectors = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in rng.normal(size=(6, 3, dim)).astype(np.float32)]
    profiles, mask = pad_profiles(vectors, dim)
    return AttentionExamples(papers, profiles, mask, [np.arange(6)] * n,
                             [(np.arange(6) == i % 6).astype(np.int64) for i in range(n)])


def config(max_steps: int = 0) -> AttentionConfig:
    # 20 rows, batches of 4, 4 epochs: 20 steps, a checkpoint every 5.
    return AttentionConfig(base_model="hashing", dim=8, batch_size=4, epochs=4, checkpoint_every=5, max_steps=max_steps)


def weights(out: Path) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in torch.load(out / ATTENTION_WEIGHTS_FILE, weights_only=True).items()}


def stopped_at_10(out: Path) -> Path:
    """A run stopped after step 10: checkpoints step-5 and step-10; returns the newest."""
    train_attention(examples(), out, config(max_steps=10))
    assert [p.name for p in checkpoints(out / "checkpoints")] == ["step-0000005", "step-0000010"]
    return out / "checkpoints" / "step-0000010"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    out = tmp_path_factory.mktemp("whole")
    train_attention(examples(), out, config())
    return weights(out)


def assert_same(out: Path, whole: dict[str, np.ndarray]) -> None:
    got = weights(out)
    assert got.keys() == whole.keys()
    for k in whole:
        np.testing.assert_array_equal(got[k], whole[k], err_msg=k)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "revbench.ml.checkpoint" and r.levelno == logging.WARNING]


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def old_format(ck: Path, marker: Path) -> None:
    """The checkpoint as the format before this one wrote it: one pickle, ``state.pt``."""
    for f in (TENSORS_FILE, STATE_FILE):
        (ck / f).unlink()
    plant(ck / "state.pt", marker)


DAMAGE = {
    "truncated tensors": (lambda ck, m: truncate(ck / TENSORS_FILE), TENSORS_FILE, "truncated ("),
    "truncated state": (lambda ck, m: truncate(ck / STATE_FILE), STATE_FILE, "does not parse"),
    "tensors missing": (lambda ck, m: (ck / TENSORS_FILE).unlink(), TENSORS_FILE, "missing"),
    "state missing": (lambda ck, m: (ck / STATE_FILE).unlink(), STATE_FILE, "missing"),
    "a flipped byte": (lambda ck, m: flip_a_byte(ck / TENSORS_FILE), TENSORS_FILE, "sha256 differs"),
    "old-format state.pt": (old_format, "state.pt", "a pickle"),
    "state.pt beside": (lambda ck, m: plant(ck / "state.pt", m), "state.pt", "a pickle"),
    "pickle as tensors": (lambda ck, m: plant(ck / TENSORS_FILE, m), TENSORS_FILE, "a pickle, not read"),
    "bare pickle as tensors": (lambda ck, m: plant(ck / TENSORS_FILE, m, "bare"), TENSORS_FILE, "a pickle, not read"),
    "pickle as state": (lambda ck, m: plant(ck / STATE_FILE, m, "bare"), STATE_FILE, "a pickle, not read"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_newest_checkpoint_is_set_aside_and_the_run_resumes_from_the_one_before(
        damage: str, tmp_path: Path, uninterrupted: dict[str, np.ndarray], caplog: pytest.LogCaptureFixture) -> None:
    make, file, why = DAMAGE[damage]
    out, marker = tmp_path / "m", tmp_path / "ran"
    newest = stopped_at_10(out)
    make(newest, marker)
    caplog.set_level(logging.WARNING, logger="revbench.ml.checkpoint")
    result = train_attention(examples(), out, config())
    assert not marker.exists(), "a planted pickle was loaded"
    assert isinstance(result, AttentionResult) and result.resumed_from == 5 and result.steps == 20
    assert result.resume_note.startswith(f"checkpoint step-0000010 is damaged ({file}: ")
    assert why in result.resume_note and result.resume_note.endswith(
        "set aside as damaged-step-0000010: resumed from step-0000005")
    # One line in the log names the checkpoint's folder and file and says why.
    assert warnings_of(caplog) == [f"{out / 'checkpoints'}: {result.resume_note}"] and "\n" not in result.resume_note
    # Kept for a person to look at, out of the next run's way; the run's own checkpoints carry on.
    assert (out / "checkpoints" / "damaged-step-0000010" / file).exists() or "missing" in why
    assert [p.name for p in checkpoints(out / "checkpoints")] == ["step-0000015", "step-0000020"]
    assert_same(out, uninterrupted)
    assert not marker.exists()


def test_with_every_checkpoint_damaged_the_run_starts_over_and_says_so(
        tmp_path: Path, uninterrupted: dict[str, np.ndarray], caplog: pytest.LogCaptureFixture) -> None:
    out, marker = tmp_path / "m", tmp_path / "ran"
    newest = stopped_at_10(out)
    truncate(newest / TENSORS_FILE)
    plant(out / "checkpoints" / "step-0000005" / "state.pt", marker)
    caplog.set_level(logging.WARNING, logger="revbench.ml.checkpoint")
    result = train_attention(examples(), out, config())
    assert not marker.exists()
    assert result.resumed_from == 0 and len(result.losses) == 20
    note = result.resume_note
    assert note.startswith("checkpoints step-0000010 (state.safetensors: truncated (") and "step-0000005 (state.pt: " in note
    assert note.endswith(": started from scratch") and "\n" not in note
    assert warnings_of(caplog) == [f"{out / 'checkpoints'}: {note}"]
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if p.name.startswith("damaged-")) == [
        "damaged-step-0000005", "damaged-step-0000010"]
    assert_same(out, uninterrupted)
    # The next run finds nothing damaged: it says nothing and resumes from the finished run's checkpoint.
    again = train_attention(examples(), out, config())
    assert again.resume_note == "" and again.resumed_from == 20


def test_a_second_damage_of_the_same_step_is_kept_beside_the_first(tmp_path: Path) -> None:
    out = tmp_path / "m"
    newest = stopped_at_10(out)
    for _ in range(2):
        truncate(newest / STATE_FILE)
        assert train_attention(examples(), out, config(max_steps=10)).resumed_from == 5  # and writes step-10 again
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "damaged-step-0000010", "damaged-step-0000010-2", "step-0000005", "step-0000010"]


def test_a_clean_resume_says_nothing(tmp_path: Path, uninterrupted: dict[str, np.ndarray]) -> None:
    out = tmp_path / "m"
    stopped_at_10(out)
    result = train_attention(examples(), out, config())
    assert result.resumed_from == 10 and result.resume_note == ""
    state = json.loads((out / "checkpoints" / "step-0000020" / STATE_FILE).read_text())
    assert state["format"] == "revbench-checkpoint/1" and state["step"] == 20 and len(state["losses"]) == 20
    assert [p.name for p in out.rglob("*.pt")] == [ATTENTION_WEIGHTS_FILE]  # the finished module, nothing else
    assert_same(out, uninterrupted)


@pytest.mark.slow
def test_lora_training_resumes_from_the_checkpoint_before_a_damaged_one_and_says_so(tmp_path: Path) -> None:
    from revbench.ml.training import train
    from tests.train.test_training import config as lora_config
    from tests.train.test_training import triplets

    data, out, marker = triplets(8), tmp_path / "m", tmp_path / "ran"
    train(data, out, lora_config(epochs=1, checkpoint_every=1, max_steps=2))
    plant(out / "checkpoints" / "step-0000002" / TENSORS_FILE, marker)
    result = train(data, out, lora_config(epochs=1, checkpoint_every=1, max_steps=2))
    assert not marker.exists()
    assert result.resumed_from == 1 and result.steps == 2 and len(result.losses) == 2
    assert result.resume_note == ("checkpoint step-0000002 is damaged (state.safetensors: a pickle, not read (a pickle can "
                                  "run code)), set aside as damaged-step-0000002: resumed from step-0000001")
    assert (out / "checkpoints" / "damaged-step-0000002" / TENSORS_FILE).is_file()


def finished_module(folder: Path) -> Path:
    train_attention(examples(), folder, config(max_steps=5))
    assert (folder / ATTENTION_CARD_FILE).is_file()
    return folder / ATTENTION_WEIGHTS_FILE


@pytest.mark.parametrize("how", ["torch", "bare"])
def test_a_pickle_planted_as_an_attention_modules_weights_runs_nothing(how: str, tmp_path: Path) -> None:
    weights_file, marker = finished_module(tmp_path / "att"), tmp_path / "ran"
    load_attention(tmp_path / "att")  # the real one loads
    plant(weights_file, marker, how)
    with pytest.raises(InputError) as err:
        load_attention(tmp_path / "att")
    assert not marker.exists(), "a planted pickle was loaded"
    msg = str(err.value)
    assert msg.startswith(f"{weights_file}: not plain saved weights") and "nothing in it ran" in msg and "\n" not in msg


def test_damaged_attention_weights_are_refused_in_one_line(tmp_path: Path) -> None:
    weights_file = finished_module(tmp_path / "att")
    truncate(weights_file)
    with pytest.raises(InputError) as err:
        load_attention(tmp_path / "att")
    assert str(err.value).startswith(f"{weights_file}: not readable as saved weights") and "\n" not in str(err.value)
    torch.save({"W": torch.eye(3)}, weights_file)  # plain weights, of another module
    with pytest.raises(InputError, match="an attention module of dimension 8 has"):
        load_attention(tmp_path / "att")


def adapter_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / CONFIG_FILE).write_text(json.dumps({"config": {**PFEIFFER, **DEFAULTS, "reduction_factor": 16}}))
    key = "bert.encoder.layer.0.output.adapters.[PRX].{}"
    torch.save({key.format("adapter_down.0.weight"): torch.zeros(2, 4), key.format("adapter_down.0.bias"): torch.zeros(2),
                key.format("adapter_up.weight"): torch.zeros(4, 2), key.format("adapter_up.bias"): torch.zeros(4)},
               folder / "pytorch_adapter.bin")
    return folder / "pytorch_adapter.bin"


@pytest.mark.parametrize("how", ["torch", "bare"])
def test_a_pickle_planted_as_an_adapters_weights_runs_nothing(how: str, tmp_path: Path) -> None:
    weights_file, marker = adapter_folder(tmp_path / "adapter"), tmp_path / "ran"
    assert sorted(read_adapter(tmp_path / "adapter")[1]) == [0]  # the real one loads
    plant(weights_file, marker, how)
    with pytest.raises(UsageError) as err:
        read_adapter(tmp_path / "adapter")
    assert not marker.exists(), "a planted pickle was loaded"
    msg = str(err.value)
    assert msg.startswith(f"{weights_file}: not plain saved weights") and "\n" not in msg
