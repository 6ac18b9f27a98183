"""Request and response bodies of the HTTP API (pydantic v2)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from indexer.search import Granularity, Method, ScoringMode


class SectionIn(BaseModel):
    title: str = ""
    text: str


class DocumentIn(BaseModel):
    """A document as in DESIGN.md section 2: `text`, or `sections` with titles."""

    id: str | None = None
    title: str = ""
    text: str | None = None
    sections: list[SectionIn] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _text_or_sections(self) -> DocumentIn:
        if (self.text is None) == (self.sections is None):
            raise ValueError("give exactly one of 'text' or 'sections'")
        return self


class SimilarRequest(BaseModel):
    document: DocumentIn | None = None
    document_id: str | None = Field(
        default=None, description="An indexed document to use as the query."
    )
    top_k: int = Field(default=10, ge=1, le=1000)
    granularity: Granularity = Granularity.document
    method: Method = Method.sdr
    normalize: bool = True
    mode: ScoringMode = ScoringMode.auto
    candidates: list[str] | None = Field(
        default=None, description="Rank only these indexed documents (a pool).", max_length=100_000
    )

    @model_validator(mode="after")
    def _one_source(self) -> SimilarRequest:
        if (self.document is None) == (self.document_id is None):
            raise ValueError("give exactly one of 'document' or 'document_id'")
        return self


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
    encoder: str
    took_ms: float
    mode: str
    method: Method
    granularity: Granularity
    normalize: bool
    scored_documents: int
    results: list[DocumentResult] | list[UnitResult]


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    index_version: int
    documents: int
