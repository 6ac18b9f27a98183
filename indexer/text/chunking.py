"""Token chunks: consecutive windows of at most `capacity` encoder tokens inside a section.

Chunks are packed from whole sentences; a sentence longer than the capacity is cut at token
boundaries. A chunk never crosses a section boundary (DESIGN.md section 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from docsim.indexer.text.documents import Chunk, Document

if TYPE_CHECKING:
    from docsim.models.encoders.encoder import Encoder

TokenSpans = Sequence[tuple[int, int]]


def chunk_document(
    document: Document, sentence_tokens: Sequence[TokenSpans], capacity: int
) -> Document:
    """Return `document` with its chunks filled in.

    Args:
        document: the split document.
        sentence_tokens: for each sentence (document order), its tokens' character spans
            relative to the sentence start.
        capacity: the most tokens per chunk.
    """
    if capacity < 1:
        raise ValueError(f"chunk capacity must be at least 1 token, got {capacity}")
    chunks: list[Chunk] = []
    k = 0
    for s_idx, section in enumerate(document.sections):
        start = end = -1
        count = 0
        for paragraph in section.paragraphs:
            for sentence in paragraph.sentences:
                spans = sentence_tokens[k]
                k += 1
                n = len(spans)
                if n > capacity:
                    if count:
                        chunks.append(Chunk(s_idx, start, end, count))
                        count, start = 0, -1
                    for i, j in _windows(spans, capacity):
                        chunks.append(
                            Chunk(
                                s_idx,
                                sentence.start + spans[i][0],
                                sentence.start + spans[j - 1][1],
                                j - i,
                            )
                        )
                    continue
                if count and count + n > capacity:
                    chunks.append(Chunk(s_idx, start, end, count))
                    count, start = 0, -1
                if start < 0:
                    start = sentence.start
                end = sentence.end
                count += n
        if start >= 0:
            chunks.append(Chunk(s_idx, start, end, count))
    if k != len(sentence_tokens):
        raise ValueError(f"got token spans for {len(sentence_tokens)} sentences, document has {k}")
    return replace(document, chunks=tuple(chunks))


def _windows(spans: TokenSpans, capacity: int) -> list[tuple[int, int]]:
    """Token windows `[i, j)` of at most `capacity`, cut at whitespace where possible.

    A cut inside a word (between word pieces) would make the chunk's text tokenise to more
    tokens than counted, so a window ends before the last whitespace gap that fits.
    """
    windows, i, n = [], 0, len(spans)
    while i < n:
        j = min(i + capacity, n)
        if j < n:
            safe = next((k for k in range(j, i, -1) if spans[k - 1][1] < spans[k][0]), None)
            j = safe if safe is not None else j
        windows.append((i, j))
        i = j
    return windows


def add_chunks(docs: Sequence[Document], encoder: Encoder, capacity: int) -> list[Document]:
    """Fill in each document's token chunks (one tokenizer call for the whole block)."""
    texts = [doc.text[s.start : s.end] for doc in docs for s in doc.sentences()]
    offsets = encoder.token_offsets(texts)
    result, at = [], 0
    for doc in docs:
        n = doc.counts()["sentence"]
        result.append(chunk_document(doc, offsets[at : at + n], capacity))
        at += n
    return result
