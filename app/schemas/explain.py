"""GET /explain."""

from __future__ import annotations

from enum import Enum

import torch
from pydantic import BaseModel, Field

from docsim.app.schemas.common import took_ms
from docsim.search.api import Explanation, Side

DECIMALS = 5  # of the scores and matrices /explain returns


def _rounded(matrix: torch.Tensor) -> list[list[float]]:
    return matrix.double().round(decimals=DECIMALS).tolist()


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
    page: int | None = Field(default=None, description="Its page, in a PDF; else null.")


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
                ParagraphOut(
                    index=i,
                    section=side.paragraph_section[i],
                    start=p.start,
                    end=p.end,
                    page=side.page(i),
                )
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
    source_page: int | None = Field(description="The source paragraph's page (PDF), or null.")
    target_page: int | None = Field(description="The target paragraph's page (PDF), or null.")


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
            took_ms=took_ms(started),
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
