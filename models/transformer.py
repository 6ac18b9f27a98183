"""A Hugging Face transformer with mean pooling: the default encoder and any local HF model.

Inference only: tokenise everything once, sort by length, cut into batches under a token
budget, run the forward pass on the encoder's backend (`models.inference`: PyTorch under bf16
autocast where supported, or the int8 OpenVINO export of the same model), mean-pool,
L2-normalise and put rows back in input order.

Dimensions: B batch, T tokens, H hidden size, N texts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models.encoder import DocumentInput, DocumentVectors
from models.inference import (
    OPENVINO_INT8,
    TORCH,
    BackendUnavailableError,
    ForwardBackend,
    OpenVinoBackend,
    TorchBackend,
    export_openvino_int8,
)
from models.pooling import mean_pool, segment_mean
from models.precision import autocast, autocast_dtype

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class Batch:
    """One padded batch: `rows` are positions in the caller's input list."""

    rows: np.ndarray  # (B,) int64
    input_ids: torch.Tensor  # (B, T) int64
    attention_mask: torch.Tensor  # (B, T) int64


def sha256_file(path: Path, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


class TransformerEncoder:
    """A transformer backbone + mean (or CLS) pooling, loaded from a local directory.

    Args:
        model: the backbone; its forward returns `last_hidden_state`.
        tokenizer: a fast tokenizer (offsets are needed for chunking).
        name: a short name recorded in manifests.
        max_length: the most tokens one input may hold, special tokens included.
        source_dir: the directory the weights came from (for the checkpoint hash).
        pooling: `mean` or `cls`.
        device: where the forward pass runs; results always come back on the CPU.
        precision: `auto`, `fp32` or `bf16` (autocast).
        batch_tokens: padded tokens per batch (batch size x longest input).
        max_batch_size: cap on inputs per batch.
        head: an optional projection after pooling.
        source: how a loader finds the encoder again, recorded in manifests (a built-in's name,
            such as `minilm`); default: `source_dir`.
        chunk_vectors: `encode` (each chunk through the model) or `sentences` (one pass: a
            chunk is the token-weighted mean of its sentences' pooled token states).
        display_name: what answers report (`all-MiniLM-L6-v2`); default: `name`.
    """

    POOLING_MODES = ("mean", "cls")
    CHUNK_VECTORS = ("encode", "sentences")

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        name: str,
        max_length: int,
        source_dir: Path | None = None,
        pooling: str = "mean",
        device: str | torch.device = "cpu",
        precision: str = "auto",
        batch_tokens: int = 2048,
        max_batch_size: int = 256,
        head: torch.nn.Module | None = None,
        source: str | None = None,
        display_name: str | None = None,
        chunk_vectors: str = "encode",
    ) -> None:
        if chunk_vectors not in self.CHUNK_VECTORS or (
            chunk_vectors == "sentences" and pooling != "mean"
        ):
            raise ValueError(
                f"Invalid chunk_vectors {chunk_vectors!r} for {pooling} pooling: `encode`, or "
                "`sentences` with mean pooling."
            )
        if pooling not in self.POOLING_MODES:
            raise ValueError(
                f"Invalid pooling mode {pooling!r}. Valid pooling modes are: {self.POOLING_MODES}."
            )
        if not tokenizer.is_fast:
            raise ValueError("TransformerEncoder needs a fast tokenizer (character offsets).")
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.name = name
        self.max_length = max_length
        self.source_dir = source_dir
        self.source = source  # how a loader finds it again (a built-in's name); default: its dir
        self.display_name = display_name or name
        self.pooling = pooling
        self.chunk_vectors = chunk_vectors
        self.precision = precision
        self.amp_dtype = autocast_dtype(precision, self.device)
        self.batch_tokens = batch_tokens
        self.max_batch_size = max_batch_size
        self.head = head.to(self.device).eval() if head is not None else None
        self.dim = int(head.out_features if head is not None else model.config.hidden_size)
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._identity: dict[str, Any] | None = None
        self.backend: ForwardBackend = TorchBackend(self.model, self.device, self.amp_dtype)
        self.backend_record: dict[str, str] = {"name": TORCH}

    @classmethod
    def from_directory(
        cls,
        path: Path,
        *,
        name: str | None = None,
        backend_dir: str | Path | None = None,
        streams: int = 1,
        **options: Any,
    ) -> TransformerEncoder:
        """Load a local Hugging Face model directory (never touches a model hub); with
        `backend_dir`, on the OpenVINO int8 model exported there (`use_openvino`)."""
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, use_fast=True)
        model = AutoModel.from_pretrained(path, local_files_only=True)
        max_length = _max_length(path, tokenizer, model)
        pooling = _pooling_mode(path)
        encoder = cls(
            model,
            tokenizer,
            name=name or path.name,
            max_length=max_length,
            source_dir=path,
            pooling=pooling,
            **options,
        )
        if backend_dir is not None:
            encoder.use_openvino(Path(backend_dir), streams=streams)
        return encoder

    # --- identity -------------------------------------------------------------------------
    @property
    def chunk_capacity(self) -> int:
        return self.max_length - self.tokenizer.num_special_tokens_to_add(pair=False)

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            config = self.model.config.to_dict()
            config.pop("transformers_version", None)
            config.pop("_name_or_path", None)
            described = {"config": config, "pooling": self.pooling, "max_length": self.max_length}
            if self.chunk_vectors != "encode":  # hashes of earlier indexes stay as they were
                described["chunk_vectors"] = self.chunk_vectors
            config_blob = json.dumps(described, sort_keys=True, default=str)
            weights = next(
                (
                    self.source_dir / f
                    for f in WEIGHT_FILES
                    if self.source_dir is not None and (self.source_dir / f).exists()
                ),
                None,
            )
            self._identity = {
                "name": self.name,
                "type": getattr(self.model.config, "docsim_type", None) or "transformer",
                "architecture": config.get("model_type"),
                "dim": self.dim,
                "max_length": self.max_length,
                "pooling": self.pooling,
                "config_hash": hashlib.sha256(config_blob.encode()).hexdigest(),
                "checkpoint_sha256": sha256_file(weights) if weights else None,
                "source": self.source or (str(self.source_dir) if self.source_dir else None),
                "display_name": self.display_name,
                "backend": dict(self.backend_record),
                "chunk_vectors": self.chunk_vectors,
            }
        return dict(self._identity)

    # --- tokens -----------------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids with special tokens, truncated to `max_length`."""
        encoded = self.tokenizer(
            list(texts),
            truncation=True,
            max_length=self.max_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        return encoded["input_ids"]

    def token_offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        if not texts:
            return []
        encoded = self.tokenizer(
            list(texts),
            add_special_tokens=False,
            return_offsets_mapping=True,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        return [[(int(a), int(b)) for a, b in spans] for spans in encoded["offset_mapping"]]

    def plan_batches(self, token_ids: Sequence[Sequence[int]]) -> Iterator[Batch]:
        """Length-sorted, padded batches whose padded size stays under the token budget."""
        lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.int64, count=len(token_ids))
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(order):
            longest = int(lengths[order[start]])  # sorted descending: the first is the longest
            size = max(1, min(self.max_batch_size, self.batch_tokens // max(longest, 1)))
            rows = order[start : start + size]
            input_ids = torch.full((len(rows), longest), self._pad_id, dtype=torch.long)  # (B, T)
            attention_mask = torch.zeros((len(rows), longest), dtype=torch.long)  # (B, T)
            for i, row in enumerate(rows):
                ids = token_ids[row]
                input_ids[i, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
                attention_mask[i, : len(ids)] = 1
            yield Batch(rows=rows, input_ids=input_ids, attention_mask=attention_mask)
            start += size

    # --- vectors ----------------------------------------------------------------------------
    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.device, self.amp_dtype)

    def export_openvino_int8(self, texts: list[str], out_dir: Path) -> None:
        """Export the backbone to int8 (`models.inference`), calibrated on `texts` batched as
        `encode` batches them."""
        export_openvino_int8(self.model, list(self.plan_batches(self.tokenize(texts))), out_dir)

    def use_openvino(self, directory: Path, *, streams: int = 1) -> None:
        """Run the forward pass on the int8 OpenVINO model exported into `directory` (see
        `models.inference.export_openvino_int8`); identity and load options record it, so
        that manifests name the backend and another process loads the same one. A head
        (projection after pooling) stays on torch."""
        if self.device.type != "cpu":
            raise BackendUnavailableError(
                f"the {OPENVINO_INT8} backend runs on the CPU, not {self.device} "
                f"(use the {TORCH} backend)"
            )
        self.backend = OpenVinoBackend(directory, streams=streams)
        self.backend_record = self.backend.record()
        self._identity = None
        if hasattr(self, "load_options"):  # set by `load_encoder`
            self.load_options = {**self.load_options, "backend_dir": str(directory)}

    def _pooled(self, batch: Batch, hidden: torch.Tensor) -> torch.Tensor:
        """Pooled, normalised vectors of one batch from its `(B, T, H)` token states:
        `(B, dim)` float32 on the CPU."""
        with torch.inference_mode():
            if self.pooling == "mean":
                pooled = mean_pool(hidden, batch.attention_mask.to(hidden.device))  # (B, H)
            else:
                pooled = hidden[:, 0].to(torch.float32)  # (B, H)
        return self._project(pooled)

    def _sentences_and_pooled_chunks(
        self, documents: Sequence[DocumentInput]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One forward pass over the sentences: their vectors `(ΣN, d)`, and each chunk's
        vector `(ΣC, d)` as the token-weighted mean of its sentences' mean token states."""
        token_ids = self.tokenize([s for doc in documents for s in doc.sentences])
        means = torch.empty((len(token_ids), self.model.config.hidden_size))  # (ΣN, H)
        counts = torch.empty(len(token_ids))  # (ΣN,) tokens, special tokens included
        for batch, hidden in self.backend.hidden_states(self.plan_batches(token_ids)):
            rows = torch.from_numpy(batch.rows)
            means[rows] = mean_pool(hidden, batch.attention_mask.to(hidden.device)).cpu()
            counts[rows] = batch.attention_mask.sum(dim=1).to(torch.float32)
        members, owners, at = [], [], 0  # (sentence, chunk) pairs
        chunk_at = 0
        for doc in documents:
            for c, (first, last) in enumerate(doc.chunk_sentences):
                members.extend(range(at + first, at + last))
                owners.extend([chunk_at + c] * (last - first))
            at += len(doc.sentences)
            chunk_at += len(doc.chunks)
        member = torch.as_tensor(members, dtype=torch.long)
        owner = torch.as_tensor(owners, dtype=torch.long)
        summed = torch.zeros((chunk_at, means.shape[1]))  # (ΣC, H)
        summed.index_add_(0, owner, means[member] * counts[member, None])
        totals = torch.zeros(chunk_at).index_add_(0, owner, counts[member])  # (ΣC,)
        pooled = summed / totals.clamp(min=1.0)[:, None]
        return self._project(means), self._project(pooled)

    def _project(self, pooled: torch.Tensor) -> torch.Tensor:
        """The head (if any) and L2 normalisation of pooled states `(n, H)`: `(n, d)`."""
        with torch.inference_mode():
            if self.head is not None:
                with self._autocast():
                    pooled = self.head(pooled.to(self.device)).to(torch.float32)
            return F.normalize(pooled, dim=-1).cpu()

    def encode_token_ids(self, token_ids: Sequence[Sequence[int]]) -> torch.Tensor:
        out = torch.empty((len(token_ids), self.dim), dtype=torch.float32)  # (N, d)
        # batches are padded lazily: the next one is built while the backend runs this one
        for batch, hidden in self.backend.hidden_states(self.plan_batches(token_ids)):
            out[torch.from_numpy(batch.rows)] = self._pooled(batch, hidden)
        return out

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        if len(texts) == 0:
            return torch.empty((0, self.dim), dtype=torch.float32)
        return self.encode_token_ids(self.tokenize(texts))

    def encode_documents(
        self,
        documents: Sequence[DocumentInput],
        sentence_vectors: Sequence[torch.Tensor] | None = None,
    ) -> list[DocumentVectors]:
        """Encode sentences and chunks of all documents in one pass each, then pool.

        Paragraph vectors are the mean of their sentences' vectors; section and document
        vectors are the token-weighted mean of their chunks' vectors (chunks cover the whole
        text without truncation, sentences may be truncated at `max_length`).

        With `chunk_vectors="sentences"` the chunks are not encoded: a chunk's vector is the
        token-weighted mean of the pooled token states of the sentences it holds, from the
        sentence pass (which then always runs here, `sentence_vectors` notwithstanding: it
        needs the states before normalisation).
        """
        one_pass = self.chunk_vectors == "sentences" and all(
            len(doc.chunk_sentences) == len(doc.chunks) for doc in documents
        )
        if one_pass:
            sentences, chunks = self._sentences_and_pooled_chunks(documents)
        else:
            sentences = (
                self.encode([s for doc in documents for s in doc.sentences])
                if sentence_vectors is None
                else torch.cat(list(sentence_vectors))
            )  # (ΣN, d)
            chunks = self.encode([c for doc in documents for c in doc.chunks])  # (ΣC, d)
        results: list[DocumentVectors] = []
        s_at = c_at = 0
        for doc in documents:
            n, c = len(doc.sentences), len(doc.chunks)
            doc_sentences = sentences[s_at : s_at + n]  # (N, d)
            doc_chunks = chunks[c_at : c_at + c]  # (C, d)
            s_at, c_at = s_at + n, c_at + c
            weights = torch.as_tensor(doc.chunk_tokens, dtype=torch.float32)  # (C,)
            paragraphs = segment_mean(
                doc_sentences,
                torch.as_tensor(doc.sentence_paragraph, dtype=torch.long),
                doc.n_paragraphs,
            )  # (P, d)
            sections = segment_mean(
                doc_chunks,
                torch.as_tensor(doc.chunk_section, dtype=torch.long),
                doc.n_sections,
                weights,
            )  # (S, d)
            document = segment_mean(doc_chunks, torch.zeros(c, dtype=torch.long), 1, weights)[
                0
            ]  # (d,)
            results.append(
                DocumentVectors(document, sections, paragraphs, doc_sentences, doc_chunks)
            )
        return results


def _max_length(path: Path, tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel) -> int:
    """sentence-transformers' `max_seq_length` when present, else the model's own limit."""
    limits = [int(getattr(model.config, "max_position_embeddings", 512))]
    st_config = path / "sentence_bert_config.json"
    if st_config.exists():
        limits.append(int(json.loads(st_config.read_text())["max_seq_length"]))
    if tokenizer.model_max_length and tokenizer.model_max_length < 1_000_000:
        limits.append(int(tokenizer.model_max_length))
    return min(limits)


def _pooling_mode(path: Path) -> str:
    pooling_config = path / "1_Pooling" / "config.json"
    if pooling_config.exists() and json.loads(pooling_config.read_text()).get(
        "pooling_mode_cls_token"
    ):
        return "cls"
    return "mean"
