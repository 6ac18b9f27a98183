"""Query documents: a posted document encoded once per level, or an indexed one read back."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sqlalchemy import Engine

from docsim.indexer.store.reader import (
    document_section_titles,
    document_texts,
    document_units,
    paragraph_offsets,
)
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.documents import Document, Paragraph, page_at
from docsim.models.encoders.encoder import Encoder
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.types import Query


def encode_document(encoder: Encoder, document: Document, chunk_tokens: int) -> Query:
    """A posted (not indexed) document as a query. Only its sentences are encoded now: that
    is all exhaustive SDR scoring needs; `encode_levels` adds the rest when first needed.
    An encoder whose sentence vectors come from the chunk pass (late chunking) encodes every
    level now, in that one pass."""
    paragraphs = list(document.paragraphs())
    sentences = list(document.sentences())
    late = sentences_from_chunks(encoder)
    query = Query(
        text=document.text,
        paragraphs=[(p.start, p.end) for p in paragraphs],
        sentence_vectors=(
            torch.empty(0)
            if late
            else encoder.encode([document.text[s.start : s.end] for s in sentences])
        ),
        paragraph_lengths=torch.tensor([len(p.sentences) for p in paragraphs], dtype=torch.long),
        level_vectors={},
        level_spans={
            "document": [(0, len(document.text))],
            "section": [(s.start, s.end) for s in document.sections],
            "paragraph": [(p.start, p.end) for p in paragraphs],
            "sentence": [(s.start, s.end) for s in sentences],
        },
        bm25_text=document.text,
        document=document,
        title=document.title,
        section_titles=[s.title for s in document.sections],
        paragraph_pages=_pages(document.metadata.get("pages"), paragraphs),
    )
    if late:
        encode_levels(encoder, query, chunk_tokens)
        query.sentence_vectors = query.level_vectors["sentence"]
    return query


def sentences_from_chunks(encoder: Encoder) -> bool:
    """Whether `encoder`'s sentence vectors come from its chunk pass (late chunking), so
    that a sentence is not encoded alone."""
    return getattr(encoder, "chunk_vectors", "encode") == "late"


def _pages(pages: Sequence[Sequence[int]] | None, paragraphs: list[Paragraph]) -> list[int | None]:
    """Each paragraph's page in a paged (PDF) source; [] for one without pages."""
    return [page_at(pages, p.start) for p in paragraphs] if pages else []


def encode_levels(encoder: Encoder, query: Query, chunk_tokens: int) -> None:
    """Fill in a posted query's document, section, paragraph and chunk vectors: only the
    chunks are new work, the sentence vectors are reused (but for late chunking, where the
    one pass gives them)."""
    if query.document is None:
        raise ValueError("the query has no document to encode")
    doc = add_chunks([query.document], encoder, chunk_tokens)[0]
    vectors = encoder.encode_documents(
        [doc.encoder_input()], sentence_vectors=[query.sentence_vectors]
    )[0]
    query.level_vectors.update(
        document=vectors.document[None],
        section=vectors.sections,
        paragraph=vectors.paragraphs,
        sentence=vectors.sentences,
        chunk=vectors.chunks,
    )
    query.level_spans["chunk"] = [(c.start, c.end) for c in doc.chunks]


def indexed_query(index: LoadedIndex, engine: Engine, d: int, sentence_start: np.ndarray) -> Query:
    """The stored vectors of the indexed document at position `d`, as a query that excludes
    itself; `sentence_start` `(D + 1,)` is each document's first sentence row."""
    p0, p1 = index.doc_paragraph_start[d], index.doc_paragraph_start[d + 1]
    s0, s1 = sentence_start[d], sentence_start[d + 1]
    doc_id = int(index.doc_ids[d])
    paragraph_ids = index.paragraph_ids[p0:p1].tolist()
    offsets = paragraph_offsets(engine, paragraph_ids)
    text = document_texts(engine, [doc_id])[doc_id]
    level_vectors, level_spans = {}, {}
    for level in ("section", "paragraph", "sentence", "chunk"):
        unit_rows = document_units(engine, level, doc_id)
        ids = np.array([r[0] for r in unit_rows], dtype=np.int64)
        rows = np.searchsorted(index.ids[level], ids)
        level_vectors[level] = index.vectors[level][torch.from_numpy(rows)].float()  # mapped: f16
        level_spans[level] = [(r[1], r[2]) for r in unit_rows]
    level_vectors["document"] = index.vectors["document"][d : d + 1]
    level_spans["document"] = [(0, len(text))]
    return Query(
        text=text,
        paragraphs=[offsets[p][:2] for p in paragraph_ids],
        sentence_vectors=index.collection.sentences[s0:s1].float(),
        paragraph_lengths=index.collection.paragraph_lengths[p0:p1],
        level_vectors=level_vectors,
        level_spans=level_spans,
        source_index=d,
        bm25_text=text,
        title=index.titles[d],
        section_titles=document_section_titles(engine, doc_id),
        paragraph_pages=_stored_pages([offsets[p][2] for p in paragraph_ids]),
    )


def _stored_pages(pages: list[int | None]) -> list[int | None]:
    return pages if any(p is not None for p in pages) else []
