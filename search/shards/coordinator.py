"""Exact search over shards, the coordinator's side: what a sharded service asks of its shards
(`search.shards.shard`) and how it combines their answers.

`ShardedSdr` ranks by SDR in two rounds: round one returns each shard's row moments of its
paragraph matrix, combined here into the collection's mean and std; round two returns each
shard's top k, merged here. Only the query's sentence vectors go out, and a few numbers per
source paragraph and k hits per shard come back; the result equals `SdrScorer`'s exhaustive
scoring (`models.kernels.shard_moments` holds the maths). `ShardedLevel` searches a unit level over
the shards, exactly. Both reach the shards through a `ShardCall`: in this process
(`shards.in_process`) or on Ray actors (`search.shards.actors`).
"""

from __future__ import annotations

import numpy as np
import torch

from docsim.indexer.store.vector_index import Hits
from docsim.models.kernels.scoring import RowStats
from docsim.models.kernels.shard_moments import combine_moments, moments_stats
from docsim.search.order import top_k
from docsim.search.shards.shard import ShardCall, ShardHits, ShardMoments, ShardQuery


class ShardedSdr:
    """Exhaustive SDR over shards, in two rounds. `call(method, args)` runs one method on
    every shard and returns their answers in shard order (in this process, or on Ray actors),
    raising `ShardUnavailableError` when one cannot answer."""

    def __init__(
        self, call: ShardCall, n_shards: int, tiebreak: np.ndarray, *, compressed: bool = False
    ) -> None:
        self.call = call
        self.n_shards = n_shards
        self.tiebreak = tiebreak
        self.compressed = compressed  # the shards' sentence-set methods start approximate

    def rank(
        self, query: ShardQuery, k: int | None, normalize: bool
    ) -> tuple[ShardHits, RowStats | None, int]:
        """The best `k` documents (None: every scored one, as `hybrid` and `fused` need
        them), the statistics they were normalised with and how many documents were
        scored."""
        parts: list[ShardMoments] = self.call("moments", [(query,)] * self.n_shards)
        combined = combine_moments([p.moments for p in parts])
        stats = moments_stats(combined, query.sentences.dtype) if normalize else None
        hits: list[ShardHits] = self.call("top", [(query.key, stats, k)] * self.n_shards)
        positions = np.concatenate([h.positions for h in hits]).astype(np.int64)
        scores = np.full(len(self.tiebreak), -np.inf)
        for h in hits:
            scores[h.positions] = h.scores
        chosen = top_k(scores, positions, len(positions) if k is None else k, self.tiebreak)
        return ShardHits(chosen, scores[chosen]), stats, sum(p.documents for p in parts)

    def sentence_scores(self, query: ShardQuery, method: str, **options: float) -> np.ndarray:
        """`(D,)` a sentence-set method's scores over the shards (`sentence_method_scores`)."""
        return sentence_method_scores(
            self.call, self.n_shards, query, method, len(self.tiebreak), **options
        )

    def sentence_estimates(self, query: ShardQuery, method: str) -> np.ndarray:
        """`(D,)` `maxsim` or `best-sentence` of the query's documents from the compressed
        shards' rows (-inf where not scored): the first pass, which `SentenceSets` finishes."""
        out = np.full(len(self.tiebreak), -np.inf)
        for hits in self.call("sentence_estimates", [(query, method)] * self.n_shards):
            out[hits.positions] = hits.scores
        return out


class ShardedLevel:
    """A unit level's search, exact, over the shards: what a Flat FAISS index of the level
    answers (`search` and `count`, ids being the level's ids), for candidate retrieval and
    unit search, so that the coordinator holds no index of the level.

    Args:
        call: `ShardedSdr.call`'s kind.
        level: "sentence", "paragraph" or "section".
        ids: `(R,)` the level's ids in collection order (ascending), row r being global row r.
    """

    def __init__(
        self,
        call: ShardCall,
        n_shards: int,
        level: str,
        ids: np.ndarray,
    ) -> None:
        self.call = call
        self.n_shards = n_shards
        self.level = level
        self.ids = ids

    @property
    def count(self) -> int:
        return len(self.ids)

    def search(self, queries: np.ndarray, k: int, within: np.ndarray | None = None) -> list[Hits]:
        """The `k` best ids of the level for each row of `queries` `(q, d)` by inner product
        (among the ids `within` when given), best first; ties by collection order."""
        vectors = torch.from_numpy(np.ascontiguousarray(np.atleast_2d(queries), np.float32))
        rows = None
        if within is not None:
            within = np.asarray(within, dtype=np.int64)
            place = np.minimum(np.searchsorted(self.ids, within), max(len(self.ids) - 1, 0))
            rows = place[self.ids[place] == within] if len(self.ids) else place[:0]
            if not len(rows):
                return [Hits(np.empty(0, np.float32), np.empty(0, np.int64)) for _ in vectors]
        parts = self.call("nearest", [(self.level, vectors, k, rows)] * self.n_shards)
        out = []
        for i in range(len(vectors)):
            found = np.concatenate([part[i].positions for part in parts])
            scores = np.concatenate([part[i].scores for part in parts]).astype(np.float32)
            order = np.lexsort((found, -scores))[:k]
            out.append(Hits(scores[order], self.ids[found[order]]))
        return out


def sentence_method_scores(
    call: ShardCall,
    n_shards: int,
    query: ShardQuery,
    method: str,
    n_documents: int,
    **options: float,
) -> np.ndarray:
    """`(D,)` a sentence-set method's scores of every document over the shards (-inf where
    not scored), as `Searcher.method_scores` gives them in one process."""
    out = np.full(n_documents, -np.inf)
    for hits in call("sentence_scores", [(query, method, *options.values())] * n_shards):
        out[hits.positions] = hits.scores
    return out
