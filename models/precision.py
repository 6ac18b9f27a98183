"""Choosing the compute precision of encoder forward passes."""

from __future__ import annotations

import contextlib
from typing import Any, Literal

import torch

Precision = Literal["auto", "fp32", "bf16"]
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16")


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 matrix products run natively on `device` (AVX512-BF16/AMX, or CUDA)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        # torch leaves `mkldnn.is_available` unannotated (an untyped call only where the strict
        # flags apply: `docsim.models`, not `mypy models` alone)
        mkldnn = torch.backends.mkldnn.is_available()  # type: ignore[no-untyped-call, unused-ignore]
        return bool(mkldnn and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for a precision setting, or None for plain fp32.

    `auto` picks bf16 where the hardware supports it natively, since emulated bf16 is slower
    than fp32.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}. Valid precisions are: {PRECISIONS}.")
    if precision == "fp32":
        return None
    if precision == "bf16" or bf16_supported(device):
        return torch.bfloat16
    return None


def resolve_device(device: str) -> torch.device:
    """`auto` is the first CUDA device when there is one, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def autocast(
    device: torch.device, dtype: torch.dtype | None
) -> contextlib.AbstractContextManager[Any]:
    """Autocast to `dtype` on `device`'s type, or nothing for plain fp32 (`dtype` None)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` on `device`. From the host to a GPU the copy goes through pinned memory and
    does not wait: the host goes on preparing the next batch while the GPU works (a plain
    `.to` waits for the GPU to finish everything queued before it). Pinned blocks come from
    torch's caching host allocator, which keeps each one until its copy is done."""
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
