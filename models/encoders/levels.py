"""Vectors for every level of a document from its sentence and chunk vectors: paragraphs are
the mean of their sentences, sections and the document the token-weighted mean of their
chunks. Pure pooling over `DocumentInput`'s index lists; no model runs here.

Dimensions: N sentences, P paragraphs, S sections, C chunks (Σ over a list of documents),
H hidden size, d vector size.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from docsim.models.encoders.encoder import DocumentInput, DocumentVectors
from docsim.models.encoders.pooling import segment_mean


def pool_levels(
    documents: Sequence[DocumentInput], sentences: torch.Tensor, chunks: torch.Tensor
) -> list[DocumentVectors]:
    """Every document's vectors from all documents' sentence `(ΣN, d)` and chunk `(ΣC, d)`
    vectors, both in document order."""
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
        document = segment_mean(doc_chunks, torch.zeros(c, dtype=torch.long), 1, weights)[0]  # (d,)
        results.append(DocumentVectors(document, sections, paragraphs, doc_sentences, doc_chunks))
    return results


def chunks_from_sentences(
    documents: Sequence[DocumentInput], means: torch.Tensor, counts: torch.Tensor
) -> torch.Tensor:
    """Each chunk's `(ΣC, H)` token-weighted mean of the mean token states `(ΣN, H)` of the
    sentences it holds (`DocumentInput.chunk_sentences`); `counts` `(ΣN,)` are the
    sentences' token counts."""
    members: list[int] = []  # (sentence, chunk) pairs
    owners: list[int] = []
    at = chunk_at = 0
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
    return summed / totals.clamp(min=1.0)[:, None]
