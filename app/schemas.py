"""Request and response bodies of the HTTP API (pydantic v2).

Both `app.api` (routes) and `app.services` import this module, and it imports neither:
services take request bodies and return domain objects (the indexer's dataclasses), and the
response bodies build themselves from those (`from_...`) at the edge.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Any

import torch
from pydantic import BaseModel, Field, model_validator

from indexer.builder.engines import EngineName
from indexer.jobs.queue import JobRow
from indexer.jobs.updates import DocumentChange
from indexer.search.explain import Explanation, Side
from indexer.search.types import DocumentHit, Granularity, Method, ScoringMode, SearchResult
from indexer.text.corpus import CorpusFormat, has_nul
from indexer.text.documents import SourceDocument

DECIMALS = 5  # of the scores and matrices /explain returns


def _took_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()` reading), as responses report."""
    return round((time.perf_counter() - started) * 1000, 2)


def _rounded(matrix: torch.Tensor) -> list[list[float]]:
    return matrix.double().round(decimals=DECIMALS).tolist()


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

    @classmethod
    def from_result(
        cls,
        result: SearchResult,
        request: SimilarRequest,
        *,
        query_id: str,
        index_version: int,
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
        return cls(
            query_id=query_id,
            index_version=index_version,
            encoder=encoder,
            took_ms=_took_ms(started),
            mode=result.mode,
            method=request.method,
            granularity=request.granularity,
            normalize=request.normalize,
            scored_documents=result.scored_documents,
            results=results,
        )


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

    @classmethod
    def from_side(cls, side: Side) -> SideOut:
        return cls(
            ref=side.ref,
            kind=side.kind,
            title=side.title,
            text=side.text,
            sections=[
                SectionOut(index=i, title=title, start=s.start, end=s.end)
                for i, (title, s) in enumerate(zip(side.section_titles, side.sections, strict=True))
            ],
            paragraphs=[
                ParagraphOut(index=i, section=side.paragraph_section[i], start=p.start, end=p.end)
                for i, p in enumerate(side.paragraphs)
            ],
            sentences=[
                SentenceOut(index=k, paragraph=side.sentence_paragraph[k], start=s.start, end=s.end)
                for k, s in enumerate(side.sentences)
            ],
            chunks=[
                ChunkOut(
                    index=c,
                    section=side.chunk_section[c],
                    start=s.start,
                    end=s.end,
                    text=side.text[s.start : s.end],
                )
                for c, s in enumerate(side.chunks)
            ],
        )


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

    @classmethod
    def from_explanation(
        cls, explanation: Explanation, *, index_version: int, encoder: str, started: float
    ) -> ExplainResponse:
        """`explanation` as data, scores and matrices rounded to `DECIMALS`; `started` is the
        request's `time.perf_counter()` reading."""
        alignment = explanation.alignment
        stats = explanation.stats
        source_paragraph = explanation.source.sentence_paragraph
        per_paragraph: list[list[SentenceAlignmentOut]] = [
            [] for _ in explanation.source.paragraphs
        ]
        for k, (r, score) in enumerate(
            zip(alignment.sentence_target.tolist(), alignment.sentence_score.tolist(), strict=True)
        ):
            per_paragraph[source_paragraph[k]].append(
                SentenceAlignmentOut(
                    source_sentence=k, target_sentence=r, score=round(score, DECIMALS)
                )
            )
        best = alignment.best_paragraph.tolist()
        return cls(
            index_version=index_version,
            encoder=encoder,
            took_ms=_took_ms(started),
            source=SideOut.from_side(explanation.source),
            target=SideOut.from_side(explanation.target),
            score=explanation.score,
            normalized=stats is not None,
            document_cosine=explanation.document_cosine,
            statistics=(
                StatisticsOut(
                    population=stats.population,
                    documents=stats.documents,
                    mean=stats.stats.mean.tolist(),
                    std=stats.stats.std.tolist(),
                )
                if stats is not None
                else None
            ),
            section_matrix=_rounded(explanation.section_matrix),
            chunk_matrix=_rounded(explanation.chunk_matrix),
            paragraph_matrix=ParagraphMatrixOut(
                raw=_rounded(alignment.paragraphs), normalized=_rounded(alignment.normalized)
            ),
            alignments=[
                AlignmentOut(
                    source_paragraph=i,
                    target_paragraph=j,
                    score=float(alignment.paragraphs[i, j]),
                    z=float(alignment.normalized[i, j]),
                    sentences=per_paragraph[i],
                )
                for i, j in enumerate(best)
            ],
            top_pairs=[TopPairOut(**vars(p)) for p in explanation.top_pairs],
            chunk_attention=(
                {k: _rounded(v) for k, v in explanation.chunk_attention.items()}
                if explanation.chunk_attention is not None
                else None
            ),
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

    @classmethod
    def from_row(cls, job: JobRow, served_version: int | None) -> JobOut:
        """The job as the API shows it; `served_version` is the version this process serves."""

        def iso(moment):  # noqa: ANN001, ANN202 - datetime or None
            return moment.isoformat() if moment is not None else None

        return cls(
            job_id=job.job_id,
            kind=job.kind,
            parameters=job.parameters,
            status=job.status,
            progress={
                "done": job.done,
                "total": job.total,
                "unit": job.unit,
                "rate": job.rate,
                "eta_seconds": job.eta_seconds,
                "message": job.message,
            },
            error=job.error,
            cancel_requested=job.cancel_requested,
            worker=job.worker,
            attempts=job.attempts,
            index_version=job.published_version,
            build_version=job.version_id,
            served=job.published_version is not None and job.published_version == served_version,
            created_at=job.created_at.isoformat(),
            started_at=iso(job.started_at),
            heartbeat_at=iso(job.heartbeat_at),
            finished_at=iso(job.finished_at),
        )


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

    @classmethod
    def from_change(cls, change: DocumentChange, started: float) -> DocumentsChanged:
        """What `change` did; `started` is the request's `time.perf_counter()` reading."""
        return cls(
            index_version=change.version_id,
            revision=change.revision,
            added=change.added,
            replaced=change.replaced,
            deleted=change.deleted,
            took_ms=_took_ms(started),
        )


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

    @classmethod
    def from_source(cls, source: SourceDocument, index_version: int) -> StoredDocument:
        return cls(
            id=source.doc_id,
            title=source.title,
            text=source.text,
            metadata=dict(source.metadata),
            sections=[
                SectionText(title=s.title, start=s.start, end=s.end) for s in source.sections
            ],
            index_version=index_version,
        )
