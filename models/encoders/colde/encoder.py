"""CoLDE as an `Encoder`: texts and documents in, unit vectors out.

The wrapper owns the tokenizer (`ChunkTokenizer`), the device, autocast and the inference
backend of the backbone; the model only sees `ChunkBatch`es.

Dimensions: n chunks, H backbone hidden size, S sections, C chunks of a document, d `dim`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from docsim.models.encoders.backbone import load_tokenizer
from docsim.models.encoders.colde.chunks import ChunkTokenizer
from docsim.models.encoders.colde.model import BackboneFn, ColdeModel, ColdeOutput
from docsim.models.encoders.composite import composite_identity
from docsim.models.encoders.encoder import DocumentInput, DocumentVectors
from docsim.models.encoders.pooling import segment_mean
from docsim.models.inference.backends import (
    TORCH,
    OpenVinoBackend,
    openvino_backend,
)
from docsim.models.inference.openvino_export import export_openvino_embeddings
from docsim.models.inference.precision import autocast, autocast_dtype


def normalized(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, dim=-1)


class ColdeEncoder:
    """CoLDE as an `Encoder`. The indexer's token chunks are CoLDE's chunks (the indexer
    packs them to `chunk_capacity` = the model's chunk size); a sentence or paragraph is
    encoded as a one-section document; paragraphs are the mean of their sentences.

    Args:
        model: the CoLDE model; it moves to `device`.
        name: a short name recorded in manifests.
        source_dir: the directory the model was saved in.
        tokenizer: default: the one saved in `source_dir`.
        device: where the model runs; results always come back on the CPU.
        precision: `auto`, `fp32` or `bf16` (autocast).
        max_batch_size: texts per batch in `encode`.
        backend_dir: an int8 OpenVINO export of the backbone to run on (`use_openvino`).
        streams: accepted for the loaders' sake; the backbone runs one stream (see
            `use_openvino`).
    """

    def __init__(
        self,
        model: ColdeModel,
        *,
        name: str,
        source_dir: Path,
        tokenizer: PreTrainedTokenizerBase | None = None,
        device: str | torch.device = "cpu",
        precision: str = "auto",
        max_batch_size: int = 64,
        backend_dir: str | Path | None = None,
        streams: int = 1,
    ) -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        tokenizer = tokenizer if tokenizer is not None else load_tokenizer(source_dir)
        self.chunker = ChunkTokenizer(tokenizer, model.config)
        self.precision = precision
        self.amp_dtype = autocast_dtype(precision, self.device)
        self.name, self.source_dir, self.dim = name, source_dir, model.config.dim
        self.batch = max_batch_size
        self.load_options: dict[str, Any] | None = None  # set by `load_encoder`
        self._identity: dict[str, Any] | None = None
        self.backend: OpenVinoBackend | None = None  # None: the backbone runs on torch
        self.backend_record: dict[str, str] = {"name": TORCH}
        if backend_dir is not None:
            self.use_openvino(Path(backend_dir), streams=streams)

    # --- inference backend ------------------------------------------------------------------
    def use_openvino(
        self, directory: Path, *, streams: int = 1, shape_cache: int | None = None
    ) -> None:
        """Run the backbone on the OpenVINO export in `directory` (from
        `export_openvino`), keeping `shape_cache` prepared kernels (default: a
        service's); the embeddings, chunkwise attention, LSTM and projection stay on torch."""
        # one request at a time here (the head needs each batch before the next): one stream
        # with every thread, as more streams would leave threads idle
        self.backend = openvino_backend(
            self.device, directory, streams=1, shape_cache=shape_cache, precision=self.precision
        )
        self.backend_record = self.backend.record()
        self._identity = None
        if self.load_options is not None:
            self.load_options = {**self.load_options, "backend_dir": str(directory)}

    def export_openvino(self, texts: list[str], out_dir: Path, *, int8: bool = True) -> None:
        """Export the backbone to OpenVINO, int8 calibrated on `texts` fed as `encode` feeds
        them, or float32."""
        all_ids = self.chunker.content_ids(texts)
        order = sorted(range(len(texts)), key=lambda i: len(all_ids[i]))
        samples = []
        with torch.inference_mode():
            for start in range(0, len(order), 16):
                chunks, _, position = self._text_chunks(all_ids, order[start : start + 16])
                batch = self.chunker.batch(chunks, [0] * len(chunks), position).to(self.device)
                embeds = self.model.embed_chunks(batch)  # (n, T, H)
                samples.append(
                    {
                        "inputs_embeds": embeds.float().cpu(),
                        "attention_mask": batch.attention_mask.cpu(),
                    }
                )
        export_openvino_embeddings(self.model.backbone, samples, out_dir, int8=int8)

    def _backbone(self) -> BackboneFn | None:
        backend = self.backend
        if backend is None:
            return None
        return lambda embeds, mask: backend.infer(
            {"inputs_embeds": embeds.float().numpy(), "attention_mask": mask.numpy()}
        )

    def _text_chunks(
        self, all_ids: list[list[int]], part: list[int]
    ) -> tuple[list[list[int]], list[int], list[int]]:
        """The chunks of texts `part` (indices into `all_ids`), each text a one-section
        document: chunk ids, owning text, chunk position."""
        chunks, owner, position = [], [], []
        for i in part:
            for q, piece in enumerate(self.chunker.split(all_ids[i])):
                chunks.append(piece)
                owner.append(i)
                position.append(q)
        return chunks, owner, position

    # --- the Encoder protocol ---------------------------------------------------------------
    @property
    def chunk_capacity(self) -> int:
        return self.chunker.capacity

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            max_tokens = self.model.config.max_tokens
            self._identity = {
                **composite_identity(self.source_dir, self.name, self.dim, max_tokens),
                "backend": dict(self.backend_record),
            }
        return dict(self._identity)

    def token_offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        return self.chunker.offsets(texts)

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Each text as a one-section document: `(n, dim)` unit vectors. Texts are batched
        by token length, so a batch pads little."""
        out = torch.empty(len(texts), self.dim)
        if not texts:
            return out
        all_ids = self.chunker.content_ids(texts)
        order = sorted(range(len(texts)), key=lambda i: len(all_ids[i]))
        with torch.inference_mode(), autocast(self.device, self.amp_dtype):
            for start in range(0, len(order), self.batch):
                part = order[start : start + self.batch]
                chunks, owner, position = self._text_chunks(all_ids, part)
                batch = self.chunker.batch(chunks, [0] * len(chunks), position).to(self.device)
                vectors = self.model.encode_chunks(batch, self._backbone())  # (n, H)
                # the head runs once per group of texts with the same number of chunks
                rows_of: dict[int, list[int]] = {}
                for k, i in enumerate(owner):
                    rows_of.setdefault(i, []).append(k)
                by_count: dict[int, list[int]] = {}
                for i in part:
                    by_count.setdefault(len(rows_of[i]), []).append(i)
                for group in by_count.values():
                    stacked = vectors[torch.tensor([rows_of[i] for i in group])]  # (B, k, H)
                    heads = self.model.lone_sections(stacked)  # (B, d)
                    out[torch.tensor(group)] = normalized(heads.float()).cpu()
        return out

    def encode_documents(
        self,
        documents: Sequence[DocumentInput],
        sentence_vectors: Sequence[torch.Tensor] | None = None,
    ) -> list[DocumentVectors]:
        if sentence_vectors is None:  # every document's sentences at once: fuller batches
            every = self.encode([s for doc in documents for s in doc.sentences])
            sentence_vectors = torch.split(every, [len(doc.sentences) for doc in documents])
        return [
            self._document(doc, sentences)
            for doc, sentences in zip(documents, sentence_vectors, strict=True)
        ]

    def _document(self, doc: DocumentInput, sentences: torch.Tensor) -> DocumentVectors:
        """One document's vectors, its sentences' `(N, d)` given."""
        paragraphs = segment_mean(
            sentences, torch.as_tensor(doc.sentence_paragraph), doc.n_paragraphs
        )  # (P, d)
        capacity = self.chunk_capacity
        ids = [c[:capacity] for c in self.chunker.content_ids(doc.chunks)]
        position, counts = [], [0] * doc.n_sections
        for s in doc.chunk_section:  # chunks come section by section
            position.append(counts[s])
            counts[s] += 1
        batch = self.chunker.batch(ids, list(doc.chunk_section), position).to(self.device)
        with torch.inference_mode(), autocast(self.device, self.amp_dtype):
            encoded: ColdeOutput = self.model(batch, counts, self._backbone())
        section_states = encoded.sections.float().cpu()  # (S, d)
        return DocumentVectors(
            document=normalized(section_states.mean(0)),
            sections=normalized(section_states),
            paragraphs=paragraphs,
            sentences=sentences,
            chunks=normalized(torch.cat(encoded.chunks).float().cpu()),  # (C, d)
            chunk_attention=chunk_attention(encoded.attention, counts),
        )


def chunk_attention(maps: list[torch.Tensor], counts: list[int]) -> torch.Tensor:
    """The `(C, C)` matrix of a document's chunkwise attention: row block p holds section
    p's `(C_p, C_q)` weights over the section q it keyed on, zeros elsewhere."""
    n_chunks, n = sum(counts), len(counts)
    attention = torch.zeros(n_chunks, n_chunks)  # (C, C)
    starts = [sum(counts[:s]) for s in range(n)]
    for p, weights in enumerate(maps):
        q = p + 1 if p + 1 < n else p - 1 if n > 1 else p
        attention[starts[p] : starts[p] + counts[p], starts[q] : starts[q] + counts[q]] = (
            weights.float().cpu()
        )
    return attention
