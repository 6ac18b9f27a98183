"""`GET /explain`'s answer, `ExplainResponse`: both documents of the pair with their section,
paragraph, sentence and chunk maps, the matrices between them, the best alignments and the
best paragraph pairs. The service builds it (`app.schemas.explain`); the client reads it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from docsim.protocol.answers import SharedPassageOut


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
    shared_passages: list[SharedPassageOut] = Field(
        default_factory=list,
        description="The longest runs of words the two texts share (a quotation), longest "
        "first, none overlapping another; at least `DOCSIM_SEARCH__VERBATIM__PASSAGE_WORDS` words.",
    )
    chunk_attention: dict[str, list[list[float]]] | None = Field(
        default=None,
        description="CoLDE only (absent otherwise): each document's chunkwise attention, "
        "`source` and `target`, chunk x chunk; a row holds the weights of one chunk over the "
        "chunks of the neighbouring section.",
    )
