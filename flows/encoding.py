"""Texts encoded through the shared embedding cache, in pieces: what the embed, pools and train
flows' stages call to turn texts into vectors.

It lives here, beside the flows and not in :mod:`revbench.ml`, because it is flow plumbing: the
pieces go out through :func:`revbench.flows.pieces.map_pieces` (Prefect tasks on the run's task
runner when tracked, under the ``embed`` concurrency tag) and report to the stage's progress bar
and settings, which :mod:`revbench.ml` may not import. It defines no flow, so a flow importing it
imports no other flow. What a piece does is :func:`revbench.ml.embeddings.encode_piece`'s.
"""

from __future__ import annotations

import numpy as np

from revbench.flows.common import Stage
from revbench.flows.pieces import chunks, map_pieces
from revbench.ml.embeddings import encode_piece, settings_cache
from revbench.ml.models import HASHING_MODEL, device


def encode_texts(st: Stage, model: str, texts: list[str], what: str) -> tuple[np.ndarray, int, int]:
    """Vectors of ``texts`` by ``model``; only texts never embedded are encoded, in pieces of
    RUNNER__EMBED_BATCH (Prefect tasks on the run's task runner when tracked), each kept as it
    completes, so a killed run encodes only what it had not finished. Returns the vectors, the
    count encoded and the pieces."""
    cache = settings_cache(st.settings, model)
    todo = cache.missing(texts)
    # Asking for a GPU imports torch (seconds, 15 s on a loaded 2-core machine): only when a model
    # with weights has texts to encode, never for the weightless hashing encoder or a warm cache.
    gpu = bool(todo) and model != HASHING_MODEL and cache.runtime == "torch" and device() == "cuda"
    budget = st.settings.embed.token_budget if gpu else 0
    pieces = [(model, list(batch), budget, cache.runtime, str(cache.root))
              for batch in chunks(todo, st.settings.runner.embed_batch)]
    encoded = 0
    with st.progress(len(todo), f"embedding {len(todo)} {what} ({model}, {cache.runtime})") as progress:
        for hashes, vecs in map_pieces(encode_piece, pieces, f"embed-{what.replace(' ', '-')}", "embed"):
            cache.add(hashes, vecs)
            encoded += len(hashes)
            progress.advance(len(hashes))
    return cache.embed(texts), encoded, len(pieces)  # every text is cached now: nothing is encoded here
