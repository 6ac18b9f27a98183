"""Request and response bodies of the HTTP API (pydantic v2)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, Field, model_validator

from indexer.corpus import CorpusFormat, has_nul
from indexer.engines import EngineName
from indexer.search import Granularity, Method, ScoringMode


class RequestModel(BaseModel):
    """A request body: no string in it may hold a NUL character (PostgreSQL text cannot store
    one, and no document needs it), which is a 422, not a database error."""

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        if has_nul(data):
            raise ValueError("text must not contain NUL characters (\\u0000)")
        return data


class SectionIn(RequestModel):
    title: str = ""
    text: str


class DocumentIn(RequestModel):
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


class SimilarRequest(RequestModel):
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


class ExplainFormat(str, Enum):
    json = "json"
    png = "png"
    html = "html"


class SectionOut(BaseModel):
    index: int
    title: str
    start: int
    end: int


class ParagraphOut(BaseModel):
    index: int
    section: int
    start: int
    end: int


class SentenceOut(BaseModel):
    index: int
    paragraph: int
    start: int
    end: int


class ChunkOut(BaseModel):
    index: int
    section: int
    start: int
    end: int
    text: str


class SideOut(BaseModel):
    """One document of the pair. Unit indices are positions in the document (0-based); spans
    are character offsets into `text`."""

    ref: str = Field(description="The query_id or the document id.")
    kind: str = Field(description="`query` (a posted document) or `document` (indexed).")
    title: str
    text: str
    sections: list[SectionOut]
    paragraphs: list[ParagraphOut]
    sentences: list[SentenceOut]
    chunks: list[ChunkOut]


class StatisticsOut(BaseModel):
    population: str = Field(description="`collection`, `pool` or `sample`.")
    documents: int
    mean: list[float] = Field(description="Per source paragraph.")
    std: list[float]


class ParagraphMatrixOut(BaseModel):
    raw: list[list[float]] = Field(description="P[i][j], source paragraph i x target j.")
    normalized: list[list[float]] = Field(
        description="(P - mean_i) / std_i with `statistics`; equal to `raw` without them."
    )


class SentenceAlignmentOut(BaseModel):
    source_sentence: int
    target_sentence: int
    score: float


class AlignmentOut(BaseModel):
    source_paragraph: int
    target_paragraph: int = Field(description="The best target paragraph of this one.")
    score: float
    z: float
    sentences: list[SentenceAlignmentOut]


class TopPairOut(BaseModel):
    rank: int
    source_paragraph: int
    target_paragraph: int
    score: float
    z: float
    source_sentence: int
    target_sentence: int
    sentence_score: float
    source_text: str
    target_text: str
    source_sentence_text: str
    target_sentence_text: str


class ExplainResponse(BaseModel):
    index_version: int
    encoder: str
    took_ms: float
    source: SideOut
    target: SideOut
    score: float = Field(description="The SDR document score, as /similar ranks with it.")
    normalized: bool
    document_cosine: float
    statistics: StatisticsOut | None
    section_matrix: list[list[float]]
    chunk_matrix: list[list[float]]
    paragraph_matrix: ParagraphMatrixOut
    alignments: list[AlignmentOut]
    top_pairs: list[TopPairOut]
    chunk_attention: dict[str, list[list[float]]] | None = Field(
        default=None,
        description="CoLDE only (absent otherwise): each document's chunkwise attention, "
        "`source` and `target`, chunk x chunk; a row holds the weights of one chunk over the "
        "chunks of the neighbouring section.",
    )


class ReindexRequest(RequestModel):
    source: str = Field(
        description="A corpus folder or JSONL file under the allowed roots, or `current` to "
        "re-encode the stored documents of the active version.",
        min_length=1,
        max_length=4096,
    )
    encoder: str | None = Field(
        default=None,
        description="`minilm` or a model directory; default: the active version's encoder "
        "for `current`, else the configured encoder.",
        max_length=4096,
    )
    format: CorpusFormat = CorpusFormat.auto
    chunk_tokens: int | None = Field(default=None, ge=8, le=100_000)
    block_documents: int | None = Field(default=None, ge=1, le=100_000)
    engine: EngineName = Field(
        default=EngineName.local,
        description="Where the encode stage runs: the worker, or Ray Data.",
    )


class JobAccepted(BaseModel):
    job_id: int
    status: str


class JobOut(BaseModel):
    job_id: int
    kind: str
    parameters: dict[str, Any]
    status: str = Field(description="queued, running, succeeded, failed or cancelled")
    progress: dict[str, Any] = Field(
        description="done and total (sentences), rate (per second), eta_seconds, message"
    )
    error: str | None
    cancel_requested: bool
    worker: str | None
    attempts: int
    index_version: int | None = Field(
        description="The version this job published (made active); null unless it succeeded."
    )
    build_version: int | None = Field(
        description="The version the job's build created or resumed, live or not (null until "
        "the build starts): a failed job's suspended build, which a retry resumes; a cancelled "
        "job's removed one; equal to index_version once the job succeeded."
    )
    served: bool = Field(
        description="Whether the API process answering serves index_version now. The "
        "embedded worker marks a job succeeded only once its process serves the version; for "
        "a job run by a separate `docsim worker` or `docsim reindex`, poll until true (each "
        "API process swaps on its own; false again once a newer version is served)."
    )
    created_at: str
    started_at: str | None
    heartbeat_at: str | None
    finished_at: str | None


class JobList(BaseModel):
    jobs: list[JobOut]


class IndexedDocumentIn(DocumentIn):
    id: str = Field(
        min_length=1, max_length=512, description="The document's id (replaced if it exists)."
    )


class DocumentsRequest(RequestModel):
    documents: list[IndexedDocumentIn] = Field(min_length=1, max_length=1000)


class DocumentsChanged(BaseModel):
    index_version: int
    revision: int = Field(description="Document changes applied to this version so far.")
    added: list[str] = []
    replaced: list[str] = []
    deleted: list[str] = []
    took_ms: float


class SectionText(BaseModel):
    title: str
    start: int
    end: int


class StoredDocument(BaseModel):
    id: str
    title: str
    text: str
    metadata: dict[str, Any]
    sections: list[SectionText]
    index_version: int
