"""Loading and saving the transformer backbone the trained encoders start from."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from docsim.models.encoders.pooling import mean_pool
from docsim.models.encoders.registry import LOAD_LOCK, resolve_encoder_path
from docsim.models.errors import EncoderNotFoundError, TrainingError
from docsim.models.inference.tokens import TokenBatch

ST_FILES = ("sentence_bert_config.json",)


@dataclass
class EncoderOutput:
    """The forward pass of a backbone with mean pooling. N texts, H hidden size."""

    embeddings: torch.Tensor  # (N, H) float32, not normalised


def mean_pooled(backbone: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
    """`(N, H)` float32 mean of the backbone's last token states over each text's tokens."""
    hidden = backbone(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask
    ).last_hidden_state  # (N, T, H)
    return mean_pool(hidden, batch.attention_mask)  # (N, H)


def base_directory(base: str | Path) -> Path:
    """The local directory of a base encoder (`minilm` or a path).

    Raises:
        TrainingError: not a model directory.
    """
    try:
        return resolve_encoder_path(base)[1]
    except EncoderNotFoundError as error:
        raise TrainingError(f"--base: {error}") from None


def load_tokenizer(base: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(base, local_files_only=True, use_fast=True)


def load_backbone(base: Path, *, masked_lm: bool = False) -> PreTrainedModel:
    """The base model (with a masked-LM head when asked; a missing head starts random)."""
    loader = AutoModelForMaskedLM if masked_lm else AutoModel
    config = json.loads((base / "config.json").read_text())
    if config.get("docsim_type") in ("colde", "graph"):
        raise TrainingError(
            f"--base {str(base)!r} is a docsim {config['docsim_type']} model; continue it with "
            "--resume on its own output, or start from a transformer"
        )
    with LOAD_LOCK:
        model: PreTrainedModel = loader.from_pretrained(base, local_files_only=True)
    return model


def save_backbone_encoder(
    backbone: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    out: Path,
    *,
    docsim_type: str,
    base: Path,
    details: dict[str, Any],
) -> None:
    """Save a backbone that is itself the encoder (mean pooling): SDR and SimCSE/Bregman."""
    backbone.config.docsim_type = docsim_type
    backbone.config.docsim = details
    backbone.save_pretrained(out)
    tokenizer.save_pretrained(out)
    for name in ST_FILES:  # keep the base's sequence limit
        if (base / name).exists():
            shutil.copy(base / name, out / name)


def backbone_from_config(config: dict[str, Any]) -> PreTrainedModel:
    """An untrained backbone of the given Hugging Face config (weights are loaded after)."""
    config = dict(config)
    model_type = config.pop("model_type")
    with LOAD_LOCK:
        model: PreTrainedModel = AutoModel.from_config(AutoConfig.for_model(model_type, **config))
    return model
