"""What a model directory holds beyond the weights' tensors: the configuration a loaded model
carries, its input limit, its pooling mode (sentence-transformers' files), and its weights
file and their hash (what an index manifest records of the encoder)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from transformers import AutoConfig, PretrainedConfig, PreTrainedTokenizerBase

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def sha256_file(path: Path, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def loaded_config(path: Path) -> PretrainedConfig:
    """The configuration `AutoModel.from_pretrained(path)` leaves on the model it loads, read
    without loading it: loading records the weights' dtype, float32 where the file names none
    (the identity hashes the configuration: both ways must hash alike)."""
    config: PretrainedConfig = AutoConfig.from_pretrained(path, local_files_only=True)
    if getattr(config, "dtype", None) is None:
        config.dtype = torch.float32
    return config


def max_length(path: Path, tokenizer: PreTrainedTokenizerBase, config: PretrainedConfig) -> int:
    """sentence-transformers' `max_seq_length` when present, else the model's own limit."""
    limits = [int(getattr(config, "max_position_embeddings", 512))]
    st_config = path / "sentence_bert_config.json"
    if st_config.exists():
        limits.append(int(json.loads(st_config.read_text())["max_seq_length"]))
    if tokenizer.model_max_length and tokenizer.model_max_length < 1_000_000:
        limits.append(int(tokenizer.model_max_length))
    return min(limits)


def weights_file(source_dir: Path | None) -> Path | None:
    """The weights file in `source_dir` (the first of `WEIGHT_FILES` there), or None."""
    if source_dir is None:
        return None
    return next((source_dir / f for f in WEIGHT_FILES if (source_dir / f).exists()), None)


def pooling_mode(path: Path) -> str:
    pooling_config = path / "1_Pooling" / "config.json"
    if pooling_config.exists() and json.loads(pooling_config.read_text()).get(
        "pooling_mode_cls_token"
    ):
        return "cls"
    return "mean"
