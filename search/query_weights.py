"""How much each query sentence counts in `sdr` and `maxsim` (`query_weighting`).

`uniform`: the same. `rarity`: one minus the mean cosine of the sentence's `rprs.sentences`
nearest sentences among every other document of the collection (the sentence level's own
search: exact on a Flat index and on shards, as close as its search on an IVF level or the
compressed scan), scaled to mean 1 over the query (`models.kernels.proportional.rarity_weights`), as
IDF weights a rare term: a sentence close to many (a court's formula, a date line) counts for
little. `rprs` weighs the same way from its own nearest sentences, among the documents it
ranks. The weights of an indexed source are kept per version, a posted query's while it is
being ranked.
"""

from __future__ import annotations

import threading

import numpy as np
import torch
from cachetools import LRUCache

from docsim.models.kernels.proportional import rarity_weights
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.settings import SearchSettings
from docsim.search.types import Query

KEPT_SOURCES = 4096  # indexed sources whose weights are kept, as their statistics are
KEPT_POSTED = 64  # posted queries' weights, by the identity of their sentence vectors


def rarity_neighbours(settings: SearchSettings) -> int | None:
    """The nearest sentences a query sentence's rarity is taken from (None: `uniform`)."""
    return settings.rprs.sentences if settings.query_weighting == "rarity" else None


class SentenceWeights:
    """The query-sentence weights of one loaded version: None everywhere (`uniform`), or
    each query's rarity from its `nearest` nearest sentences of the collection."""

    def __init__(self, index: LoadedIndex, nearest: int | None) -> None:
        self.index = index
        self.nearest = nearest
        self._sources: LRUCache[int, torch.Tensor] = LRUCache(maxsize=KEPT_SOURCES)
        # id(sentence vectors) -> (those vectors, held so that the id stays theirs; weights)
        self._posted: LRUCache[int, tuple[torch.Tensor, torch.Tensor]] = LRUCache(KEPT_POSTED)
        self._lock = threading.Lock()

    def of(self, query: Query) -> torch.Tensor | None:
        """`(n,)` float64 weights of `query`'s sentences (mean 1), or None for equal ones."""
        if self.nearest is None or not len(query.sentence_vectors):
            return None
        vectors, source = query.sentence_vectors, query.source_index
        with self._lock:
            if source is not None and source in self._sources:
                return self._sources[source]
            kept = self._posted.get(id(vectors))
            if kept is not None and kept[0] is vectors:
                return kept[1]
        weights = collection_rarity(self.index, vectors, self.nearest, source)
        with self._lock:
            if source is not None:
                self._sources[source] = weights
            else:
                self._posted[id(vectors)] = (vectors, weights)
        return weights


def collection_rarity(
    index: LoadedIndex, sentences: torch.Tensor, nearest: int, source: int | None
) -> torch.Tensor:
    """`(n,)` `rarity_weights` of the query sentences `(n, d)` from the cosines of their
    `nearest` nearest sentences in `index`'s sentence level, the rows of the document at
    position `source` (the query itself, when indexed) left out; fewer found (a small
    collection) count as cosine 0, as `rprs` counts them."""
    starts = index.doc_unit_start["sentence"]
    own = (int(starts[source]), int(starts[source + 1])) if source is not None else (0, 0)
    ids, queries = index.ids["sentence"], np.ascontiguousarray(sentences.float().numpy())
    cosines = torch.full((len(queries), nearest), -torch.inf)  # (n, nearest)
    # a sentence's own document holds the sentence itself and a few like it, usually: ask
    # for a few more than `nearest`, and more again only for the rows that lacked them
    most = nearest + own[1] - own[0]
    k, pending = min(2 * nearest, most), np.arange(len(queries))
    while len(pending):
        lacking = []
        found = index.indices["sentence"].search(queries[pending], k)
        for row, hits in zip(pending, found, strict=True):
            rows = np.searchsorted(ids, hits.ids)
            others = hits.scores[(rows < own[0]) | (rows >= own[1])][:nearest]
            if len(others) < nearest and len(hits.ids) == k < most:
                lacking.append(row)  # its own document crowded the others out
            cosines[row, : len(others)] = torch.from_numpy(np.asarray(others, np.float32))
        pending, k = np.array(lacking, dtype=np.int64), min(4 * k, most)
    return rarity_weights(cosines)
