"""What a search takes and returns: the query document and results (the request's options
and its hits are the wire's own models: `docsim.protocol.requests.SimilarOptions`, and
`docsim.protocol.answers`' `DocumentResult` and `UnitResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from docsim.protocol.answers import DocumentResult, UnitResult
from docsim.protocol.choices import Method, Population, ScoringMode

if TYPE_CHECKING:  # only annotations: the command line reads the enums without torch
    import torch

    from docsim.indexer.text.documents import Document
    from docsim.models.kernels.scoring import RowStats


@dataclass
class Query:
    """A query document's text, split structure and vectors."""

    text: str
    paragraphs: list[tuple[int, int]]  # (start, end) of each paragraph in `text`
    sentence_vectors: torch.Tensor  # (n, d)
    paragraph_lengths: torch.Tensor  # (I,)
    level_vectors: dict[str, torch.Tensor]  # level -> (m, d), filled on demand for posted documents
    level_spans: dict[str, list[tuple[int, int]]]
    source_index: int | None = None  # position in the collection when the query is indexed
    bm25_text: str = ""
    document: Document | None = None  # the split posted document, until its levels are encoded
    title: str = ""
    section_titles: list[str] = field(default_factory=list)
    paragraph_pages: list[int | None] = field(default_factory=list)  # PDF pages; [] if unpaged

    @property
    def sentence_paragraph(self) -> torch.Tensor:
        """`(n,)` the paragraph of each sentence."""
        import torch

        return torch.repeat_interleave(
            torch.arange(len(self.paragraph_lengths)), self.paragraph_lengths
        )


@dataclass(frozen=True)
class ParagraphStats:
    """The z-score statistics of a query's paragraphs, and the population they came from.

    Attributes:
        stats: per source paragraph mean and std of P.
        population: `collection` (every other document), `pool` (the posted candidates) or
            `sample` (candidate mode's fixed random sample of the collection).
        documents: how many documents the population holds.
    """

    stats: RowStats
    population: Population
    documents: int


@dataclass
class SearchResult:
    results: list[DocumentResult] | list[UnitResult]  # the wire's answers, as they are sent
    mode: ScoringMode  # exhaustive or candidate
    scored_documents: int
    stats: ParagraphStats | None = None  # what SDR normalised with, when it did
    method: Method | None = None  # the method that ranked (the default, when none was asked)
