"""The embedding cache and its pieces: only texts never seen are encoded, each piece is kept as
it completes, and the weightless hashing encoder gives the same vector to the same text."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from revbench.embeddings import HASHING_MODEL, EmbeddingCache, encode_piece, text_hash

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
