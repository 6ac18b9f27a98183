"""Architecture configs: frozen dataclasses saved in `config.json` under the keys older model
directories hold (so their config hashes and loading stay as they were), unknown keys and
modes refused."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from docsim.models.encoders import colde, graph
from docsim.models.encoders.backbone import load_tokenizer
from docsim.models.encoders.loading import EncoderNotFoundError, load_encoder

# the "architecture" keys of directories saved before the configs were dataclasses
LEGACY_KEYS = {
    "colde": {
        "dim",
        "lstm_hidden",
        "heads",
        "max_sections",
        "max_chunks",
        "max_tokens",
        "temperature",
    },
    "graph": {"dim", "layers", "heads", "edges", "max_tokens", "passage_words", "temperature"},
}


def test_configs_are_frozen_and_round_trip() -> None:
    config = colde.ColdeConfig(dim=16, max_tokens=12)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.dim = 8  # type: ignore[misc]
    assert colde.ColdeConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert graph.GraphConfig.from_dict({"dim": 8}) == graph.GraphConfig(dim=8)  # defaults


def test_unknown_keys_and_modes_are_refused() -> None:
    with pytest.raises(ValueError, match=r"Unknown ColdeConfig keys \['width'\]. Valid keys"):
        colde.ColdeConfig.from_dict({"width": 3})
    with pytest.raises(ValueError, match="Valid edges are"):
        graph.GraphConfig(edges="ring")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", sorted(LEGACY_KEYS))
def test_saved_config_keeps_the_legacy_layout_and_loads(
    kind: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model: colde.ColdeModel | graph.GraphDocumentModel
    if kind == "colde":
        model = colde.from_base(tiny_encoder_dir, colde.ColdeConfig(dim=16, lstm_hidden=8))
    else:
        model = graph.from_base(tiny_encoder_dir, graph.GraphConfig(dim=16, max_tokens=32))
    model.save(tmp_path, load_tokenizer(tiny_encoder_dir), {"steps": 0})
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["docsim_type"] == kind
    assert set(saved["architecture"]) == LEGACY_KEYS[kind]
    loaded = type(model).load(tmp_path)
    assert loaded.config == model.config
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


def test_a_directory_with_an_unknown_architecture_key_is_not_loadable(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    model = colde.from_base(tiny_encoder_dir, colde.ColdeConfig(dim=16, lstm_hidden=8))
    model.save(tmp_path, load_tokenizer(tiny_encoder_dir), {})
    saved = json.loads((tmp_path / "config.json").read_text())
    saved["architecture"]["width"] = 3
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(EncoderNotFoundError, match="Unknown ColdeConfig keys"):
        load_encoder(tmp_path)


def test_a_config_from_training_options_keeps_its_own_defaults() -> None:
    """`from_options` takes the options that name its fields; the rest (None, or another
    part of the run's) leave the defaults the config defines, and `fixed` wins."""
    from docsim.models.encoders.bregman import BregmanConfig
    from docsim.models.encoders.graph import GraphConfig

    options = {"k": 4, "sigma": None, "unit": "paragraph", "max_tokens": 999}
    assert BregmanConfig.from_options(options) == BregmanConfig(k=4)
    assert GraphConfig.from_options({"edges": "full"}, max_tokens=64) == GraphConfig(
        edges="full", max_tokens=64
    )
    assert GraphConfig.from_options(options, max_tokens=64).max_tokens == 64
