"""Unit-level search: the sections, paragraphs or sentences of other documents nearest to any
unit of the query, through the level's FAISS index."""

from __future__ import annotations

import numpy as np
from sqlalchemy import Engine

from indexer.search.loaded_index import LoadedIndex
from indexer.search.types import SearchResult, UnitHit
from indexer.store.reader import document_texts, level_unit_rows, units_of_documents


def similar_units(
    index: LoadedIndex,
    engine: Engine,
    level: str,
    vectors: np.ndarray,
    *,
    source_doc: int | None,
    allowed_docs: set[int] | None,
    top_k: int,
    seed: int,
) -> SearchResult:
    """The `top_k` units of `level` nearest to any row of `vectors` `(m, d)`, each scored by
    its best cosine, outside the document `source_doc` and inside `allowed_docs` (doc ids)
    when given. Ties: a scrambled order (Knuth's multiplicative hash), not the id order."""
    k = top_k * 4 + 10
    # a pool is searched among its own units only: nearest units of the whole collection
    # would crowd its units out (fewer than top_k hits, or scores below their best)
    within = (
        units_of_documents(engine, level, sorted(allowed_docs))
        if allowed_docs is not None
        else None
    )
    best: dict[int, float] = {}
    for hits in index.indices[level].search(vectors, k, within=within):
        for unit_id, score in zip(hits.ids.tolist(), hits.scores.tolist(), strict=True):
            if score > best.get(unit_id, -np.inf):
                best[unit_id] = score
    rows = level_unit_rows(engine, level, list(best))
    keep = [
        u
        for u in best
        if rows[u]["doc_id"] != source_doc
        and (allowed_docs is None or rows[u]["doc_id"] in allowed_docs)
    ]
    keep.sort(key=lambda u: (-best[u], (u * 2654435761 + seed) % 4294967296))
    keep = keep[:top_k]
    texts = document_texts(engine, sorted({rows[u]["doc_id"] for u in keep}))
    position = {int(d): i for i, d in enumerate(index.doc_ids)}
    results = []
    for rank, u in enumerate(keep, start=1):
        row = rows[u]
        d = position[row["doc_id"]]
        results.append(
            UnitHit(
                unit_id=u,
                level=level,
                document_id=index.external_ids[d],
                title=index.titles[d],
                score=float(best[u]),
                rank=rank,
                start=row["char_start"],
                end=row["char_end"],
                text=texts[row["doc_id"]][row["char_start"] : row["char_end"]],
                section_title=row.get("title"),
            )
        )
    scored = (
        len(allowed_docs)
        if allowed_docs is not None
        else index.n_documents - (source_doc is not None)
    )
    return SearchResult(results=results, mode="exhaustive", scored_documents=scored)
