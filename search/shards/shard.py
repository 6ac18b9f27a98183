"""Exact SDR over a version's documents split into contiguous shards: the shards' side.

A shard holds the sentence vectors of documents `[first, first + D_s)` (and their paragraph
and section vectors, for unit search) and scores them on its own: round one computes its
paragraph matrix for the query, keeps each document's best P per source paragraph and returns
the row moments; round two, given the collection's mean and std (combined by the
coordinator), returns its own top k. The coordinator (`search.shards.coordinator`) reaches shards
that run in this process (`in_process`) or as Ray actors (`search.shards.actors`)
through a `ShardCall`. `search.shards.cuts` cuts a loaded version into shards of about equal
sentence counts.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import torch
from cachetools import TTLCache

from docsim.models.kernels.alignment import (
    best_pair_scores,
    maxsim_scores,
    ot_scores,
    sentence_best,
)
from docsim.models.kernels.scan import ScanRows, approximate_best_of
from docsim.models.kernels.scoring import (
    RaggedCollection,
    RowStats,
    block_cosines,
    paragraph_similarity,
    paragraph_weights,
)
from docsim.models.kernels.shard_moments import (
    RowMoments,
    document_best,
    row_moments,
    scores_from_best,
)
from docsim.search.arrays import concatenated_ranges
from docsim.search.errors import ShardUnavailableError
from docsim.search.order import top_k
from docsim.search.served.mapped_rows import MAPPED_BLOCK_SENTENCES
from docsim.search.types import Query

if TYPE_CHECKING:  # a shard actor imports this module: no SQL in its process
    pass

# the levels whose rows the shards hold and search (a sharded coordinator maps them)
SEARCHED_ON_SHARDS = ("section", "paragraph", "sentence")

PENDING_SECONDS = 300.0  # how long a shard keeps a query's round-one result for round two
GPU_BLOCK_SENTENCES = 1 << 20  # a GPU shard's product block: (r, n) float32 is r * n * 4 bytes

# `call(method, args)`: `method` of every shard run with its own tuple of `args` (one a shard,
# in shard order), their answers in shard order: in this process or on Ray actors
ShardCall: TypeAlias = Callable[[str, Sequence[tuple[Any, ...]]], list[Any]]


@dataclass(frozen=True)
class ShardQuery:
    """What a shard needs of a query: its key for round two, its sentence vectors and which
    documents to leave out or keep (global positions)."""

    key: str
    sentences: torch.Tensor  # (n, d)
    paragraph_lengths: torch.Tensor  # (I,)
    exclude: int | None = None  # an indexed source never scores itself
    allowed: np.ndarray | None = None  # a pool of candidates; None: every document
    weights: torch.Tensor | None = None  # (n,) how much each sentence counts; None: the same


def query_on_shards(
    query: Query, docs: np.ndarray, n_documents: int, weights: torch.Tensor | None = None
) -> ShardQuery:
    """What the shards need of `query` to score the positions `docs` of `n_documents`, its
    sentences counting by `weights` `(n,)` (`search.query_weights`)."""
    return ShardQuery(
        key=uuid.uuid4().hex,
        sentences=query.sentence_vectors,
        paragraph_lengths=query.paragraph_lengths,
        exclude=query.source_index,
        allowed=None if len(docs) == n_documents else np.asarray(docs, dtype=np.int64),
        weights=weights,
    )


# round one's documents of a query (local), their best P per source paragraph `(D_s, I)` and
# the source paragraphs' weights `(I,)` (None: the same), kept for round two
Pending: TypeAlias = tuple[np.ndarray, torch.Tensor, torch.Tensor | None]


@dataclass(frozen=True)
class ShardMoments:
    moments: RowMoments  # of P over the paragraphs of the documents it scores
    documents: int  # how many documents it scores


@dataclass(frozen=True)
class ShardHits:
    positions: np.ndarray  # (k,) global document positions, best first
    scores: np.ndarray  # (k,) float64


class SdrShard:
    """SDR over one contiguous range of documents.

    Its products run where its sentences are. On a GPU, the paragraph matrix, the row moments
    and each document's best P stay there too: only the moments and the scores come back.

    Args:
        collection: the range's sentences (on the CPU or a GPU), paragraph and document
            lengths (on the CPU).
        first: the global position of its first document.
        tiebreak: `(D_s,)` the range's slice of the collection's fixed random tie order.
        first_sentence: the global row of its first sentence.
        units: the range's rows `(R_s, d)` of other levels, each with the global row of its
            first, for `nearest` (the sentence level is the collection's).
        scan: the range's sentences compressed (`search.served.sentence_scan`), for the
            sentence-set methods' first pass; None: every document is scored exactly.
    """

    def __init__(
        self,
        collection: RaggedCollection,
        first: int,
        tiebreak: np.ndarray,
        first_sentence: int = 0,
        units: Mapping[str, tuple[torch.Tensor, int]] | None = None,
        scan: ScanRows | None = None,
    ) -> None:
        self.collection = collection
        self.scan = scan
        self.first = first
        self.units = {"sentence": (collection.sentences, first_sentence), **(units or {})}
        self.tiebreak = np.asarray(tiebreak)
        self.device = collection.sentences.device
        on_gpu = self.device.type == "cuda"  # CPU: the float16 file's blocks (`sdr.py`)
        self.block_sentences = GPU_BLOCK_SENTENCES if on_gpu else MAPPED_BLOCK_SENTENCES
        self.paragraph_start = np.concatenate(
            [[0], np.cumsum(collection.document_lengths.numpy())]
        )  # (D_s + 1,)
        self.sentence_start = np.concatenate(
            [[0], np.cumsum(collection.paragraph_lengths.numpy())]
        )[self.paragraph_start]  # (D_s + 1,)
        self._pending: TTLCache[str, Pending] = TTLCache(maxsize=1024, ttl=PENDING_SECONDS)
        self._lock = threading.Lock()

    @property
    def n_documents(self) -> int:
        return self.collection.n_documents

    def _local(self, query: ShardQuery) -> np.ndarray:
        """The range's documents this query scores, as local positions."""
        local = np.arange(self.n_documents)
        if query.allowed is not None:
            allowed = np.asarray(query.allowed, dtype=np.int64) - self.first
            local = np.unique(allowed[(allowed >= 0) & (allowed < self.n_documents)])
        if query.exclude is not None:
            local = local[local != query.exclude - self.first]
        return local

    def _collection_of(self, local: np.ndarray) -> RaggedCollection:
        if len(local) == self.n_documents:
            return self.collection
        sentence_rows = concatenated_ranges(
            self.sentence_start[local], self.sentence_start[local + 1]
        )
        paragraph_rows = concatenated_ranges(
            self.paragraph_start[local], self.paragraph_start[local + 1]
        )
        return RaggedCollection(
            sentences=self.collection.sentences[torch.from_numpy(sentence_rows)],
            paragraph_lengths=self.collection.paragraph_lengths[torch.from_numpy(paragraph_rows)],
            document_lengths=self.collection.document_lengths[torch.from_numpy(local)],
        )

    def moments(self, query: ShardQuery) -> ShardMoments:
        """Round one: P over the query's documents of this range; their best P per source
        paragraph is kept under `query.key` for round two."""
        local = self._local(query)
        collection = self._collection_of(local)
        sentences = query.sentences.to(self.device)  # (n, d): P stays beside the collection
        if len(local):
            p = paragraph_similarity(
                sentences,
                query.paragraph_lengths,
                collection,
                block_sentences=self.block_sentences,
                weights=query.weights,
            )  # (I, J_s)
        else:
            p = sentences.new_empty(len(query.paragraph_lengths), 0)  # (I, 0)
        best = document_best(p, collection.document_lengths.to(self.device))  # (D_s, I)
        columns = paragraph_weights(query.paragraph_lengths, query.weights)  # (I,) or None
        with self._lock:
            self._pending[query.key] = (local, best, columns)
        moments = row_moments(p)
        return ShardMoments(
            RowMoments(moments.count, moments.mean.cpu(), moments.m2.cpu()), len(local)
        )

    def sentence_scores(
        self, query: ShardQuery, method: str, ot_reg: float = 0.05, ot_iterations: int = 50
    ) -> ShardHits:
        """Scores of the methods that score each document from its own sentences alone
        (`maxsim`, `best-sentence`, `ot`: one round), for the query's documents of this
        range, in range order, exactly (from the stored rows)."""
        local = self._local(query)
        if not len(local):
            return ShardHits(np.empty(0, np.int64), np.empty(0))
        if method in ("maxsim", "best-sentence"):
            best = sentence_best(query.sentences, self._collection_of(local))  # (D_s, n)
            scores = _reduction(method, query.weights)(best)
        elif method == "ot":
            collection = self._collection_of(local)
            scores = ot_scores(query.sentences, collection, reg=ot_reg, iterations=ot_iterations)
        else:
            raise ValueError(f"method {method!r} is not scored from sentences alone")
        return ShardHits(local + self.first, scores.float().double().numpy())

    def sentence_estimates(self, query: ShardQuery, method: str) -> ShardHits:
        """`maxsim` or `best-sentence` of the query's documents of this range from the
        compressed rows (`scan`): the first of `SentenceSets`' two passes, which the
        coordinator finishes over every shard's estimates, as one process does."""
        if self.scan is None:
            raise ValueError("this shard's sentences are not compressed")
        local = self._local(query)
        if not len(local):
            return ShardHits(np.empty(0, np.int64), np.empty(0))
        approximate = approximate_best_of(query.sentences, self.scan, torch.from_numpy(local))
        scores = _reduction(method, query.weights)(approximate)
        return ShardHits(local + self.first, scores.double().numpy())

    def nearest(
        self, level: str, vectors: torch.Tensor, k: int, within: np.ndarray | None = None
    ) -> list[ShardHits]:
        """For each row of `vectors` `(m, d)`, its `k` nearest units of `level` in this range
        by inner product (global rows of the level, best first), among the global rows
        `within` when given: an exact search, as a Flat index's."""
        held, first_row = self.units[level]  # (n, d)
        n = held.shape[0]
        if within is None:
            local = None
        else:
            wanted = np.asarray(within, dtype=np.int64) - first_row
            local = np.unique(wanted[(wanted >= 0) & (wanted < n)])
        size = n if local is None else len(local)
        m = vectors.shape[0]
        if not size or k <= 0:
            return [ShardHits(np.empty(0, np.int64), np.empty(0, np.float32))] * m
        source = vectors.float().to(self.device)  # (m, d)
        scores, rows = nearest_rows(held, source, k, local, self.block_sentences)  # (m, k')
        chosen, kept = (rows + first_row).numpy(), scores.numpy().astype(np.float32)
        return [ShardHits(chosen[i], kept[i]) for i in range(m)]

    def top(self, key: str, stats: RowStats | None, k: int | None) -> ShardHits:
        """Round two: this range's best `k` documents for the query `key` (None: every
        document it scored, best first), scored with the collection's `stats` (None: not
        normalised)."""
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is None:
            raise ShardUnavailableError(
                f"query {key!r} has no first round on this shard (expired or restarted)"
            )
        local, best, weights = pending
        scores = np.full(self.n_documents, -np.inf)
        if stats is not None:
            stats = RowStats(mean=stats.mean.to(self.device), std=stats.std.to(self.device))
        scores[local] = scores_from_best(best, stats, weights=weights).double().cpu().numpy()
        chosen = top_k(scores, local, len(local) if k is None else k, self.tiebreak)
        return ShardHits(chosen + self.first, scores[chosen])


def nearest_rows(
    held: torch.Tensor, source: torch.Tensor, k: int, local: np.ndarray | None, block: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The `k` rows of `held` `(n, d)` (among the rows `local`, when given) of highest inner
    product with each row of `source` `(m, d)`, in blocks of `block` rows: their products
    and rows `(m, k')`, best first, on the CPU."""
    size = held.shape[0] if local is None else len(local)
    best_scores, best_rows = [], []
    for r0 in range(0, size, block):
        r1 = min(r0 + block, size)
        if local is None:
            part, rows = held[r0:r1], torch.arange(r0, r1)
        else:
            rows = torch.from_numpy(local[r0:r1])
            part = held[rows.to(held.device)]
        sims = block_cosines(part, source).T  # (m, r)
        top = torch.topk(sims, min(k, r1 - r0), dim=1)  # (m, k')
        best_scores.append(top.values.cpu())
        best_rows.append(rows[top.indices.cpu()])
    scores, rows = torch.cat(best_scores, dim=1), torch.cat(best_rows, dim=1)  # (m, *)
    top = torch.topk(scores, min(k, scores.shape[1]), dim=1)
    return top.values, torch.gather(rows, 1, top.indices)


def _reduction(
    method: str, weights: torch.Tensor | None = None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """`(D, n)` best matches to `(D,)` scores: `maxsim`'s mean (weighted by `weights` `(n,)`
    where given), or `best-sentence`'s."""
    if method == "maxsim":
        return lambda best: maxsim_scores(best, weights)
    if method == "best-sentence":
        return best_pair_scores
    raise ValueError(f"method {method!r} has no compressed first pass")


def in_process(shards: Sequence[SdrShard]) -> ShardCall:
    """`ShardedSdr`'s `call` over shards in this process, one after the other."""

    def call(method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        return [getattr(shard, method)(*a) for shard, a in zip(shards, args, strict=True)]

    return call
