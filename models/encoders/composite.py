"""Saving and loading the encoders that are more than a backbone (CoLDE, graph attention).

A directory holds `config.json`, `model.safetensors` (every weight) and the tokenizer files.
`config.json` is `{"docsim_type", "architecture", "backbone", "details"}`: the model's
architecture config (a `models.encoders.model_config.ModelConfig` as a dict), the backbone's Hugging
Face config, and what the run recorded about itself. Directories saved before the architecture
became a dataclass have the same layout and load as they are.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar

import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from docsim.models.encoders.backbone import backbone_from_config
from docsim.models.encoders.model_config import ModelConfig

WEIGHTS = "model.safetensors"
CONFIG = "config.json"


@dataclass(frozen=True)
class SavedComposite:
    """What a composite directory holds, but the tokenizer (the encoder wrapper loads it)."""

    docsim_type: str
    architecture: dict[str, Any]  # the model's config, as saved
    backbone: PreTrainedModel  # untrained: its weights are in `weights`
    weights: dict[str, torch.Tensor]  # the whole model's state dict


def save_composite(
    model: torch.nn.Module,
    backbone: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    out: Path,
    *,
    docsim_type: str,
    architecture: dict[str, Any],
    details: dict[str, Any],
) -> None:
    """Save `model` (whose backbone is `backbone`) with its config and `tokenizer` to `out`."""
    backbone_config = backbone.config.to_dict()
    for key in ("transformers_version", "_name_or_path", "architectures"):
        backbone_config.pop(key, None)
    config = {
        "docsim_type": docsim_type,
        "architecture": architecture,
        "backbone": backbone_config,
        "details": details,
    }
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / WEIGHTS))
    tokenizer.save_pretrained(out)
    (out / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True))


def read_composite(path: Path) -> SavedComposite:
    """The config, an untrained backbone of the saved shape and the weights in `path`.

    Raises:
        KeyError: `config.json` lacks the docsim type, architecture or backbone.
    """
    config = json.loads((path / CONFIG).read_text())
    return SavedComposite(
        docsim_type=config["docsim_type"],
        architecture=dict(config["architecture"]),
        backbone=backbone_from_config(config["backbone"]),
        weights=load_file(str(path / WEIGHTS)),
    )


ConfigT = TypeVar("ConfigT", bound=ModelConfig)


class CompositeModel(torch.nn.Module, Generic[ConfigT]):
    """A network over a backbone, saved as a composite directory. A subclass names its
    `docsim_type` and `config_class`, and builds its layers in `__init__` after this one's."""

    docsim_type: ClassVar[str]
    config_class: ClassVar[type[ModelConfig]]

    def __init__(self, backbone: PreTrainedModel, config: ConfigT) -> None:
        super().__init__()
        self.backbone = backbone
        self.config = config

    @classmethod
    def load(cls, path: Path) -> Self:
        """The model saved in `path` by `save`, in eval mode."""
        saved = read_composite(path)
        config = cls.config_class.from_dict(saved.architecture)
        model = cls(saved.backbone, config)  # type: ignore[arg-type]  # config_class is ConfigT
        model.load_state_dict(saved.weights)
        return model.eval()

    def save(self, out: Path, tokenizer: PreTrainedTokenizerBase, details: dict[str, Any]) -> None:
        """Weights, config and `tokenizer` into `out` (`save_composite`)."""
        save_composite(
            self,
            self.backbone,
            tokenizer,
            out,
            docsim_type=self.docsim_type,
            architecture=self.config.to_dict(),
            details=details,
        )


def composite_identity(path: Path, name: str, dim: int, max_length: int) -> dict[str, Any]:
    """What an index manifest records of the composite encoder saved in `path`."""
    config = json.loads((path / CONFIG).read_text())
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
