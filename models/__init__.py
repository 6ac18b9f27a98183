"""Encoders and the pure tensor math behind docsim (no SQL, HTTP or file layout here)."""

from __future__ import annotations

from models.encoder import DocumentInput, DocumentVectors, Encoder
from models.loading import load_encoder
from models.registry import DEFAULT_ENCODER

__all__ = ["DEFAULT_ENCODER", "DocumentInput", "DocumentVectors", "Encoder", "load_encoder"]
