"""The document tree: sections -> paragraphs -> sentences, plus token chunks.

Every unit holds character offsets into its document's `text`, so that
`document.text[unit.start:unit.end]` gives the unit back exactly.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from docsim.models.encoders.encoder import DocumentInput

LEVELS: tuple[str, ...] = ("document", "section", "paragraph", "sentence", "chunk")


@dataclass(frozen=True)
class SectionSource:
    """An explicit section layout given by the corpus (e.g. JSON `sections`)."""

    title: str
    start: int  # body start in the document text
    end: int  # body end


@dataclass(frozen=True)
class SourceDocument:
    """A document as read from a corpus, before splitting.

    Attributes:
        doc_id: the external id (file stem or JSON `id`).
        title: the document title.
        text: the full stored text; all offsets refer to it.
        metadata: free-form metadata from the corpus.
        body_start: where the content starts (after a title line or header block).
        sections: an explicit section layout, or None to detect headings in the text.
    """

    doc_id: str
    title: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    body_start: int = 0
    sections: tuple[SectionSource, ...] | None = None


@dataclass(frozen=True, slots=True)  # hundreds of thousands per corpus
class Sentence:
    start: int
    end: int

    def __reduce__(self) -> tuple[type[Sentence], tuple[int, int]]:
        # plain constructor arguments: the slots' default pickling looks up the dataclass
        # fields of every object, twice as slow to read a split plan's block back
        return Sentence, (self.start, self.end)


@dataclass(frozen=True, slots=True)  # hundreds of thousands per corpus
class Paragraph:
    start: int
    end: int
    sentences: tuple[Sentence, ...]

    def __reduce__(self) -> tuple[type[Paragraph], tuple[Any, ...]]:
        return Paragraph, (self.start, self.end, self.sentences)


@dataclass(frozen=True, slots=True)  # hundreds of thousands per corpus
class Section:
    title: str
    start: int
    end: int
    paragraphs: tuple[Paragraph, ...]

    def __reduce__(self) -> tuple[type[Section], tuple[Any, ...]]:
        return Section, (self.title, self.start, self.end, self.paragraphs)


@dataclass(frozen=True, slots=True)  # hundreds of thousands per corpus
class Chunk:
    """At most `chunk_tokens` encoder tokens of one section."""

    section: int  # index of the section in the document
    start: int
    end: int
    n_tokens: int

    def __reduce__(self) -> tuple[type[Chunk], tuple[int, int, int, int]]:
        return Chunk, (self.section, self.start, self.end, self.n_tokens)


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str
    metadata: Mapping[str, Any]
    sections: tuple[Section, ...]
    chunks: tuple[Chunk, ...] = ()

    def paragraphs(self) -> Iterator[Paragraph]:
        for section in self.sections:
            yield from section.paragraphs

    def sentences(self) -> Iterator[Sentence]:
        for paragraph in self.paragraphs():
            yield from paragraph.sentences

    def counts(self) -> dict[str, int]:
        return {
            "document": 1,
            "section": len(self.sections),
            "paragraph": sum(len(s.paragraphs) for s in self.sections),
            "sentence": sum(len(p.sentences) for p in self.paragraphs()),
            "chunk": len(self.chunks),
        }

    def content_sha256(self) -> str:
        """SHA-256 of what this document's vectors are computed from: its text and its split
        (each section's title and span, each paragraph's and sentence's span). Its chunks
        follow from these, the encoder's tokenizer and the chunk size, which a build compares
        once for the whole version (`indexer.builder.reuse`)."""
        digest = hashlib.sha256(self.text.encode())
        for section in self.sections:
            digest.update(b"\0S%d:%d:" % (section.start, section.end) + section.title.encode())
            for paragraph in section.paragraphs:
                digest.update(b"\0P%d:%d;" % (paragraph.start, paragraph.end))
                for sentence in paragraph.sentences:
                    digest.update(b"%d:%d," % (sentence.start, sentence.end))
        return digest.hexdigest()

    def encoder_input(self) -> DocumentInput:
        """The plain index lists an encoder needs."""
        sentences: list[str] = []
        sentence_paragraph: list[int] = []
        paragraph_section: list[int] = []
        spans: list[Sentence] = []
        for s_idx, section in enumerate(self.sections):
            for paragraph in section.paragraphs:
                p_idx = len(paragraph_section)
                paragraph_section.append(s_idx)
                for sentence in paragraph.sentences:
                    sentences.append(self.text[sentence.start : sentence.end])
                    sentence_paragraph.append(p_idx)
                    spans.append(sentence)
        return DocumentInput(
            sentences=sentences,
            sentence_paragraph=sentence_paragraph,
            paragraph_section=paragraph_section,
            chunks=[self.text[c.start : c.end] for c in self.chunks],
            chunk_section=[c.section for c in self.chunks],
            chunk_tokens=[c.n_tokens for c in self.chunks],
            chunk_sentences=_chunk_sentences(self.chunks, spans),
        )


def _chunk_sentences(
    chunks: Sequence[Chunk], sentences: Sequence[Sentence]
) -> list[tuple[int, int]]:
    """For each chunk (in document order), the half-open range of the sentences it overlaps."""
    ranges, first = [], 0
    for chunk in chunks:
        while first < len(sentences) and sentences[first].end <= chunk.start:
            first += 1
        last = first
        while last < len(sentences) and sentences[last].start < chunk.end:
            last += 1
        ranges.append((first, max(last, first + 1)))
    return ranges


@dataclass(frozen=True)
class Skipped:
    """An input that was not indexed, and why; `over_limit` when only its size was wrong
    (larger or longer than the limits allow)."""

    ref: str
    reason: str
    over_limit: bool = False


def page_at(pages: Sequence[Sequence[int]] | None, offset: int) -> int | None:
    """The page holding the character `offset`, from a paged source's `[offset, page]` pairs
    (ascending offsets, each paragraph's start; `metadata["pages"]`); None without pages or
    before the first."""
    if not pages:
        return None
    place = bisect.bisect_right([start for start, _ in pages], offset) - 1
    return int(pages[place][1]) if place >= 0 else None
