"""Choosing the compute precision of encoder forward passes."""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path
from typing import Any, Literal

import torch

Precision = Literal["auto", "fp32", "bf16"]
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16")
# CPU flags of native int8 products: AVX-512 VNNI, AVX-VNNI (256-bit), AMX
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
# oneDNN's `ONEDNN_MAX_CPU_ISA` values below every ISA with VNNI
NO_VNNI_ISAS = frozenset({"SSE41", "AVX", "AVX2", "AVX512_CORE"})


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


def int8_native() -> bool:
    """Whether the CPU multiplies int8 natively (VNNI or AMX) and oneDNN may use it: not under
    an `ONEDNN_MAX_CPU_ISA` below VNNI, which caps OpenVINO's oneDNN too.

    Without VNNI, OpenVINO's int8 fully connected layers run a generic gemm slower than its
    float32 brgemm (measured under the AVX2 cap: 0.78x float32 OpenVINO), so int8 pays only
    here. The flags come from `/proc/cpuinfo` (Linux; elsewhere: none, float32)."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    return cap not in NO_VNNI_ISAS and bool(INT8_FLAGS & cpu_flags())


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags, from the first processor of `/proc/cpuinfo`."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return frozenset()
    for line in lines:
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


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
