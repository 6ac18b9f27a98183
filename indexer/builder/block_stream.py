"""The encode stage's stream of blocks: each block of split documents, chunked, encoded by the
engine, and handed back in order with every document's vectors.

With reuse (`indexer.builder.reuse`), a thread one block ahead of the encoder finds the
documents the active version holds unchanged (`PreparedBlock.kept`) and chunks only the
others; the engine encodes only those (an empty list when none); the build's thread then reads
the kept documents' chunks and vectors back (`PreparedBlock.merged`) as it stores the block.
Kept vectors are read one block at a time, when the block is stored: a block waiting for the
engine holds its documents only (an engine may read many blocks ahead).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch

from docsim.indexer.builder.engines import EncodedBlocks, EncodeEngine
from docsim.indexer.builder.reuse import Reuse
from docsim.indexer.errors import IndexBuildError
from docsim.indexer.store.kept_vectors import KeptDocument
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.documents import Document
from docsim.models.encoders.encoder import DocumentVectors, Encoder

logger = logging.getLogger(__name__)


@dataclass
class EncodeTimes:
    """Seconds spent by each thread of the encode stage (they run at once): reading blocks
    back and chunking them, storing them (SQL rows and block files), and the build's thread
    waiting for the encoder."""

    chunking: float = 0.0
    storing: float = 0.0
    waiting: float = 0.0

    def log(self, wall: float, encoding: float | None) -> None:
        logger.info(
            "encode stage: %.1f s; encoding %s, chunking %.1f s (one block ahead), storing "
            "%.1f s, waiting for the encoder %.1f s",
            wall,
            "in the engine" if encoding is None else f"{encoding:.1f} s",
            self.chunking,
            self.storing,
            self.waiting,
        )


@dataclass
class PreparedBlock:
    """One block of documents in order: those to encode chunked, and those kept from the
    active version by position (-> their doc id there), not chunked yet."""

    documents: list[Document]
    kept: dict[int, int]

    def fresh(self) -> list[Document]:
        """The documents to encode, in order."""
        return [doc for i, doc in enumerate(self.documents) if i not in self.kept]

    def merged(
        self, encoded: list[DocumentVectors], reuse: Reuse | None
    ) -> tuple[list[Document], list[DocumentVectors]]:
        """Every document of the block, chunked, with its vectors: `encoded` for the fresh
        ones, in order; the kept ones' chunks and vectors as the active version holds them.

        Raises:
            IndexBuildError: the active version lacks vectors its rows name.
        """
        stored = reuse.kept.read(list(self.kept.values())) if reuse and self.kept else {}
        fresh = iter(encoded)
        docs, vectors = [], []
        for i, doc in enumerate(self.documents):
            if i not in self.kept:
                docs.append(doc)
                vectors.append(next(fresh))
                continue
            kept = stored[self.kept[i]]
            docs.append(replace(doc, chunks=kept.chunks))
            vectors.append(_as_vectors(kept, doc))
            if reuse is not None:
                reuse.documents += 1
                reuse.sentences += len(kept.vectors["sentence"])
        if reuse is not None:
            reuse.encoded_sentences += sum(d.counts()["sentence"] for d in self.fresh())
        return docs, vectors


def _as_vectors(kept: KeptDocument, doc: Document) -> DocumentVectors:
    """A kept document's vectors as an encoder gives them (float32 tensors)."""
    counts = doc.counts()
    for level in ("section", "paragraph", "sentence"):
        if len(kept.vectors[level]) != counts[level]:
            raise IndexBuildError(f"the kept {level}s of {doc.doc_id!r} do not match its split")

    def tensor(level: str) -> torch.Tensor:
        rows = np.asarray(kept.vectors[level], np.float32)
        return torch.from_numpy(rows.reshape(len(rows), -1))

    return DocumentVectors(
        document=tensor("document")[0],
        sections=tensor("section"),
        paragraphs=tensor("paragraph"),
        sentences=tensor("sentence"),
        chunks=tensor("chunk"),
    )


def prepared_blocks(
    blocks: Iterable[list[Document]],
    encoder: Encoder,
    capacity: int,
    times: EncodeTimes,
    reuse: Reuse | None,
) -> Iterator[PreparedBlock]:
    """Each block with the documents `reuse` keeps found, the others chunked (`add_chunks`),
    timed into `times`."""
    started = time.perf_counter()
    for block in blocks:
        kept = reuse.kept.unchanged(block) if reuse is not None else {}
        fresh = add_chunks([d for i, d in enumerate(block) if i not in kept], encoder, capacity)
        chunked = iter(fresh)
        documents = [block[i] if i in kept else next(chunked) for i in range(len(block))]
        del block, fresh  # not held while the chunked copy waits for the encoder
        times.chunking += time.perf_counter() - started
        yield PreparedBlock(documents, kept)
        started = time.perf_counter()


def encode_prepared(
    prepared: Iterator[PreparedBlock], engine: EncodeEngine, reuse: Reuse | None
) -> EncodedBlocks:
    """Each prepared block, every document chunked, with its vectors, in order: the engine
    encodes each block's fresh documents (the engines hand blocks back in the order given,
    an empty one included), and the kept ones are read back (`PreparedBlock.merged`)."""
    waiting: deque[PreparedBlock] = deque()  # given to the engine, not handed back yet

    def fresh_blocks() -> Iterator[list[Document]]:
        for block in prepared:
            waiting.append(block)  # before the engine can hand it back
            yield block.fresh()

    encoded = engine.encode_blocks(fresh_blocks())
    try:
        for _, vectors in encoded:
            yield waiting.popleft().merged(vectors, reuse)
    finally:
        encoded.close()
