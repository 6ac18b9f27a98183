"""The sentence-set methods, `maxsim`, `best-sentence` and `ot`: the query's sentences
matched with each document's, paragraphs ignored (`models.kernels.alignment`): the mean best match
of the query's sentences, the single best pair, and the optimal-transport alignment of the two
sentence sets. On the compressed sentence level, in two passes: every document estimated from
the compressed rows, the best of them scored again exactly. The one-process scorer, and the
sharded one (`ShardedSentenceSets`) that asks each shard actor for its documents' scores."""

from __future__ import annotations

import numpy as np
import torch

from docsim.models.kernels.alignment import (
    best_pair_scores,
    maxsim_scores,
    ot_scores,
    sentence_best,
)
from docsim.protocol.choices import Method
from docsim.search.arrays import Positions, Scores
from docsim.search.ranking.scorer import QueryScratch, Scorer
from docsim.search.served.sentence_scan import SentenceScan
from docsim.search.shards.coordinator import ShardedSdr
from docsim.search.shards.shard import query_on_shards
from docsim.search.types import Query


class SentenceSets(Scorer):
    """The query's sentences matched with each document's, paragraphs ignored, here."""

    given_only = True

    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        out = np.full(self.context.index.n_documents, -np.inf)
        docs = np.sort(docs)
        if not len(docs):
            return out
        scan, rescored = self.context.scan, self.context.settings.scan.depth(len(docs))
        if scan is not None and self.method is not Method.ot and len(docs) > rescored:
            return self._two_passes(query, docs, scan, scratch)
        sdr = self.context.sdr
        collection = (
            sdr.collection if len(docs) == len(out) else sdr.sub_collection(docs)[0]
        )  # the documents' sentences, ragged
        if self.method is Method.ot:
            settings = self.context.settings
            found = ot_scores(
                query.sentence_vectors,
                collection,
                reg=settings.ot.reg,
                iterations=settings.ot.iterations,
            )
        else:
            best, best_docs = scratch.best_matches, scratch.best_docs
            if best is None or best_docs is None or not np.array_equal(best_docs, docs):
                best = sentence_best(query.sentence_vectors, collection)  # (k, n)
                scratch.best_docs, scratch.best_matches = docs, best
            found = self._reduce(best, query)
        out[docs] = found.float().numpy()
        return out

    def _two_passes(
        self, query: Query, docs: Positions, scan: SentenceScan, scratch: QueryScratch
    ) -> Scores:
        """Every document of `docs` scored from the compressed level, then the
        `rescore_depth` best of them again, exactly, from the stored vectors
        (`rescored_estimates`)."""
        approximate, covered = scratch.approximate, scratch.approximate_docs
        if approximate is None or covered is None or not np.array_equal(covered, docs):
            approximate = scan.best_of(query.sentence_vectors, docs)  # (k, n)
            scratch.approximate_docs, scratch.approximate = docs, approximate
        estimates = np.full(self.context.index.n_documents, -np.inf)
        estimates[docs] = self._reduce(approximate, query).numpy()
        rescored = self._rescored(estimates, docs)
        exact_best = self._exact_best(query, rescored, scratch)  # (r, n)
        exact = self._reduce(exact_best, query).numpy()
        return rescored_estimates(estimates, docs, rescored, exact)

    def _rescored(self, estimates: Scores, docs: Positions) -> Positions:
        """The `rescore_depth` best of `docs` by `estimates` (ascending)."""
        depth = self.context.settings.scan.depth(len(docs))
        return np.sort(self.context.top(estimates, docs, depth))

    def refine(
        self, query: Query, docs: Positions, scores: Scores, scratch: QueryScratch
    ) -> Scores:
        if self.context.scan is None or self.method is Method.ot or not len(docs):
            return scores  # scored exactly already
        rescored = np.sort(docs)
        best = self._exact_best(query, rescored, scratch)
        out = scores.copy()
        out[rescored] = self._reduce(best, query).numpy()
        return out

    def _reduce(self, best: torch.Tensor, query: Query) -> torch.Tensor:
        """`(r,)` scores of the best matches `best` `(r, n)`: their maximum (`best-sentence`),
        or their mean (`maxsim`), each query sentence counting by its weight
        (`search.query_weights`)."""
        if self.method is not Method.maxsim:
            return best_pair_scores(best)
        return maxsim_scores(best, self.context.sdr.weights.of(query))

    def _exact_best(self, query: Query, docs: Positions, scratch: QueryScratch) -> torch.Tensor:
        """`(len(docs), n)` the exact best matches in `docs` (ascending), from the stored
        vectors; each document's computed once per query (`scratch.exact`)."""
        new = np.array([d for d in docs.tolist() if d not in scratch.exact], dtype=np.int64)
        if len(new):
            found = sentence_best(query.sentence_vectors, self.context.sdr.sub_collection(new)[0])
            scratch.exact.update(zip(new.tolist(), found, strict=True))
        return torch.stack([scratch.exact[d] for d in docs.tolist()])


class ShardedSentenceSets(SentenceSets):
    """`SentenceSets` where each shard scores its own documents' sentences, weighted as in one
    process."""

    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        """As `SentenceSets` in one process: on compressed shards, every document of `docs`
        estimated there, then the `rescore_depth` best of all of them scored exactly there."""
        shards = self.context.shards
        if shards is None:
            return super().scores(query, docs, scratch)
        n_documents = self.context.index.n_documents
        docs = np.sort(docs)
        if not len(docs):
            return np.full(n_documents, -np.inf)
        depth = self.context.settings.scan.depth(len(docs))
        if not shards.compressed or self.method is Method.ot or len(docs) <= depth:
            return self._on_shards(shards, query, docs)
        on_shards = query_on_shards(query, docs, n_documents, self._weights(query))
        estimates = shards.sentence_estimates(on_shards, self.method.value)
        rescored = self._rescored(estimates, docs)
        exact = self._on_shards(shards, query, rescored)[rescored]
        return rescored_estimates(estimates, docs, rescored, exact)

    def refine(
        self, query: Query, docs: Positions, scores: Scores, scratch: QueryScratch
    ) -> Scores:
        """`scores` with `docs` scored exactly on the shards, where they compress."""
        shards = self.context.shards
        if shards is None:
            return super().refine(query, docs, scores, scratch)
        if not shards.compressed or self.method is Method.ot or not len(docs):
            return scores
        exact = self._on_shards(shards, query, np.sort(docs))
        out = scores.copy()
        out[docs] = exact[docs]
        return out

    def _weights(self, query: Query) -> torch.Tensor | None:
        """`(n,)` `maxsim`'s query-sentence weights (None: the same, or another method)."""
        return self.context.sdr.weights.of(query) if self.method is Method.maxsim else None

    def _on_shards(self, shards: ShardedSdr, query: Query, docs: Positions) -> Scores:
        """`(D,)` this method's exact scores of `docs` (ascending) from the shards."""
        settings = self.context.settings
        return shards.sentence_scores(
            query_on_shards(query, docs, self.context.index.n_documents, self._weights(query)),
            self.method.value,
            ot_reg=settings.ot.reg,
            ot_iterations=settings.ot.iterations,
        )


def rescored_estimates(
    estimates: Scores, docs: Positions, rescored: Positions, exact: np.ndarray
) -> Scores:
    """`estimates` `(D,)` with the documents `rescored` (of `docs`) at their `exact` scores
    `(r,)`, and every other one of `docs` capped just below the lowest of those: a document
    the first pass ranked below them is taken to rank below them exactly too."""
    out = estimates.copy()
    out[docs] = np.minimum(out[docs], np.nextafter(exact.min(), -np.inf))
    out[rescored] = exact
    return out
