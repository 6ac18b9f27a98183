"""Exported encoders on disk.

- The cache `<cache_dir>/<key>/` (by default `<data_dir>/encoders/`): one exported, quantised
  model per checkpoint, configuration, backend and runtime version, so that a second index
  with the same encoder does not export it again. `calibration.json` beside the model says
  which text calibrated it.
- The copy every index version keeps in `<version>/encoder/`: a version is served with
  exactly the model its vectors came from, whatever happens to the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

VERSION_ENCODER_DIR = "encoder"
CALIBRATION_FILE = "calibration.json"


def cache_key(identity: dict[str, Any], backend: str, runtime: dict[str, str]) -> str | None:
    """The cache entry of an encoder's export; None for an encoder without a checkpoint file
    (nothing stable to key it by)."""
    checkpoint = identity.get("checkpoint_sha256")
    if not checkpoint:
        return None
    blob = json.dumps(
        [checkpoint, identity.get("config_hash"), backend, runtime], sort_keys=True
    ).encode()
    return f"{backend}-{hashlib.sha256(blob).hexdigest()[:24]}"


def read_calibration(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((directory / CALIBRATION_FILE).read_text())
    except (OSError, ValueError):
        return {}


def publish_export(partial: Path, target: Path, calibration: dict[str, Any]) -> Path:
    """Move a finished export from `partial` to `target` atomically (a concurrent export of
    the same key that finished first wins; ours is dropped)."""
    (partial / CALIBRATION_FILE).write_text(json.dumps(calibration, indent=2))
    try:
        os.rename(partial, target)
    except OSError:
        if not (target / "model.xml").is_file():
            raise
        shutil.rmtree(partial, ignore_errors=True)
    return target


def copy_into_version(source: Path, version_folder: Path) -> Path:
    """`<version_folder>/encoder/` holding the export's files (hard links where possible)."""
    target = version_folder / VERSION_ENCODER_DIR
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for item in source.iterdir():
        if not item.is_file():
            continue
        try:
            os.link(item, target / item.name)
        except OSError:  # another file system, or links not allowed
            shutil.copy2(item, target / item.name)
    return target
