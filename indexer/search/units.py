"""Unit-level search: the sections, paragraphs or sentences of other documents nearest to any
unit of the query, found through the level's FAISS index (or the shards) and scored here."""

from __future__ import annotations

import numpy as np
import torch
from sqlalchemy import Engine

from indexer.search.loaded_index import LoadedIndex
from indexer.search.mapped_rows import MappedRows
from indexer.search.types import ScoringMode, SearchResult, UnitHit
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
    found = index.indices[level].search(vectors, k, within=within)  # a list of (k,) per row
    unit_ids = np.concatenate([np.empty(0, np.int64), *(h.ids for h in found)]).astype(np.int64)
    query_rows = np.repeat(np.arange(len(found)), [len(h.ids) for h in found])  # (p,)
    best = best_cosines(index.ids[level], index.vectors[level], vectors, unit_ids, query_rows)
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
    return SearchResult(results=results, mode=ScoringMode.exhaustive, scored_documents=scored)


def best_cosines(
    level_ids: np.ndarray,
    level_vectors: torch.Tensor | MappedRows,
    vectors: np.ndarray,
    unit_ids: np.ndarray,
    query_rows: np.ndarray,
    block: int = 8192,
) -> dict[int, float]:
    """Each found unit's best cosine over the query rows that found it: `unit_ids` `(p,)` found
    by rows `query_rows` `(p,)` of `vectors` `(m, d)`, the units' vectors being the rows of
    `level_vectors` `(n, d)` whose ids are `level_ids` `(n,)` (ascending).

    The cosines are computed again here, one pair at a time (a product and a sum over d, the
    same arithmetic for every pair whatever the batch), instead of taken from the search: a
    FAISS index and the shards round the same cosine differently in its last bit, so units
    with equal cosines (a sentence repeated in two judgments) would be ordered by whichever
    searched. This way the service in one process and on shards rank units alike."""
    if not len(unit_ids):
        return {}
    units, which = np.unique(unit_ids, return_inverse=True)  # (u,), (p,)
    rows = np.searchsorted(level_ids, units)  # (u,) the level's rows
    held = level_vectors[torch.from_numpy(rows)].float()  # (u, d)
    queries = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))  # (m, d)
    which_t, query_t = torch.from_numpy(which), torch.from_numpy(query_rows)
    cosines = torch.cat(
        [
            (held[which_t[i : i + block]] * queries[query_t[i : i + block]]).sum(dim=1)
            for i in range(0, len(which), block)
        ]
    )  # (p,)
    best = torch.full((len(units),), -torch.inf).scatter_reduce(
        0, which_t, cosines, reduce="amax"
    )  # (u,)
    return dict(zip(units.tolist(), best.tolist(), strict=True))
