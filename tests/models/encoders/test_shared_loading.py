"""`load_shared_encoder`: one loaded copy per process for the same files and options, a new
load when the files change or nothing holds the old copy any more."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import torch

from docsim.models.encoders.loading import load_encoder, load_shared_encoder


def test_the_same_files_and_options_give_the_same_encoder(tiny_encoder_dir: Path) -> None:
    first = load_shared_encoder(tiny_encoder_dir, device=torch.device("cpu"), precision="fp32")
    again = load_shared_encoder(str(tiny_encoder_dir), precision="fp32", device=torch.device("cpu"))
    assert again is first
    other = load_shared_encoder(tiny_encoder_dir, device=torch.device("cpu"), precision="bf16")
    assert other is not first
    assert load_encoder(tiny_encoder_dir, precision="fp32") is not first  # never shared


def test_changed_files_are_loaded_again(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    directory = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, directory)
    first = load_shared_encoder(directory, precision="fp32")
    config = directory / "config.json"
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # saved again
    changed = load_shared_encoder(directory, precision="fp32")
    assert changed is not first
    assert load_shared_encoder(directory, precision="fp32") is changed


def test_an_encoder_nothing_holds_is_released(tiny_encoder_dir: Path) -> None:
    first = load_shared_encoder(tiny_encoder_dir, precision="fp32", max_batch_size=3)
    first_id = id(first)
    first.marker = "first"  # type: ignore[attr-defined]
    del first
    gc.collect()
    again = load_shared_encoder(tiny_encoder_dir, precision="fp32", max_batch_size=3)
    assert not hasattr(again, "marker"), f"the released encoder {first_id} was served again"
