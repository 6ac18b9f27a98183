"""Exporting an encoder to OpenVINO: in float32, or quantised to int8 by NNCF's post-training
quantisation (weights per channel, activations per tensor from calibration statistics), for
CPUs whose int8 products are native (`models.inference.precision.int8_native`). Calibration batches
come from the caller (the corpus being indexed), never from a data set fetched from a hub; either
export runs on `models.inference.backends.OpenVinoBackend`.

Dimensions: B batch, T tokens, H hidden size.
"""

from __future__ import annotations

import contextlib
import copy
import io
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from docsim.models.inference.backends import PaddedBatch, import_openvino


class LastHiddenState(torch.nn.Module):
    """(input_ids, attention_mask) -> last_hidden_state: the graph OpenVINO exports."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden: torch.Tensor = self.model(
            input_ids=input_ids, attention_mask=attention_mask
        ).last_hidden_state
        return hidden


class _LastHiddenFromEmbeddings(torch.nn.Module):
    """(inputs_embeds, attention_mask) -> last_hidden_state."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden: torch.Tensor = self.model(
            inputs_embeds=inputs_embeds, attention_mask=attention_mask
        ).last_hidden_state
        return hidden


def export_openvino(
    model: torch.nn.Module,
    samples: Sequence[PaddedBatch],
    out_dir: Path,
    *,
    int8: bool = True,
) -> None:
    """Export `model` (a Hugging Face encoder) to OpenVINO and save `model.xml`/`model.bin`
    in `out_dir`: quantised to int8 with NNCF's post-training quantisation calibrated on
    `samples` (`int8`), else in float32 (`samples[0]` only traces the graph)."""
    feeds = [{"input_ids": b.input_ids, "attention_mask": b.attention_mask} for b in samples]
    inputs = [("input_ids", 2), ("attention_mask", 2)]
    _export(LastHiddenState(model), feeds, out_dir, inputs, int8=int8)


def export_openvino_embeddings(
    model: torch.nn.Module,
    samples: Sequence[dict[str, torch.Tensor]],
    out_dir: Path,
    *,
    int8: bool = True,
) -> None:
    """`export_openvino` for a backbone fed token embeddings (`inputs_embeds`, `(B, T, H)`,
    with `attention_mask`): for models that add embeddings of their own (CoLDE)."""
    inputs = [("inputs_embeds", 3), ("attention_mask", 2)]
    _export(_LastHiddenFromEmbeddings(model), list(samples), out_dir, inputs, int8=int8)


def _export(
    wrapped: torch.nn.Module,
    samples: list[dict[str, torch.Tensor]],
    out_dir: Path,
    inputs: list[tuple[str, int]],
    *,
    int8: bool,
) -> None:
    """Trace `wrapped` (on a deep copy: tracing patches the module it is given in place) with
    dynamic shapes, quantise on `samples` (`int8`), save to `out_dir`."""
    if not samples:
        raise ValueError("an OpenVINO export needs at least one batch of the corpus's text")
    ov = import_openvino()
    wrapped = copy.deepcopy(wrapped).float().eval()
    types = {2: ov.Type.i64, 3: ov.Type.f32}
    # tracing warns about every data-dependent branch in transformers' masking code: these
    # are the shapes' branches, which the dynamic-shape export keeps as graph operations
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        exported = ov.convert_model(
            wrapped,
            example_input={name: samples[0][name] for name, _ in inputs},
            input=[
                (name, [-1, -1] if rank == 2 else [-1, -1, samples[0][name].shape[-1]],
                 types[rank])
                for name, rank in inputs
            ],
        )  # fmt: skip

    if int8:
        exported = _quantized(exported, samples, inputs)
    out_dir.mkdir(parents=True, exist_ok=True)
    ov.save_model(exported, out_dir / "model.xml", compress_to_fp16=False)


def _quantized(
    exported: Any, samples: list[dict[str, torch.Tensor]], inputs: list[tuple[str, int]]
) -> Any:
    """The OpenVINO model `exported` quantised by NNCF, calibrated on `samples`."""
    import nncf

    def feed(sample: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        return {name: sample[name].float().numpy() if rank == 3 else sample[name].numpy()
                for name, rank in inputs}  # fmt: skip

    # NNCF draws its own progress bars on stdout (rich): kept off the caller's output
    with contextlib.redirect_stdout(io.StringIO()):
        return nncf.quantize(
            exported,
            nncf.Dataset(samples, feed),
            model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(samples),
        )
