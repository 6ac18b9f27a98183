"""Encoders and the pure tensor math behind docsim (no SQL, HTTP or file layout here), in four
rooms: `encoders` (the protocol, the encoders and what builds them), `inference` (what runs the
forward passes), `training` (the loop, its data and losses) and `kernels` (the search maths);
`errors` is the leaf of errors every layer imports."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from docsim.models.encoders.encoder import DocumentInput, DocumentVectors, Encoder
from docsim.models.encoders.registry import DEFAULT_ENCODER

if TYPE_CHECKING:
    from docsim.models.encoders.loading import load_encoder

__all__ = ["DEFAULT_ENCODER", "DocumentInput", "DocumentVectors", "Encoder", "load_encoder"]


def __getattr__(name: str) -> Any:
    """`load_encoder` is imported on first use: it imports the model code and transformers
    (seconds), which the many importers of `models` that only score tensors do not need (Ray
    shard actors, the CLI's commands that load no encoder)."""
    if name == "load_encoder":
        from docsim.models.encoders.loading import load_encoder

        return load_encoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
