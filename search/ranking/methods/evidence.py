"""`rprs`: documents ranked by the share of the query's sentences that find them among their
nearest sentences of the collection, and the share of their own sentences found
(`models.kernels.proportional`)."""

from __future__ import annotations

import numpy as np
import torch

from docsim.models.kernels.alignment import document_sentence_lengths
from docsim.models.kernels.proportional import (
    Nearest,
    nearest_sentences,
    proportional_scores,
    rarity_weights,
)
from docsim.search.arrays import Positions, Scores
from docsim.search.ranking.scorer import QueryScratch, Scorer
from docsim.search.types import Query


class ProportionalEvidence(Scorer):
    """RPRS over the documents `docs`: each query sentence finds its `rprs.sentences` nearest
    sentences among theirs (all of the collection's when `docs` is every document; a
    filter's or a fusion's candidates otherwise, the pool the paper re-ranks), exactly, from
    the stored sentence vectors."""

    given_only = True

    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        n_documents = self.context.index.n_documents
        out = np.zeros(n_documents)
        docs = np.sort(docs)
        if not len(docs) or not len(query.sentence_vectors):
            return out
        sdr, settings = self.context.sdr, self.context.settings
        n = settings.rprs.sentences
        if 2 * len(docs) >= n_documents:  # most of the collection: one pass, the rest masked
            lengths = document_sentence_lengths(sdr.collection)  # (D,)
            allowed = torch.zeros(n_documents, dtype=torch.bool)
            allowed[torch.from_numpy(docs)] = True
            nearest = nearest_sentences(
                query.sentence_vectors,
                sdr.collection.sentences,
                n,
                allowed=allowed.repeat_interleave(lengths),
            )  # (k, n) positions in the collection
            out[docs] = self._proportional(nearest, lengths).numpy()[docs]
            return out
        collection = sdr.sub_collection(docs)[0]  # a few documents: their sentences alone
        nearest = nearest_sentences(query.sentence_vectors, collection.sentences, n)
        lengths = document_sentence_lengths(collection)  # (len(docs),)
        out[docs] = self._proportional(nearest, lengths).numpy()
        return out

    def _proportional(self, nearest: Nearest, lengths: torch.Tensor) -> torch.Tensor:
        settings = self.context.settings
        weights = rarity_weights(nearest.cosines) if settings.query_weighting == "rarity" else None
        return proportional_scores(
            nearest.positions, lengths, k1=settings.rprs.k1, b=settings.rprs.b, weights=weights
        )
