"""POST /similar."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from app.schemas.common import DocumentIdText, DocumentIn, RequestModel, took_ms
from indexer.api import DocumentHit, Granularity, Method, ScoringMode, SearchResult


class SimilarOptions(RequestModel):
    """How to rank, whatever the query document came as."""

    top_k: int = Field(default=10, ge=1, le=1000)
    granularity: Granularity = Granularity.document
    method: Method | None = Field(
        default=None,
        description="How to rank; default: the service's (DOCSIM_SEARCH__DEFAULT_METHOD).",
    )
    normalize: bool = True
    mode: ScoringMode = ScoringMode.auto
    candidates: list[DocumentIdText] | None = Field(
        default=None, description="Rank only these indexed documents (a pool).", max_length=100_000
    )


class SimilarRequest(SimilarOptions):
    """The JSON body: the query document posted as text or sections, or an indexed one."""

    document: DocumentIn | None = None
    document_id: DocumentIdText | None = Field(
        default=None, description="An indexed document to use as the query."
    )

    @model_validator(mode="after")
    def _one_source(self) -> SimilarRequest:
        if (self.document is None) == (self.document_id is None):
            raise ValueError("give exactly one of 'document' or 'document_id'")
        return self


class SimilarUpload(SimilarOptions):
    """The multipart body: the query document as a file (PDF, Word, HTML, text or Markdown,
    told by its content) in `file`, and the options as form fields."""

    file: bytes = Field(description="The query document's file.")


class MatchOut(BaseModel):
    source_paragraph: int
    source_start: int
    source_end: int
    target_paragraph_id: int
    target_start: int
    target_end: int
    score: float
    source_text: str
    target_text: str
    target_page: int | None = Field(
        default=None, description="The target paragraph's page, for PDF documents."
    )
    source_page: int | None = Field(
        default=None, description="The query paragraph's page, for a PDF query."
    )


class DocumentResult(BaseModel):
    document_id: str
    title: str
    score: float
    rank: int
    matches: list[MatchOut]


class UnitResult(BaseModel):
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


class SimilarResponse(BaseModel):
    query_id: str
    index_version: int
    index_revision: int = Field(
        description="Document changes applied to the version this answer was computed on: "
        "every result and text belongs to that one revision."
    )
    encoder: str
    took_ms: float
    mode: str
    method: Method
    granularity: Granularity
    normalize: bool
    scored_documents: int
    results: list[DocumentResult] | list[UnitResult]

    @classmethod
    def from_result(
        cls,
        result: SearchResult,
        request: SimilarOptions,
        *,
        query_id: str,
        index_version: int,
        index_revision: int,
        encoder: str,
        started: float,
    ) -> SimilarResponse:
        """The answer to `request`, ranked as `result` by `encoder` over `index_version`;
        `started` is the request's `time.perf_counter()` reading."""
        results: list[DocumentResult] | list[UnitResult]
        if result.results and isinstance(result.results[0], DocumentHit):
            results = [
                DocumentResult(
                    document_id=h.document_id,
                    title=h.title,
                    score=h.score,
                    rank=h.rank,
                    matches=[MatchOut(**vars(m)) for m in h.matches],
                )
                for h in result.results
            ]
        else:
            results = [UnitResult(**vars(h)) for h in result.results]
        method = result.method or request.method
        if method is None:  # `Searcher.similar` names the method it ranked by, always
            raise ValueError("a search result names no method")
        return cls(
            query_id=query_id,
            index_version=index_version,
            index_revision=index_revision,
            encoder=encoder,
            took_ms=took_ms(started),
            mode=result.mode,
            method=method,
            granularity=request.granularity,
            normalize=request.normalize,
            scored_documents=result.scored_documents,
            results=results,
        )
