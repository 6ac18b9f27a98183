"""GET /explain."""

from __future__ import annotations

from enum import Enum

import torch

from docsim.app.schemas.common import took_ms
from docsim.protocol.explanations import (
    AlignmentOut,
    ChunkOut,
    ExplainResponse,
    ParagraphMatrixOut,
    ParagraphOut,
    SectionOut,
    SentenceAlignmentOut,
    SentenceOut,
    SideOut,
    StatisticsOut,
    TopPairOut,
)
from docsim.search.api import PairExplanation, Side

DECIMALS = 5  # of the scores and matrices /explain returns


def _rounded(matrix: torch.Tensor) -> list[list[float]]:
    return matrix.double().round(decimals=DECIMALS).tolist()


class ExplainFormat(str, Enum):
    json = "json"
    png = "png"
    html = "html"


def side_out(side: Side) -> SideOut:
    return SideOut(
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


def explain_response(
    explanation: PairExplanation, *, index_version: int, encoder: str, started: float
) -> ExplainResponse:
    """`explanation` as data, scores and matrices rounded to `DECIMALS`; `started` is the
    request's `time.perf_counter()` reading."""
    alignment = explanation.alignment
    stats = explanation.stats
    source_paragraph = explanation.source.sentence_paragraph
    per_paragraph: list[list[SentenceAlignmentOut]] = [[] for _ in explanation.source.paragraphs]
    for k, (r, score) in enumerate(
        zip(alignment.sentence_target.tolist(), alignment.sentence_score.tolist(), strict=True)
    ):
        per_paragraph[source_paragraph[k]].append(
            SentenceAlignmentOut(source_sentence=k, target_sentence=r, score=round(score, DECIMALS))
        )
    best = alignment.best_paragraph.tolist()
    return ExplainResponse(
        index_version=index_version,
        encoder=encoder,
        took_ms=took_ms(started),
        source=side_out(explanation.source),
        target=side_out(explanation.target),
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
        shared_passages=explanation.shared_passages,
        chunk_attention=(
            {k: _rounded(v) for k, v in explanation.chunk_attention.items()}
            if explanation.chunk_attention is not None
            else None
        ),
    )
