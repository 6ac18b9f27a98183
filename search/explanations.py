"""Why two documents are similar: every map behind one source/target pair.

`explain_pair` joins two queries (a posted document kept after `/similar`, or indexed
documents) into an `PairExplanation`: the SDR document score with the statistics the ranking used,
the CoLDE-style section and chunk cosine maps, SDR's paragraph matrix (raw and normalised),
each source paragraph's best target paragraph with its sentence alignments, the top pairs
with their text, and the passages the two texts share word for word (`lexical.passages`).
The maps themselves are pure tensor code in `models.kernels.explain`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from docsim.models.encoders.encoder import DocumentInput
from docsim.models.kernels.explain import PairAlignment, align_pair, cosine_matrix
from docsim.protocol.answers import SharedPassageOut
from docsim.search.errors import PairTooLargeError
from docsim.search.lexical.passages import shared_passages
from docsim.search.searcher import Searcher
from docsim.search.types import ParagraphStats, Query


@dataclass(frozen=True)
class Span:
    start: int
    end: int


@dataclass(frozen=True)
class Side:
    """One document of the pair: its text and the spans of its units, in document order.

    `paragraph_section`, `sentence_paragraph` and `chunk_section` give each unit's parent;
    `paragraph_pages` each paragraph's page in a paged (PDF) source, [] for other sources.
    """

    ref: str
    kind: str  # "query" or "document"
    title: str
    text: str
    section_titles: list[str]
    sections: list[Span]
    paragraphs: list[Span]
    sentences: list[Span]
    chunks: list[Span]
    paragraph_section: list[int]
    sentence_paragraph: list[int]
    chunk_section: list[int]
    paragraph_pages: list[int | None]

    def page(self, paragraph: int) -> int | None:
        return self.paragraph_pages[paragraph] if self.paragraph_pages else None

    def snippet(self, span: Span, limit: int = 400) -> str:
        text = self.text[span.start : span.end]
        return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class TopPair:
    """A source paragraph and its best target paragraph, with their best sentence pair."""

    rank: int
    source_paragraph: int
    target_paragraph: int
    score: float  # raw P
    z: float  # normalised (equal to `score` without statistics)
    source_sentence: int
    target_sentence: int
    sentence_score: float
    source_text: str
    target_text: str
    source_sentence_text: str
    target_sentence_text: str
    source_page: int | None  # the paragraphs' pages, in paged (PDF) documents
    target_page: int | None


@dataclass(frozen=True)
class PairExplanation:
    source: Side
    target: Side
    score: float  # SDR document score, as `/similar` computes it with `stats`
    document_cosine: float  # cosine of the two document vectors
    stats: ParagraphStats | None  # None: the ranking did not normalise
    section_matrix: torch.Tensor  # (S_s, S_t)
    chunk_matrix: torch.Tensor  # (C_s, C_t)
    alignment: PairAlignment
    top_pairs: list[TopPair]
    # CoLDE only: each document's chunkwise attention (C, C), rows attend over the chunks of
    # the neighbouring section; None for encoders without it
    chunk_attention: dict[str, torch.Tensor] | None = None
    # the longest runs of words the two texts share, longest first
    shared_passages: list[SharedPassageOut] = field(default_factory=list)


def _side(query: Query, ref: str, kind: str, searcher: Searcher) -> Side:
    searcher.level_vectors(query, "chunk")  # a posted query's chunks are encoded on first use

    def spans(level: str) -> list[Span]:
        return [Span(a, b) for a, b in query.level_spans[level]]

    sections, paragraphs, chunks = spans("section"), spans("paragraph"), spans("chunk")
    section_starts = np.array([s.start for s in sections])
    return Side(
        ref=ref,
        kind=kind,
        title=query.title,
        text=query.text,
        section_titles=list(query.section_titles),
        sections=sections,
        paragraphs=paragraphs,
        sentences=spans("sentence"),
        chunks=chunks,
        paragraph_section=_parents(section_starts, paragraphs),
        sentence_paragraph=query.sentence_paragraph.tolist(),
        chunk_section=_parents(section_starts, chunks),
        paragraph_pages=list(query.paragraph_pages),
    )


def _parents(parent_starts: np.ndarray, children: list[Span]) -> list[int]:
    """The parent of each child span, by the last parent starting at or before it."""
    at = np.searchsorted(parent_starts, [c.start for c in children], side="right") - 1
    parents: list[int] = np.maximum(at, 0).tolist()
    return parents


def explain_pair(
    searcher: Searcher,
    source: Query,
    source_ref: str,
    source_kind: str,
    target_id: str,
    stats: ParagraphStats | None,
    *,
    max_cells: int = 1_000_000,
    top_pairs: int = 10,
    passage_words: int = 8,
    passages: int = 20,
) -> PairExplanation:
    """Everything that makes `target_id` similar (or not) to the source.

    Args:
        searcher: the searcher over the active version.
        source: the source query (posted, or an indexed document).
        source_ref, source_kind: how the caller named the source (`query` or `document`).
        target_id: an indexed document id.
        stats: the normalisation statistics of the ranking (None for `normalize=false`).
        max_cells: the largest paragraph matrix to compute (PairTooLargeError beyond).
        top_pairs: how many top paragraph pairs to return with their text.
        passage_words: the fewest words of a shared passage.
        passages: how many shared passages to return (0: none).

    Raises:
        DocumentNotFoundError: `target_id` is not in the active version.
        PairTooLargeError: the paragraph matrix would exceed `max_cells`.
    """
    target = searcher.query_from_index(target_id)
    n_i, n_j = len(source.paragraph_lengths), len(target.paragraph_lengths)
    if n_i * n_j > max_cells:
        raise PairTooLargeError(
            f"the pair has {n_i} x {n_j} = {n_i * n_j} paragraph pairs; the limit is {max_cells}"
        )
    source_side = _side(source, source_ref, source_kind, searcher)
    target_side = _side(target, target_id, "document", searcher)
    alignment = align_pair(
        source.sentence_vectors,
        source.paragraph_lengths,
        target.sentence_vectors,
        target.paragraph_lengths,
        stats.stats if stats is not None else None,
        searcher.sentence_weights(source),
    )
    vectors = searcher.level_vectors
    explanation = PairExplanation(
        source=source_side,
        target=target_side,
        score=alignment.score,
        document_cosine=float(
            cosine_matrix(vectors(source, "document"), vectors(target, "document"))[0, 0]
        ),
        stats=stats,
        section_matrix=cosine_matrix(vectors(source, "section"), vectors(target, "section")),
        chunk_matrix=cosine_matrix(vectors(source, "chunk"), vectors(target, "chunk")),
        alignment=alignment,
        top_pairs=_top_pairs(source_side, target_side, alignment, top_pairs),
        chunk_attention=_chunk_attention(searcher, source_side, target_side),
        shared_passages=(
            shared_passages(source.text, target.text, min_words=passage_words, limit=passages)
            if passages
            else []
        ),
    )
    return explanation


def _chunk_attention(
    searcher: Searcher, source: Side, target: Side
) -> dict[str, torch.Tensor] | None:
    """The encoder's chunkwise attention of both documents (CoLDE), by encoding them again:
    attention weights are not stored in the index."""
    if searcher.encoder.identity().get("type") != "colde":
        return None
    maps = {}
    for key, side in (("source", source), ("target", target)):
        attention = searcher.encoder.encode_documents([_encoder_input(side)])[0].chunk_attention
        if attention is None:  # CoLDE always reports it; an encoder that does not has none
            return None
        maps[key] = attention
    return maps


def _encoder_input(side: Side) -> DocumentInput:
    text = side.text
    return DocumentInput(
        sentences=[text[s.start : s.end] for s in side.sentences],
        sentence_paragraph=side.sentence_paragraph,
        paragraph_section=side.paragraph_section,
        chunks=[text[c.start : c.end] for c in side.chunks],
        chunk_section=side.chunk_section,
        chunk_tokens=[1] * len(side.chunks),
    )


def _top_pairs(source: Side, target: Side, alignment: PairAlignment, k: int) -> list[TopPair]:
    """The `k` source paragraphs whose best target paragraph scores highest."""
    rows = torch.arange(len(alignment.best_paragraph))
    best_z = alignment.normalized[rows, alignment.best_paragraph]  # (I,)
    order = torch.argsort(best_z, descending=True, stable=True)[:k].tolist()
    source_paragraph = torch.tensor(source.sentence_paragraph)
    pairs = []
    for rank, i in enumerate(order, start=1):
        j = int(alignment.best_paragraph[i])
        members = torch.nonzero(source_paragraph == i).flatten()  # source sentences of i
        best = members[torch.argmax(alignment.sentence_score[members])]
        s, t = int(best), int(alignment.sentence_target[best])
        pairs.append(
            TopPair(
                rank=rank,
                source_paragraph=i,
                target_paragraph=j,
                score=float(alignment.paragraphs[i, j]),
                z=float(alignment.normalized[i, j]),
                source_sentence=s,
                target_sentence=t,
                sentence_score=float(alignment.sentence_score[s]),
                source_text=source.snippet(source.paragraphs[i]),
                target_text=target.snippet(target.paragraphs[j]),
                source_sentence_text=source.snippet(source.sentences[s]),
                target_sentence_text=target.snippet(target.sentences[t]),
                source_page=source.page(i),
                target_page=target.page(j),
            )
        )
    return pairs
