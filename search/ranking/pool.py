"""The pipeline's first stage: which documents a query may rank, in which scoring mode, and
which of them candidate mode scores (its first pass)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from docsim.indexer.errors import DocumentNotFoundError
from docsim.protocol.choices import ScoringMode
from docsim.protocol.filters import Filter
from docsim.protocol.requests import SimilarOptions
from docsim.search.arrays import Positions
from docsim.search.candidates.centroids import searched
from docsim.search.candidates.neighbours import retrieve_candidates
from docsim.search.ranking.scorer import ScoringContext
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.settings import SearchSettings
from docsim.search.types import Query


def allowed_positions(
    positions: Mapping[str, int],
    n_documents: int,
    query: Query,
    candidates: Sequence[str] | None,
) -> Positions:
    """Document positions that may be ranked (all `n_documents`, or the pool of `candidates`,
    placed by `positions`), minus the query's source.

    Raises:
        DocumentNotFoundError: a candidate is not in this version.
    """
    if candidates is None:
        allowed = np.arange(n_documents)
    else:
        missing = [c for c in candidates if c not in positions]
        if missing:
            raise DocumentNotFoundError(
                f"{len(missing)} candidate(s) not in the active index, e.g. {missing[:3]}"
            )
        allowed = np.unique(np.array([positions[c] for c in candidates], dtype=np.int64))
    if query.source_index is not None:
        allowed = allowed[allowed != query.source_index]
    return allowed


def allowed(
    index: LoadedIndex,
    positions: Mapping[str, int],
    query: Query,
    candidates: Sequence[str] | None,
    filter: Filter | None = None,
    exclude: Sequence[str] = (),
) -> Positions:
    """The positions `query` may rank: the `candidates` (all when None) that `filter` keeps,
    minus the query's source and the documents `exclude` names (those this version holds)."""
    found = allowed_positions(positions, index.n_documents, query, candidates)
    if filter is not None:
        found = found[index.filter_columns.mask(filter)[found]]
    if exclude:
        left_out = [positions[d] for d in exclude if d in positions]
        found = found[~np.isin(found, left_out)]
    return found


def sentences_of(index: LoadedIndex, docs: Positions) -> int:
    """How many sentences the documents at `docs` hold."""
    start = index.doc_unit_start["sentence"]
    return int((start[docs + 1] - start[docs]).sum())


def scoring_mode(
    options: SimilarOptions, n_sentences: int, settings: SearchSettings, query_sentences: int = 0
) -> ScoringMode:
    """`options.mode`, with `auto` resolved by cost: exhaustive over a pool, or over a
    collection (or the documents a filter keeps) of `n_sentences` sentences, at most
    `exhaustive.max_sentences`, whose products with the query's `query_sentences` are at most
    `exhaustive.max_products`; else candidate."""
    if options.mode is not ScoringMode.auto:
        return options.mode
    if options.candidates is not None:
        return ScoringMode.exhaustive
    if (
        n_sentences <= settings.exhaustive.max_sentences
        and n_sentences * query_sentences <= settings.exhaustive.max_products
    ):
        return ScoringMode.exhaustive
    return ScoringMode.candidate


def first_pass(settings: SearchSettings, compressed: bool, n_sentences: int) -> str:
    """The candidate generator candidate mode runs (`SearchSettings.candidates.generator`,
    with `auto` resolved): `compressed` where the compressed level is served (`compressed`)
    and the collection holds at most `candidates.scan_max_sentences` sentences, else
    `centroids`; `compressed` asked for without that level falls back to `centroids`."""
    generator = settings.candidates.generator
    if generator == "auto":
        small = n_sentences <= settings.candidates.scan_max_sentences
        return "compressed" if compressed and small else "centroids"
    if generator == "compressed" and not compressed:
        return "centroids"
    return generator


def candidates(context: ScoringContext, query: Query, allowed: Positions) -> Positions:
    """Candidate mode's documents of `allowed` (ascending), found by the first pass
    `first_pass` chooses."""
    settings = context.settings
    sentence_doc = context.sentence_doc
    generator = first_pass(settings, context.scan is not None, len(sentence_doc))
    if generator == "compressed" and context.scan is not None:
        return context.scan.candidates(
            query.sentence_vectors, allowed, settings.candidates.max_documents
        )
    if generator == "centroids" and context.centroids is not None:
        return searched(context.centroids.get(), query.sentence_vectors, allowed, settings)
    return retrieve_candidates(context.index, sentence_doc, query, allowed, settings)
