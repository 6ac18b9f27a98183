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


def lstm(module: torch.nn.LSTM, inputs: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """`module(inputs)`, in fp32 where bf16 autocast is on but the CPU has no native bf16.

    Autocast runs an LSTM in bf16, and oneDNN has no bf16 LSTM kernel for CPUs without
    AVX512-BF16 or AMX (it fails to create the primitive: AVX2-only CPUs, or any CPU under
    `ONEDNN_MAX_CPU_ISA=AVX2`). There the LSTM alone runs in fp32, its output cast back to
    the input's dtype; the rest of the forward pass stays under bf16 autocast.
    """
    if (
        inputs.device.type != "cpu"
        or not torch.is_autocast_enabled("cpu")
        or bf16_supported(inputs.device)
    ):
        return module(inputs)  # type: ignore[no-any-return]
    with torch.autocast(device_type="cpu", enabled=False):
        states, hidden = module(inputs.float())
    return states.to(inputs.dtype), hidden


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for a precision setting, or None for plain fp32.

    `auto` picks bf16 where the hardware supports it natively, since emulated bf16 is slower
    than fp32 (torch's oneDNN decides, so `ONEDNN_MAX_CPU_ISA=AVX2` turns it off). An explicit
    `bf16` runs where the CPU has no native bf16 too, emulated; the operations oneDNN cannot
    run there (an LSTM: `lstm`) run in fp32.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}. Valid precisions are: {PRECISIONS}.")
    if precision == "fp32":
        return None
    if precision == "bf16" or bf16_supported(device):
        return torch.bfloat16
    return None


def openvino_precision(precision: str) -> str:
    """OpenVINO's CPU inference precision hint for a precision setting: `bf16` where torch's
    oneDNN runs bf16 natively and the setting allows it, else `f32`.

    Left to itself OpenVINO picks bf16 from the CPU's flags, which `ONEDNN_MAX_CPU_ISA` does
    not change although it caps OpenVINO's kernels too: a process capped to AVX2 on a bf16 CPU
    then fails to compile a model. Both runtimes follow one reading of the CPU here.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}. Valid precisions are: {PRECISIONS}.")
    return "bf16" if precision != "fp32" and bf16_supported(torch.device("cpu")) else "f32"


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
