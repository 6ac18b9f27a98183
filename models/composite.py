"""Saving and loading the encoders that are more than a backbone (CoLDE, graph attention):
`config.json` (docsim type, architecture, the backbone's config), `model.safetensors` (every
weight) and the tokenizer files, all in one directory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedTokenizerBase

from models.backbone import backbone_from_config, load_tokenizer

WEIGHTS = "model.safetensors"


def save_composite(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    out: Path,
    *,
    docsim_type: str,
    architecture: dict[str, Any],
    details: dict[str, Any],
) -> None:
    backbone = model.backbone.config.to_dict()
    for key in ("transformers_version", "_name_or_path", "architectures"):
        backbone.pop(key, None)
    config = {
        "docsim_type": docsim_type,
        "architecture": architecture,
        "backbone": backbone,
        "details": details,
    }
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / WEIGHTS))
    tokenizer.save_pretrained(out)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))


def load_composite(path: Path, build) -> tuple[torch.nn.Module, dict[str, Any]]:  # noqa: ANN001
    """Rebuild the module (`build(backbone, tokenizer, **architecture)`) and its weights."""
    config = json.loads((path / "config.json").read_text())
    backbone = backbone_from_config(config["backbone"])
    model = build(backbone, load_tokenizer(path), **config["architecture"])
    model.load_state_dict(load_file(str(path / WEIGHTS)))
    return model.eval(), config


def composite_identity(path: Path, name: str, dim: int, max_length: int) -> dict[str, Any]:
    config_text = (path / "config.json").read_text()
    config = json.loads(config_text)
    digest = hashlib.sha256()
    with (path / WEIGHTS).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return {
        "name": name,
        "type": config["docsim_type"],
        "architecture": config["backbone"].get("model_type"),
        "dim": dim,
        "max_length": max_length,
        "pooling": "mean",
        "config_hash": hashlib.sha256(
            json.dumps(
                {k: config[k] for k in ("docsim_type", "architecture", "backbone")}, sort_keys=True
            ).encode()
        ).hexdigest(),
        "checkpoint_sha256": digest.hexdigest(),
        "source": str(path),
    }
