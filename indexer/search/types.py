"""What a search takes and returns: methods, options, the query document, hits and results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import torch

from indexer.search.fusion import parse_weights
from indexer.text.documents import Document
from models.scoring import RowStats


class Method(str, Enum):
    """How documents are ranked (`indexer.search.searcher` describes each)."""

    sdr = "sdr"
    sdr_window = "sdr-window"
    document = "document"
    maxsim = "maxsim"
    best_sentence = "best-sentence"
    ot = "ot"
    bm25 = "bm25"
    bm25_reduced = "bm25-reduced"
    bm25_rm3 = "bm25-rm3"
    bm25_paragraph = "bm25-paragraph"
    hybrid = "hybrid"
    fused = "fused"


LEXICAL = frozenset({Method.bm25, Method.bm25_reduced, Method.bm25_rm3, Method.bm25_paragraph})
SENTENCE_SETS = frozenset({Method.maxsim, Method.best_sentence, Method.ot})
WHOLE_DOCUMENT_ONLY = frozenset(Method) - {Method.sdr, Method.document}


class Granularity(str, Enum):
    document = "document"
    section = "section"
    paragraph = "paragraph"
    sentence = "sentence"


class ScoringMode(str, Enum):
    auto = "auto"
    exhaustive = "exhaustive"
    candidate = "candidate"


class QueryError(ValueError):
    """The query cannot be answered as asked (maps to 422)."""


class DocumentNotFoundError(LookupError):
    """An indexed document id that the active version does not have (maps to 404)."""


@dataclass(frozen=True)
class SearchOptions:
    top_k: int = 10
    granularity: Granularity = Granularity.document
    method: Method | None = None  # None: the searcher's default (`SearchConfig.default_method`)
    normalize: bool = True
    mode: ScoringMode = ScoringMode.auto
    candidates: Sequence[str] | None = None
    matches_per_result: int = 3


@dataclass(frozen=True)
class SearchConfig:
    exhaustive_max_sentences: int = 2_000_000
    candidate_sentence_k: int = 20
    candidate_paragraph_k: int = 200
    candidate_document_k: int = 200
    candidate_max_documents: int = 500
    stats_sample_documents: int = 256
    seed: int = 0
    device: str = "cpu"  # where SDR's sentence products run: `cpu`, `cuda[:N]` or `auto`
    # the defaults are `indexer.config.SearchSettings`' (chosen in benchmarks/ranking_cv.py)
    default_method: Method = Method.fused
    fusion_weights: tuple[tuple[Method, float], ...] = (
        (Method.bm25_rm3, 1.0),
        (Method.document, 1.0),
        (Method.maxsim, 1.0),
    )
    fusion_normaliser: str = "minmax"
    query_window: int = 3  # sdr-window: sentences per query pseudo-paragraph
    bm25_stemmer: str | None = "english"  # a Snowball language, or None
    bm25_reduced_keep: float = 0.5  # bm25-reduced: share of the query's distinct terms kept
    bm25_paragraph_top: int = 1  # bm25-paragraph: mean of a document's best k paragraphs
    rm3_documents: int = 10
    rm3_terms: int = 20
    rm3_query_weight: float = 0.5
    ot_reg: float = 0.05
    ot_iterations: int = 50


def search_config(settings, **overrides) -> SearchConfig:  # noqa: ANN001
    """The `SearchConfig` of `settings.search` (an `indexer.config.SearchSettings`).

    Raises:
        ValueError: the default method or a fused method is not a method, or `fused` weighs
            a method that is itself a fusion.
    """
    search = settings.search
    fusion = tuple((_method(name, "fusion"), w) for name, w in parse_weights(search.fusion).items())
    nested = [m.value for m, _ in fusion if m in (Method.fused, Method.hybrid)]
    if nested:
        raise ValueError(f"DOCSIM_SEARCH__FUSION cannot weigh the fusions {', '.join(nested)}")
    values = {
        "default_method": _method(search.default_method, "default_method"),
        "fusion_weights": fusion,
        "fusion_normaliser": search.fusion_normaliser,
        "query_window": search.query_window,
        "bm25_stemmer": search.bm25_stemmer,
        "bm25_reduced_keep": search.bm25_reduced_keep,
        "bm25_paragraph_top": search.bm25_paragraph_top,
        "rm3_documents": search.rm3_documents,
        "rm3_terms": search.rm3_terms,
        "rm3_query_weight": search.rm3_query_weight,
        "ot_reg": search.ot_reg,
        "ot_iterations": search.ot_iterations,
    }
    return SearchConfig(**{**values, **overrides})


def _method(name: str, setting: str) -> Method:
    try:
        return Method(name.strip())
    except ValueError:
        valid = ", ".join(m.value for m in Method)
        raise ValueError(
            f"DOCSIM_SEARCH__{setting.upper()}: unknown method {name!r}; valid: {valid}"
        ) from None


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
    population: str
    documents: int


@dataclass
class ParagraphMatch:
    source_paragraph: int
    source_start: int
    source_end: int
    target_paragraph_id: int
    target_start: int
    target_end: int
    score: float
    source_text: str = ""
    target_text: str = ""
    target_page: int | None = None  # the page of a paged (PDF) document's paragraph
    source_page: int | None = None  # the same of the query's paragraph


@dataclass
class DocumentHit:
    document_id: str
    title: str
    score: float
    rank: int
    matches: list[ParagraphMatch] = field(default_factory=list)


@dataclass
class UnitHit:
    unit_id: int
    level: str
    document_id: str
    title: str
    score: float
    rank: int
    start: int
    end: int
    text: str
    section_title: str | None = None


@dataclass
class SearchResult:
    results: list[DocumentHit] | list[UnitHit]
    mode: str
    scored_documents: int
    stats: ParagraphStats | None = None  # what SDR normalised with, when it did
    method: Method | None = None  # the method that ranked (the default, when none was asked)
