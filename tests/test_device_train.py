"""`benchmarks/device_train.py`: what travels to and from a lent GPU machine comes back as the
encoder it was there, within the stated rounding."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.utils.scripts import load_script

pytestmark = pytest.mark.no_sql


@pytest.fixture(scope="module")
def device_train() -> ModuleType:
    return load_script("benchmarks/device_train.py", "device_train")


def moved(weight: torch.Tensor, seed: int) -> torch.Tensor:
    if not weight.is_floating_point():
        return weight
    step = 1e-3 * torch.randn(weight.shape, generator=torch.Generator().manual_seed(seed))
    if weight.dim() == 2:
        step *= 1 + torch.arange(weight.shape[0])[:, None] % 8  # (rows, 1)
    return weight + step


def test_a_packed_encoder_unpacks_to_the_trained_one(
    device_train: ModuleType, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    base = load_file(tiny_encoder_dir / "model.safetensors")
    # the base travels as float16 and is restored as float32 there
    half = tmp_path / "base16"
    shutil.copytree(tiny_encoder_dir, half, ignore=shutil.ignore_patterns("model.safetensors"))
    save_file(
        {k: v.half() if v.is_floating_point() else v for k, v in base.items()},
        half / "model16.safetensors",
    )
    there = tmp_path / "there"
    device_train.restore(half, there)
    restored = load_file(there / "model.safetensors")
    assert set(restored) == set(base)
    assert all(
        torch.equal(restored[k], base[k].half().float())
        for k in base
        if base[k].is_floating_point()
    )
    # "training" there: every weight moves, each row of a matrix by a step of its own size
    trained_dir = tmp_path / "trained"
    shutil.copytree(there, trained_dir)
    trained = {k: moved(v, seed) for seed, (k, v) in enumerate(sorted(restored.items()))}
    save_file(trained, trained_dir / "model.safetensors")
    (trained_dir / "training.json").write_text("{}")
    packed = tmp_path / "packed"
    packed.mkdir()
    device_train.pack(trained_dir, there, packed, "run")
    sizes = sum(p.stat().st_size for p in packed.glob("run_part*.safetensors"))
    floats = sum(v.numel() for v in trained.values() if v.is_floating_point())
    assert sizes < 1.2 * floats  # about one byte a weight
    here = tmp_path / "here"
    device_train.unpack(packed, "run", tiny_encoder_dir, here)
    unpacked = load_file(here / "model.safetensors")
    assert set(unpacked) == set(trained) and (here / "training.json").exists()
    for key, value in trained.items():
        # the reference: trained = restored + difference; here the exact base + the codes
        difference = value.float() - restored[key].float()
        rows = difference.abs().amax(dim=-1, keepdim=True) if value.dim() == 2 else 0.0
        rounding = (base[key].float() - restored[key].float()).abs()
        bound = rounding + (rows / 254 if value.dim() == 2 else 0.0) + 1e-6 * (1 + value.abs())
        assert ((unpacked[key].float() - value.float()).abs() <= bound).all(), key
