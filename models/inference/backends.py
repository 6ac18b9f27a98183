"""Inference backends: what runs a transformer's forward pass for `TransformerEncoder`.

- `torch`: the PyTorch module itself, under bf16 autocast where the hardware has it.
- `openvino-int8`: the same module exported to OpenVINO and statically quantised to int8 by
  NNCF (`models.inference.openvino_export`), run by OpenVINO's CPU plugin with its int8 kernels
  (VNNI or AMX), non-quantised operations in bf16 only where torch's oneDNN runs bf16 natively
  (`models.inference.precision.openvino_precision`), f32 elsewhere.
- `openvino-fp32`: the module exported to OpenVINO unquantised, for CPUs without native int8
  products (`models.inference.precision.int8_native`): there OpenVINO's int8 fully connected layers
  fall back to a generic kernel slower than its float32 one.

A backend takes padded batches and yields each with its last hidden states; the encoder pools.
OpenVINO keeps two requests in flight, so that while one batch runs the caller pads the next
and pools the previous one. One inference stream with every thread is the default: as fast
as two streams for bulk encoding on this 2-core machine (measured), and a single request (a
short query) gets every thread.

Dimensions: B batch, T tokens, H hidden size.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata
import importlib.util
import logging
import queue
import sys
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from docsim.models.errors import BackendUnavailableError
from docsim.models.inference.pacing import before_batch
from docsim.models.inference.precision import autocast, int8_native, openvino_precision, to_device

logger = logging.getLogger(__name__)

TORCH = "torch"
OPENVINO_INT8 = "openvino-int8"
OPENVINO_FP32 = "openvino-fp32"
OPENVINO_BACKENDS: tuple[str, ...] = (OPENVINO_INT8, OPENVINO_FP32)
BACKENDS: tuple[str, ...] = (TORCH, *OPENVINO_BACKENDS)
OPENVINO_FILES = ("model.xml", "model.bin")


class PaddedBatch(Protocol):
    @property
    def input_ids(self) -> torch.Tensor:
        """`(B, T)` int64."""
        ...

    @property
    def attention_mask(self) -> torch.Tensor:
        """`(B, T)` int64."""
        ...


BatchT = TypeVar("BatchT", bound=PaddedBatch)


class ForwardBackend(Protocol):
    name: str

    def hidden_states(self, batches: Iterable[BatchT]) -> Iterator[tuple[BatchT, torch.Tensor]]:
        """Each batch, in order, with its `(B, T, H)` last hidden states."""
        ...


class TorchBackend:
    """The PyTorch module on its device, under autocast to `amp_dtype` (None: fp32)."""

    name = TORCH

    def __init__(
        self, model: torch.nn.Module, device: torch.device, amp_dtype: torch.dtype | None
    ) -> None:
        self.model = model
        self.device = device
        self.amp_dtype = amp_dtype

    def hidden_states(self, batches: Iterable[BatchT]) -> Iterator[tuple[BatchT, torch.Tensor]]:
        for batch in batches:
            before_batch(len(batch.input_ids))
            input_ids = to_device(batch.input_ids, self.device)
            mask = to_device(batch.attention_mask, self.device)
            with torch.inference_mode(), autocast(self.device, self.amp_dtype):
                hidden = self.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
            yield batch, hidden  # (B, T, H) on the device


# OpenVINO (at import and in its converter) and NNCF send usage events to Google Analytics
# unless the machine's user opted out, each event from a forked copy of the whole process: a
# fork of a process that holds a model costs about a second, and then waits out its timeout
# where there is no network, as on most servers. docsim indexes private collections and sends
# nothing: it imports OpenVINO as if the optional `openvino-telemetry` package were absent, a
# case both handle (the converter with its own stub, NNCF with a no-op), unless the process
# imported that package before (its own choice, then).
TELEMETRY_PACKAGE = "openvino_telemetry"


def import_openvino() -> Any:
    sys.modules.setdefault(TELEMETRY_PACKAGE, None)  # type: ignore[arg-type]
    try:
        import openvino
    except ImportError as error:
        raise BackendUnavailableError(
            "the OpenVINO backends need OpenVINO and NNCF: pip install openvino nncf"
        ) from error
    return openvino


def native_openvino_backend() -> str:
    """The OpenVINO backend this CPU runs fastest: int8 where its int8 products are native
    (VNNI or AMX), float32 elsewhere."""
    return OPENVINO_INT8 if int8_native() else OPENVINO_FP32


def is_quantized(directory: Path) -> bool:
    """Whether the OpenVINO model in `directory` is quantised (NNCF's FakeQuantize nodes)."""
    return b'type="FakeQuantize"' in (directory / "model.xml").read_bytes()


def openvino_available() -> bool:
    """Whether OpenVINO and NNCF are installed; found, not imported (NNCF takes half a
    second to import, and serving an exported model never needs it)."""
    return all(importlib.util.find_spec(name) is not None for name in ("openvino", "nncf"))


def runtime_versions() -> dict[str, str]:
    """The versions an exported model depends on (part of its cache key), from the installed
    distributions' metadata: nothing is imported."""
    openvino_version = importlib.metadata.version("openvino")
    return {"openvino": openvino_version.split("-")[0], "nncf": importlib.metadata.version("nncf")}


def files_sha256(directory: Path) -> str:
    """One sha256 over an exported model's files, in a fixed order."""
    digest = hashlib.sha256()
    for name in OPENVINO_FILES:
        digest.update(name.encode() + b"\0")
        with (directory / name).open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


# OpenVINO's CPU plugin keeps the kernels it prepared for each operation and input shape, 5,000
# entries by default. Batches of varied lengths (late chunking's chunks, queries) keep adding
# shapes, so a build's memory grew with the corpus: with a one-layer model of the default's
# width, the encode stage's peak went from 1.44 GiB for AILA to 1.79 GiB for three times AILA
# (1.38 GiB with no cache at all, but query encoding then took 15% longer). A bounded cache
# keeps the memory flat (`benchmarks/build_memory.py`; docs/architecture.md, "Memory of a
# build"). A build keeps 256 entries: the six-layer model's AILA build peaked at 2.05 GiB
# (encode stage 1.71), three times AILA at 1.95 (1.72), and at 1,024 entries the AILA build
# peaked at 2.16 (1.94) for no faster encoding. A service keeps 1,024: the six-layer model fills
# 256 entries with a few dozen shapes, and the 20 AILA development queries' chunks, in batches
# cut at a quarter of padding (`models.inference.batching`), took 44.0 ms an inference on average at
# 256 against 36.9 at 1,024 and at 5,000 (`benchmarks/query_encoding.py`).
SHAPE_CACHE_CAPACITY = 1024
BUILD_SHAPE_CACHE_CAPACITY = 256


# Compiled models by (files' sha256, streams, threads, shape cache, precision), for the life
# of the process: a service that swaps to a version of the same export reuses it, and none is
# ever destroyed while the process runs. (Destroying one in a running service, then receiving
# SIGTERM, crashed the process with SIGSEGV before Python's handler ran: OpenVINO 2026.4.)
_COMPILED: dict[tuple[str, int, int, int, str], Any] = {}
_COMPILED_LOCK = threading.Lock()


def openvino_backend(
    device: torch.device,
    directory: Path,
    *,
    streams: int = 1,
    shape_cache: int | None = None,
    precision: str = "auto",
) -> OpenVinoBackend:
    """The OpenVINO backend for an encoder on `device`, from the export in `directory`, with
    `shape_cache` prepared kernels kept (default: a service's, `SHAPE_CACHE_CAPACITY`).

    Raises:
        BackendUnavailableError: `device` is not the CPU (OpenVINO runs there), OpenVINO is
            not installed, or `directory` holds no export.
    """
    if device.type != "cpu":
        raise BackendUnavailableError(
            f"the OpenVINO backends run on the CPU, not {device} (use the {TORCH} backend)"
        )
    return OpenVinoBackend(
        directory,
        streams=streams,
        shape_cache=shape_cache or SHAPE_CACHE_CAPACITY,
        precision=openvino_precision(precision),
    )


class OpenVinoBackend:
    """An exported OpenVINO model compiled for the CPU, at least two requests in flight.

    Args:
        directory: holds `model.xml` and `model.bin` (from `export_openvino`).
        streams: inference streams; the CPU's threads are shared among them.
        threads: CPU threads for inference; default: torch's thread count.
        shape_cache: prepared kernels kept (one an operation and an input shape).
        precision: OpenVINO's inference precision hint, `f32` or `bf16`.
    """

    def __init__(
        self,
        directory: Path,
        *,
        streams: int = 1,
        threads: int | None = None,
        shape_cache: int = SHAPE_CACHE_CAPACITY,
        precision: str = "f32",
    ) -> None:
        ov = import_openvino()
        missing = [n for n in OPENVINO_FILES if not (directory / n).is_file()]
        if missing:
            raise BackendUnavailableError(
                f"{str(directory)!r} holds no exported model (missing {', '.join(missing)})"
            )
        self.directory = directory
        self.name = OPENVINO_INT8 if is_quantized(directory) else OPENVINO_FP32
        self.streams = max(1, streams)
        self.shape_cache = shape_cache
        threads = threads or torch.get_num_threads()
        self.sha256 = files_sha256(directory)
        key = (self.sha256, self.streams, threads, shape_cache, precision)
        with _COMPILED_LOCK:
            if key not in _COMPILED:
                core = ov.Core()
                _COMPILED[key] = core.compile_model(
                    core.read_model(directory / "model.xml"),
                    "CPU",
                    {
                        "PERFORMANCE_HINT": "THROUGHPUT",
                        "NUM_STREAMS": self.streams,
                        "INFERENCE_NUM_THREADS": threads,
                        "CPU_RUNTIME_CACHE_CAPACITY": str(shape_cache),
                        "INFERENCE_PRECISION_HINT": precision,
                    },
                )
            self.compiled = _COMPILED[key]
        # requests are not shared between calls (a service encodes from several threads):
        # each call takes its own from this pool, or makes new ones, and gives them back
        self._pool: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def __deepcopy__(self, memo: dict[int, Any]) -> OpenVinoBackend:
        """A copy (of an encoder) shares the compiled model, which is read-only and safe to
        share between threads, and gets requests of its own."""
        clone = copy.copy(self)
        clone._pool = queue.SimpleQueue()
        return clone

    def record(self) -> dict[str, str]:
        """What an encoder's identity says of this backend: the export's sha256 and the
        runtime's versions."""
        return {"name": self.name, "sha256": self.sha256, **runtime_versions()}

    def infer(self, inputs: dict[str, np.ndarray]) -> torch.Tensor:
        """One synchronous call: the model's first output for `inputs`."""
        request = self._request()
        try:
            request.infer(inputs)
            return torch.from_numpy(request.get_output_tensor(0).data.copy())
        finally:
            self._pool.put(request)

    def _request(self) -> Any:
        try:
            return self._pool.get_nowait()
        except queue.Empty:
            return self.compiled.create_infer_request()

    def hidden_states(self, batches: Iterable[BatchT]) -> Iterator[tuple[BatchT, torch.Tensor]]:
        idle = [self._request() for _ in range(max(2, self.streams))]
        running: deque[tuple[Any, BatchT]] = deque()

        def finish() -> tuple[BatchT, torch.Tensor]:
            request, batch = running.popleft()
            request.wait()
            hidden = torch.from_numpy(request.get_output_tensor(0).data.copy())  # (B, T, H)
            idle.append(request)
            return batch, hidden

        try:
            for batch in batches:
                if not idle:
                    yield finish()
                before_batch(len(batch.input_ids))
                request = idle.pop()
                request.start_async(
                    {
                        "input_ids": batch.input_ids.numpy(),
                        "attention_mask": batch.attention_mask.numpy(),
                    }
                )
                running.append((request, batch))
            while running:
                yield finish()
        finally:  # a caller that stops early leaves no request running on its buffers
            for request, _ in running:
                request.wait()
                idle.append(request)
            for request in idle:
                self._pool.put(request)
