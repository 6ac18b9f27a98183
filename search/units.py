"""Unit-level search: the sections, paragraphs or sentences of other documents nearest to any
unit of the query, found through the level's FAISS index (or the shards) and scored here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch
from sqlalchemy import Engine

from docsim.indexer.store.reader import document_texts, level_unit_rows
from docsim.protocol.answers import UnitResult
from docsim.protocol.choices import ScoringMode
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.served.mapped_rows import MappedRows
from docsim.search.types import SearchResult


def similar_units(
    index: LoadedIndex,
    engine: Engine,
    level: str,
    vectors: np.ndarray,
    *,
    excluded: Sequence[int],
    allowed: np.ndarray | None,
    top_k: int,
    seed: int,
    group_size: int | None = None,
) -> SearchResult:
    """The `top_k` units of `level` nearest to any row of `vectors` `(m, d)`, each scored by
    its best cosine, outside the documents at the positions `excluded` (the query's own) and
    inside the positions `allowed` when given. Ties: a scrambled order (Knuth's
    multiplicative hash), not the id order.

    With `group_size`, `top_k` counts documents instead: the `top_k` documents whose best
    unit ranks highest, each with its best `group_size` units, all in score order (the
    ungrouped ranking with every unit beyond its document's `group_size`-th left out, cut
    after `top_k` documents).
    """
    k = (top_k if group_size is None else top_k * group_size) * 4 + 10
    # a pool is searched among its own units only: nearest units of the whole collection
    # would crowd its units out (fewer than top_k hits, or scores below their best)
    within = index.unit_ids_of(level, allowed) if allowed is not None else None
    keep_doc = (
        np.ones(index.n_documents, dtype=bool)
        if allowed is None
        else np.zeros(index.n_documents, dtype=bool)
    )
    if allowed is not None:
        keep_doc[allowed] = True
    keep_doc[list(excluded)] = False
    available = len(index.ids[level]) if within is None else len(within)
    while True:
        found = index.indices[level].search(vectors, k, within=within)  # a list of (k,) per row
        units = np.concatenate([np.empty(0, np.int64), *(h.ids for h in found)]).astype(np.int64)
        query_rows = np.repeat(np.arange(len(found)), [len(h.ids) for h in found])  # (p,)
        best = best_cosines(index.ids[level], index.vectors[level], vectors, units, query_rows)
        order = sorted(best, key=lambda u: (-best[u], (u * 2654435761 + seed) % 4294967296))
        # the k nearest of each row hold the k best units by best cosine, exactly (a unit's
        # best row has fewer than k better units): that prefix of `order` is exact where each
        # row's search is (Flat and the shards; an IVF level or the compressed sentence scan
        # is as close as its own search)
        complete = k >= available
        exact = order if complete else order[:k]
        ranked = [u for u in exact if keep_doc[_document_of(index, level, u)]]
        if group_size is None:
            chosen = ranked[:top_k]
            enough = len(chosen) >= top_k
        else:
            chosen = _grouped(index, level, ranked, top_k, group_size)
            per_document = Counter(_document_of(index, level, u) for u in chosen)
            units = np.diff(index.doc_unit_start[level])  # (D,) a document's units
            enough = len(per_document) >= top_k and all(
                n >= min(group_size, int(units[d])) for d, n in per_document.items()
            )
        if enough or complete:
            break
        k *= 4  # the exact prefix is too short for the answer: look deeper
    scored = int(keep_doc.sum())
    return SearchResult(
        results=unit_hits(index, engine, level, chosen, best),
        mode=ScoringMode.exhaustive,
        scored_documents=scored,
    )


def unit_hits(
    index: LoadedIndex, engine: Engine, level: str, chosen: list[int], best: dict[int, float]
) -> list[UnitResult]:
    """The units `chosen` of `level`, in that order, scored `best`, with their texts and
    documents."""
    rows = level_unit_rows(engine, level, chosen)
    texts = document_texts(engine, sorted({rows[u]["doc_id"] for u in chosen}))
    results = []
    for rank, u in enumerate(chosen, start=1):
        row = rows[u]
        d = _document_of(index, level, u)
        results.append(
            UnitResult(
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
    return results


def _document_of(index: LoadedIndex, level: str, unit_id: int) -> int:
    """The position of the document holding unit `unit_id` of `level`."""
    row = int(np.searchsorted(index.ids[level], unit_id))
    return int(np.searchsorted(index.doc_unit_start[level], row, side="right")) - 1


def _grouped(
    index: LoadedIndex, level: str, ranked: list[int], top_k: int, group_size: int
) -> list[int]:
    """The units of `ranked` (best first) of its first `top_k` documents, at most
    `group_size` (the best) of each."""
    taken: dict[int, int] = {}
    out = []
    for u in ranked:
        d = _document_of(index, level, u)
        if taken.get(d, 0) >= group_size:
            continue
        if d not in taken and len(taken) >= top_k:
            continue
        taken[d] = taken.get(d, 0) + 1
        out.append(u)
    return out


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
