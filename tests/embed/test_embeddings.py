"""The embedding cache and its pieces: only texts never seen are encoded, each piece is kept as
it completes, and the weightless hashing encoder gives the same vector to the same text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from revbench.ml.embeddings import EmbeddingCache, encode_piece, text_hash
from revbench.ml.models import CARD_FILE, DEFAULT_MODEL, HASHING_MODEL, model_key, resolve_model

TEXTS = ["graph neural networks for molecules", "neural networks on graphs of molecules",
         "a survey of medieval poetry", "graph neural networks for molecules"]


def test_hashing_vectors_are_unit_stable_and_lexical() -> None:
    hashes, vecs = encode_piece(HASHING_MODEL, [(text_hash(t), t) for t in TEXTS])
    assert hashes == [text_hash(t) for t in TEXTS]
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vecs[0], vecs[3])
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2


def test_pieces_are_kept_as_they_complete_and_never_encoded_twice(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, HASHING_MODEL)
    todo = cache.missing(TEXTS)
    assert len(todo) == 3 and len(todo[0][1]) >= len(todo[-1][1])  # each text once, longest first
    first = encode_piece(HASHING_MODEL, todo[:2])
    cache.add(*first)
    # A run killed here keeps the finished piece: a new process reads it back and encodes the rest only.
    (cache.dir / "999999-partial.tmp").write_bytes(b"half a shard")
    again = EmbeddingCache(tmp_path, HASHING_MODEL)
    assert [h for h, _ in again.missing(TEXTS)] == [todo[2][0]]
    calls: list[int] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return encode_piece(HASHING_MODEL, [(text_hash(t), t) for t in texts])[1]

    vecs = again.embed(TEXTS, encode)
    assert calls == [1] and vecs.shape[0] == 4
    assert np.array_equal(vecs[0], first[1][[h for h, _ in todo].index(text_hash(TEXTS[0]))])
    again.embed(TEXTS, encode)
    assert calls == [1]


def test_a_model_name_resolves_to_one_spec(tmp_path: Path) -> None:
    """``hashing``, the packaged default and an adapter folder each mean one model: the adapter
    loads on the base its card names, and its cache key changes when its weights do."""
    assert resolve_model(HASHING_MODEL).backend == "hashing"
    default = resolve_model(DEFAULT_MODEL, half=False)
    assert default.adapter is None and default.precision == "float32" and Path(default.base_model).is_dir()
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / CARD_FILE).write_text('{"base_model": "all-MiniLM-L6-v2"}')
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.safetensors").write_bytes(b"weights one")
    spec = resolve_model(str(adapter), half=False)
    assert (spec.base_model, spec.adapter, spec.backend) == (DEFAULT_MODEL, str(adapter), "sentence-transformers")
    first = model_key(str(adapter))
    (adapter / "adapter_model.safetensors").write_bytes(b"weights two, retrained")
    assert model_key(str(adapter)) != first


def test_vectors_of_another_precision_or_token_limit_never_share_a_cache_entry(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from revbench.ml import models
    from revbench.ml.embeddings import export_dir
    from revbench.ml.models import vector_key

    monkeypatch.setattr(models, "device", lambda: "cpu")
    cpu = vector_key(DEFAULT_MODEL)
    digest = models.model_ref(DEFAULT_MODEL).digest[:12]
    assert cpu == f"all-MiniLM-L6-v2@{digest}/float32-256"  # the packaged model's own configuration says 256 tokens
    assert vector_key(HASHING_MODEL) == f"hashing@{models.hashing_digest()[:12]}/float32-all"
    cpu_export = export_dir(tmp_path, "lrbench", "v1", DEFAULT_MODEL)
    monkeypatch.setattr(models, "device", lambda: "cuda")  # a GPU runs the model in half precision
    gpu = vector_key(DEFAULT_MODEL)
    assert gpu == f"all-MiniLM-L6-v2@{digest}/float16-256" and export_dir(tmp_path, "lrbench", "v1", DEFAULT_MODEL) != cpu_export
    short, long_ = tmp_path / "short", tmp_path / "long"
    for folder, limit in ((short, 128), (long_, 512)):
        folder.mkdir()
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": limit}))
    assert vector_key(str(short)).endswith("/float16-128") and vector_key(str(long_)).endswith("/float16-512")

    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.ones((len(texts), 3), dtype=np.float32) * (len(calls))

    half = EmbeddingCache(tmp_path, DEFAULT_MODEL, key=gpu)
    half.embed(["a paper", "a paper", "another"], encode)
    assert sorted(calls[0]) == ["a paper", "another"]  # a text given twice is encoded once
    full = EmbeddingCache(tmp_path, DEFAULT_MODEL, key=cpu)
    assert full.missing(["a paper"]) and full.dir != half.dir  # the half-precision vector is not served here
    full.embed(["a paper"], encode)
    assert calls[1] == ["a paper"] and EmbeddingCache(tmp_path, DEFAULT_MODEL, key=gpu).missing(["a paper"]) == []


def test_texts_the_model_reads_the_same_share_one_vector(tmp_path: Path) -> None:
    """MiniLM reads 256 tokens: two versions of an abstract that differ only past them are one
    text to it, encoded once, in this process and the next; a change within the limit is not."""
    head = "Reviewer assignment by matching each submission to the papers its reviewers wrote. " * 30
    texts = [head + "Version one ends here.", head + "Version two ends differently.", "A short, different text."]
    calls: list[list[str]] = []

    def encode(batch: list[str]) -> np.ndarray:
        calls.append(batch)
        return encode_piece(HASHING_MODEL, [(text_hash(t), t) for t in batch])[1]

    cache = EmbeddingCache(tmp_path, DEFAULT_MODEL)
    vecs = cache.embed(texts, encode)
    assert sorted(len(b) for b in calls) == [2] and cache.encoded == 2 and cache.shared_by_cut == 1
    assert np.array_equal(vecs[0], vecs[1]) and not np.array_equal(vecs[0], vecs[2])
    later = EmbeddingCache(tmp_path, DEFAULT_MODEL)  # a new process reads the keys back
    third = head + "A third version."
    assert np.array_equal(later.embed([third], encode)[0], vecs[0]) and len(calls) == 1 and later.shared_by_cut == 1
    changed = "Reviewer assignment, revised. " + head
    later.embed([changed], encode)
    assert len(calls) == 2 and later.encoded == 1  # the change is within the limit: another vector
    assert EmbeddingCache(tmp_path, HASHING_MODEL).missing(texts[:2]) != []  # the hashing encoder reads every word
