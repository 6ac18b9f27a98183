"""Token chunks: consecutive windows of at most `capacity` encoder tokens inside a section.

Chunks are packed from whole sentences; a sentence longer than the capacity is cut at token
boundaries. A chunk never crosses a section boundary (DESIGN.md section 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from indexer.documents import Chunk, Document

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
                    for i in range(0, n, capacity):
                        window = spans[i : i + capacity]
                        chunks.append(
                            Chunk(
                                s_idx,
                                sentence.start + window[0][0],
                                sentence.start + window[-1][1],
                                len(window),
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
