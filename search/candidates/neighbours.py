"""Candidate generation for SDR's candidate mode: the documents worth scoring exactly."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from docsim.models.encoders.pooling import segment_mean
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.settings import SearchSettings
from docsim.search.types import Query


def retrieve_candidates(
    index: LoadedIndex,
    sentence_doc: np.ndarray,
    query: Query,
    allowed: np.ndarray,
    settings: SearchSettings,
) -> np.ndarray:
    """Positions (ascending) of the documents holding the nearest sentences of each query
    sentence, the nearest paragraphs of each query paragraph, and the nearest documents, at
    most `candidates.max_documents` of them (those whose best hit is strongest), within
    `allowed` (searched within it when it leaves out more than the query's source).
    `sentence_doc` `(n,)` is the document position of each sentence row.

    Paragraph and document probes are the mean of the query's sentence vectors (per paragraph,
    and overall), which needs no further encoding of the query.
    """
    docs: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    # a pool or filter that leaves out more than the source is searched within: the nearest
    # units of the whole collection could all lie outside it
    narrowed = len(allowed) < index.n_documents - (query.source_index is not None)

    def within(level: str) -> np.ndarray | None:
        return index.unit_ids_of(level, allowed) if narrowed else None

    sentences = query.sentence_vectors  # (n, d)
    for hits in index.indices["sentence"].search(
        sentences.numpy(), settings.candidates.sentence_k, within=within("sentence")
    ):
        docs.append(sentence_doc[np.searchsorted(index.ids["sentence"], hits.ids)])
        scores.append(hits.scores)
    n_paragraphs = len(query.paragraph_lengths)
    segments = torch.repeat_interleave(torch.arange(n_paragraphs), query.paragraph_lengths)
    probes = segment_mean(sentences, segments, n_paragraphs)  # (I, d)
    for hits in index.indices["paragraph"].search(
        probes.numpy(), settings.candidates.paragraph_k, within=within("paragraph")
    ):
        rows = np.searchsorted(index.ids["paragraph"], hits.ids)
        docs.append(np.searchsorted(index.doc_paragraph_start, rows, side="right") - 1)
        scores.append(hits.scores)
    centroid = F.normalize(sentences.mean(0, keepdim=True), dim=-1)  # (1, d)
    for hits in index.indices["document"].search(
        centroid.numpy(), settings.candidates.document_k, within=within("document")
    ):
        docs.append(np.searchsorted(index.doc_ids, hits.ids))
        scores.append(hits.scores)
    best = np.full(index.n_documents, -np.inf)
    np.maximum.at(
        best, np.concatenate([np.empty(0, np.int64), *docs]), np.concatenate([np.empty(0), *scores])
    )
    mask = np.zeros(index.n_documents, dtype=bool)
    mask[allowed] = True
    best[~mask] = -np.inf
    found = np.flatnonzero(np.isfinite(best))
    if len(found) > settings.candidates.max_documents:
        found = found[np.argsort(-best[found], kind="stable")[: settings.candidates.max_documents]]
    return np.sort(found)
