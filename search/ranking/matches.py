"""The pipeline's last stage: ranked documents as hits, each with the paragraph pairs that
matched best (for SDR's rankings) and the passages it shares with the query word for word."""

from __future__ import annotations

import numpy as np
import torch
from sqlalchemy import Engine

from docsim.indexer.store.reader import document_texts, paragraph_offsets
from docsim.protocol.answers import DocumentResult, MatchOut
from docsim.protocol.choices import Method
from docsim.search.lexical.passages import shared_passages
from docsim.search.ranking.scorer import RankedScores, ScoringContext
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.types import Query


def document_hits(
    index: LoadedIndex,
    engine: Engine,
    query: Query,
    ranked: np.ndarray,
    scores: np.ndarray,
    pmatrix: torch.Tensor | None = None,
    first_column: np.ndarray | None = None,
    matches_per_result: int = 0,
) -> list[DocumentResult]:
    """The documents at positions `ranked` with their `scores` `(D,)`; given SDR's paragraph
    matrix `(I, J)` and each document's first column in it `(D,)`, each hit also gets its
    `matches_per_result` best (query paragraph, document paragraph) pairs."""
    hits = [
        DocumentResult(
            document_id=index.external_ids[d],
            title=index.titles[d],
            score=float(scores[d]),
            rank=r,
            matches=[],
        )
        for r, d in enumerate(ranked, start=1)
    ]
    if pmatrix is None or first_column is None or not len(ranked) or matches_per_result <= 0:
        return hits
    starts = index.doc_paragraph_start
    wanted: list[int] = []
    per_hit = []
    for d in ranked:
        c0 = int(first_column[d])
        block = pmatrix[:, c0 : c0 + starts[d + 1] - starts[d]]  # (I, j)
        best, where = block.max(dim=1)  # (I,)
        top = torch.argsort(best, descending=True, stable=True)[:matches_per_result]
        pairs = [
            (int(i), int(index.paragraph_ids[starts[d] + int(where[i])]), float(best[i]))
            for i in top
        ]
        wanted.extend(p for _, p, _ in pairs)
        per_hit.append(pairs)
    offsets = paragraph_offsets(engine, wanted)
    texts = document_texts(engine, [int(index.doc_ids[d]) for d in ranked])
    for hit, d, pairs in zip(hits, ranked, per_hit, strict=True):
        text = texts[int(index.doc_ids[d])]
        for i, pid, score in pairs:
            s0, s1 = query.paragraphs[i]
            t0, t1, page = offsets[pid]
            hit.matches.append(
                MatchOut(
                    source_paragraph=i,
                    source_start=s0,
                    source_end=s1,
                    target_paragraph_id=pid,
                    target_start=t0,
                    target_end=t1,
                    score=score,
                    source_text=query.text[s0:s1],
                    target_text=text[t0:t1],
                    target_page=page,
                    source_page=query.paragraph_pages[i] if query.paragraph_pages else None,
                )
            )
    return hits


def paragraph_hits(
    context: ScoringContext,
    engine: Engine,
    query: Query,
    ranking: RankedScores,
    ranked: np.ndarray,
    scores: np.ndarray,
    matches_per_result: int,
) -> list[DocumentResult]:
    """The `ranked` documents with `scores`, each with its best paragraph pairs with `query`
    as `ranking`, the query's own ranking by one of SDR's rankings, found them."""
    sdr_scorer, sdr = context.sdr, ranking.sdr
    shown = np.sort(ranked) if matches_per_result > 0 else ranked[:0]
    if sdr is None or ranking.method is Method.sdr_window:  # pairs of real paragraphs: raw P
        explaining = sdr_scorer.explain_columns(query, shown, None)
    elif sdr.pmatrix is None or (sdr.first_column[shown] < 0).any():
        # scored on shards, or ranked without SDR scoring it (a lexical method's pool, or
        # another example's candidates): the ranked documents' columns here
        explaining = sdr_scorer.explain_columns(query, shown, sdr.stats)
    else:
        explaining = sdr
    return document_hits(
        context.index,
        engine,
        query,
        ranked,
        scores,
        explaining.pmatrix,
        explaining.first_column,
        matches_per_result,
    )


def add_shared_passages(
    index: LoadedIndex,
    engine: Engine,
    query_text: str,
    hits: list[DocumentResult],
    ranked: np.ndarray,
    per_hit: int,
    min_words: int,
) -> None:
    """Give each of `hits`, the documents at positions `ranked` `(h,)`, its `per_hit` longest
    passages (at least `min_words` words) shared word for word with `query_text`."""
    if per_hit <= 0 or not hits:
        return
    doc_ids = index.doc_ids[ranked].tolist()
    texts = document_texts(engine, doc_ids)
    for hit, doc_id in zip(hits, doc_ids, strict=True):
        hit.shared_passages = shared_passages(
            query_text, texts[doc_id], min_words=min_words, limit=per_hit
        )
