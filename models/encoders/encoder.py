"""The encoder protocol every docsim encoder implements, and its input/output records.

An encoder turns texts into float32, L2-normalised vectors on the CPU, and a document's
structure (sentences, paragraphs, sections, token chunks) into vectors for every level.
The structure arrives as plain index lists, so that this layer knows nothing about how the
indexer splits or stores documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: splitting documents (a worker process) needs no torch
    from pathlib import Path

    import torch


@dataclass(frozen=True)
class DocumentInput:
    """One document's units as texts plus the tree that joins them.

    Attributes:
        sentences: the sentence texts, in document order (`N` of them).
        sentence_paragraph: for each sentence, the index of its paragraph.
        paragraph_section: for each paragraph (`P`), the index of its section (`S`).
        chunks: the token-chunk texts (`C`), each inside one section.
        chunk_section: for each chunk, the index of its section.
        chunk_tokens: for each chunk, its number of encoder tokens.
        chunk_sentences: for each chunk, the half-open range of the sentences whose tokens
            it holds (one sentence for a window of a sentence longer than a chunk); empty
            when unknown.
    """

    sentences: Sequence[str]
    sentence_paragraph: Sequence[int]
    paragraph_section: Sequence[int]
    chunks: Sequence[str]
    chunk_section: Sequence[int]
    chunk_tokens: Sequence[int]
    chunk_sentences: Sequence[tuple[int, int]] = ()

    @property
    def n_paragraphs(self) -> int:
        return len(self.paragraph_section)

    @property
    def n_sections(self) -> int:
        return max(self.paragraph_section, default=-1) + 1


@dataclass(frozen=True)
class DocumentVectors:
    """Vectors for every level of one document (float32, L2-normalised, CPU).

    Attributes:
        document: `(d,)`.
        sections: `(S, d)`.
        paragraphs: `(P, d)`.
        sentences: `(N, d)`.
        chunks: `(C, d)`.
        chunk_attention: encoder-specific attention weights (CoLDE), else None.
    """

    document: torch.Tensor
    sections: torch.Tensor
    paragraphs: torch.Tensor
    sentences: torch.Tensor
    chunks: torch.Tensor
    chunk_attention: torch.Tensor | None = None


@runtime_checkable
class Encoder(Protocol):
    """What the indexer and the service need from any encoder."""

    name: str
    dim: int

    @property
    def chunk_capacity(self) -> int:
        """The most content tokens one input may hold (special tokens excluded)."""
        ...

    def identity(self) -> dict[str, Any]:
        """Name, type, config hash and checkpoint sha256: recorded in every index manifest."""
        ...

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Encode texts to a `(len(texts), dim)` float32 tensor of unit vectors."""
        ...

    def token_offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Character spans of each text's content tokens (no special tokens)."""
        ...

    def encode_documents(
        self,
        documents: Sequence[DocumentInput],
        sentence_vectors: Sequence[torch.Tensor] | None = None,
    ) -> list[DocumentVectors]:
        """Vectors for every level of each document; `sentence_vectors` (one `(N, d)` per
        document, from `encode`) are used as they are instead of encoding the sentences
        again."""
        ...


@runtime_checkable
class OpenVinoExportable(Encoder, Protocol):
    """An encoder whose backbone runs on its own OpenVINO export, int8 or float32 (the
    transformer and CoLDE encoders): `indexer.builder.backend` exports it once and moves it
    there."""

    def export_openvino(self, texts: list[str], out_dir: Path, *, int8: bool = True) -> None:
        """Export the backbone into `out_dir`: quantised to int8, calibrated on `texts`
        (`int8`), else in float32 (`texts` only trace the graph)."""
        ...

    def use_openvino(
        self, directory: Path, *, streams: int = 1, shape_cache: int | None = None
    ) -> None:
        """Run the backbone on the export in `directory` from now on, keeping `shape_cache`
        prepared kernels (default: a service's,
        `models.inference.backends.SHAPE_CACHE_CAPACITY`)."""
        ...
