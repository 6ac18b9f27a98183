"""Tiny randomly initialised transformer encoders, for tests and quick local runs."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from docsim.models.encoders.registry import _minilm_path


def write_tiny_encoder(
    out_dir: Path,
    *,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 2,
    max_position_embeddings: int = 128,
    seed: int = 0,
) -> Path:
    """Write a small random BERT with the default encoder's WordPiece tokenizer to `out_dir`.

    The directory has the layout of any Hugging Face model, so it is loaded by the same code
    path as a real one.
    """
    tokenizer = AutoTokenizer.from_pretrained(_minilm_path(), local_files_only=True)
    tokenizer.model_max_length = max_position_embeddings
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=hidden_size * 4,
        max_position_embeddings=max_position_embeddings,
    )
    torch.manual_seed(seed)
    model = BertModel(config, add_pooling_layer=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
