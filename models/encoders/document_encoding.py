"""A transformer's vectors of every level of whole documents (`TransformerEncoder.
encode_documents`): sentences and chunks encoded, or one level pooled from the token states of
the other's pass (`chunk_vectors`: `encode`, `sentences`, `late`), then paragraphs, sections
and documents pooled from them (`models.encoders.levels`).

Dimensions: N sentences, C chunks, H hidden size, d vector size, B batch, T tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import torch

from docsim.models.encoders.encoder import DocumentInput, DocumentVectors
from docsim.models.encoders.late import add_token_states, chunk_tokens, sentence_means, token_owners
from docsim.models.encoders.levels import chunks_from_sentences, pool_levels
from docsim.models.encoders.pooling import mean_pool
from docsim.models.inference.backends import ForwardBackend
from docsim.models.inference.batching import Batch
from docsim.models.inference.precision import to_device


class TokenStateEncoder(Protocol):
    """What document encoding asks of a transformer encoder (`TransformerEncoder`)."""

    device: torch.device
    dim: int
    config: Any  # the backbone's configuration: its `hidden_size`
    chunk_vectors: str

    @property
    def backend(self) -> ForwardBackend: ...

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]: ...

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]: ...

    def special_tokens(self) -> tuple[list[int], list[int]]: ...

    def plan_batches(self, token_ids: Sequence[Sequence[int]]) -> Iterator[Batch]: ...

    def encode(self, texts: Sequence[str]) -> torch.Tensor: ...

    def pooled(self, batch: Batch, hidden: torch.Tensor, *, host: bool = True) -> torch.Tensor: ...

    def project(self, pooled: torch.Tensor, *, host: bool = True) -> torch.Tensor: ...


def encode_documents(
    encoder: TokenStateEncoder,
    documents: Sequence[DocumentInput],
    sentence_vectors: Sequence[torch.Tensor] | None = None,
) -> list[DocumentVectors]:
    """Encode sentences and chunks of all documents, then pool.

    Paragraph vectors are the mean of their sentences' vectors; section and document
    vectors are the token-weighted mean of their chunks' vectors (chunks cover the whole
    text without truncation).

    - `encode`: one pass over the sentences (each alone, truncated at `max_length`;
      `sentence_vectors` from `encode` are used as they are instead), one over the chunks.
    - `sentences`: the chunks are not encoded: a chunk's vector is the token-weighted mean
      of the pooled token states of the sentences it holds, from the sentence pass.
    - `late`: the sentences are not encoded alone: a sentence's vector is the mean of its
      tokens' states in the chunk pass (late chunking), so it carries its context.

    The one-pass modes always run their pass (`sentence_vectors` notwithstanding: it
    needs the states before normalisation). `sentences` falls back to two passes for
    documents without `chunk_sentences`; `late` needs them (ValueError).
    """
    if encoder.chunk_vectors == "late":
        sentences, chunks = _late_chunked(encoder, documents)
    elif encoder.chunk_vectors == "sentences" and all(
        len(doc.chunk_sentences) == len(doc.chunks) for doc in documents
    ):
        sentences, chunks = _sentences_and_pooled_chunks(encoder, documents)
    else:
        sentences = (
            encoder.encode([s for doc in documents for s in doc.sentences])
            if sentence_vectors is None
            else torch.cat(list(sentence_vectors))
        )  # (ΣN, d)
        chunks = encoder.encode([c for doc in documents for c in doc.chunks])  # (ΣC, d)
    return pool_levels(documents, sentences, chunks)


def _sentences_and_pooled_chunks(
    encoder: TokenStateEncoder, documents: Sequence[DocumentInput]
) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward pass over the sentences: their vectors `(ΣN, d)`, and each chunk's
    vector `(ΣC, d)` as the token-weighted mean of its sentences' mean token states."""
    token_ids = encoder.tokenize([s for doc in documents for s in doc.sentences])
    means = torch.empty((len(token_ids), encoder.config.hidden_size))  # (ΣN, H)
    counts = torch.empty(len(token_ids))  # (ΣN,) tokens, special tokens included
    for batch, hidden in encoder.backend.hidden_states(encoder.plan_batches(token_ids)):
        rows = torch.from_numpy(batch.rows)
        means[rows] = mean_pool(hidden, batch.attention_mask.to(hidden.device)).cpu()
        counts[rows] = batch.attention_mask.sum(dim=1).to(torch.float32)
    pooled = chunks_from_sentences(documents, means, counts)  # (ΣC, H)
    return encoder.project(means), encoder.project(pooled)


def _late_chunked(
    encoder: TokenStateEncoder, documents: Sequence[DocumentInput]
) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward pass over the chunks (late chunking, `models.encoders.late`): each chunk's vector
    `(ΣC, d)`, pooled as `encode` pools a text, and each sentence's `(ΣN, d)` as the mean of
    its tokens' states there. A sentence without a content token is encoded alone."""
    texts = [s for doc in documents for s in doc.sentences]
    plan = chunk_tokens(documents, encoder.content_ids(texts))
    before, after = encoder.special_tokens()
    inputs = [before + ids + after for ids in plan.ids]
    # the chunk vectors and sentence sums stay where the states are made: on a GPU they
    # cross to the host once, at the end, and nothing in the loop waits for the GPU
    home = encoder.device if encoder.device.type == "cuda" else torch.device("cpu")
    chunks_home = torch.empty((len(inputs), encoder.dim), device=home)  # (ΣC, d)
    sums = torch.zeros((len(texts), encoder.config.hidden_size), device=home)  # (ΣN, H)
    counts = torch.zeros(len(texts), device=home)  # (ΣN,)
    for batch, hidden in encoder.backend.hidden_states(encoder.plan_batches(inputs)):
        rows = to_device(torch.from_numpy(batch.rows), home)  # (B,)
        chunks_home[rows] = encoder.pooled(batch, hidden, host=False).to(home)
        owners = [plan.owners[r] for r in batch.rows]
        owner = token_owners(owners, len(before), hidden.shape[1])  # (B, T)
        with torch.inference_mode():
            add_token_states(sums, counts, hidden, owner)
    chunks = chunks_home.cpu()
    means, covered = sentence_means(sums.cpu(), counts.cpu())
    sentences = torch.empty((len(texts), encoder.dim))  # (ΣN, d)
    sentences[covered] = encoder.project(means[covered])
    if not bool(covered.all()):
        alone = torch.nonzero(~covered).flatten()
        sentences[alone] = encoder.encode([texts[int(i)] for i in alone])
    return sentences, chunks
