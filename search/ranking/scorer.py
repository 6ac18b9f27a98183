"""The interface of a ranking method: what it reads of the served version (`ScoringContext`),
what one query's methods share (`QueryScratch`), what it answers for one query
(`RankedScores`), and the base class of every row of the method table (`Scorer`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np
import torch

from docsim.protocol.choices import Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.arrays import Positions, Scores
from docsim.search.candidates.centroids import LazyCentroids
from docsim.search.lexical.postings import Postings
from docsim.search.order import top_k
from docsim.search.sdr_scorer import SdrScorer, SdrScores
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.served.sentence_scan import SentenceScan
from docsim.search.settings import SearchSettings
from docsim.search.shards.coordinator import ShardedSdr
from docsim.search.types import ParagraphStats, Query


@dataclass
class QueryScratch:
    """What the scorers of one query reuse between methods (`fused` runs several)."""

    best_docs: Positions | None = None  # (k,) the documents `best_matches` covers
    best_matches: torch.Tensor | None = None  # (k, n) each query sentence's best match in each
    approximate_docs: Positions | None = None  # (a,) the documents `approximate` covers
    approximate: torch.Tensor | None = None  # (a, n) the same by the compressed level, in each
    exact: dict[int, torch.Tensor] = field(default_factory=dict)  # document -> (n,) exact ones
    lexical: dict[Method, Scores] = field(default_factory=dict)  # a lexical method's (D,) scores


@dataclass
class ScoringContext:
    """What a scorer may read of the served version."""

    index: LoadedIndex
    settings: SearchSettings
    tiebreak: Positions  # (D,) the fixed random order that breaks ties
    postings: Postings  # BM25, built on first use
    sdr: SdrScorer  # the collection's sentences, and sub-collections of them
    level_vectors: Callable[[Query, str], torch.Tensor]  # a query's (m, d) vectors at a level
    shards: ShardedSdr | None = None  # the shard actors, on a sharded service
    scan: SentenceScan | None = None  # the compressed sentence level, when it is compressed
    centroids: LazyCentroids | None = None  # candidate mode's cells, fitted on first use

    def top(self, scores: Scores, allowed: Positions, k: int) -> Positions:
        return top_k(scores, allowed, k, self.tiebreak)

    @cached_property
    def sentence_doc(self) -> Positions:
        """`(n,)` the document position of each sentence row."""
        start = self.sdr.doc_sentence_start  # (D + 1,)
        rows = np.arange(len(self.index.ids["sentence"]))  # (n,)
        found: Positions = np.searchsorted(start, rows, side="right") - 1
        return found


@dataclass(frozen=True)
class RankedScores:
    """One query's ranking by one method: `scores` `(D,)` over the documents of `pool` (the
    ranked ones), scored in `mode`; for SDR's rankings, SDR's own scores (`sdr`, which the
    hits' paragraph pairs come from) and the statistics it normalised with (`stats`)."""

    scores: Scores
    pool: Positions
    mode: ScoringMode
    method: Method
    sdr: SdrScores | None = None
    stats: ParagraphStats | None = None


class Scorer(ABC):
    """One method's scores of each document on its own; a row of the method table
    (`search.ranking.table`).

    Attributes:
        widens_pool: in candidate mode, the fusions add this method's top 1,000 documents to
            SDR's candidates (a lexical method finds documents the vectors miss).
        given_only: scores only the `docs` it is given, at a cost that grows with them; the
            fusions give it only the documents SDR scored. The others score every document
            as cheaply (-inf outside `docs` is the caller's to impose).
        explains_with_pairs: its hits come with SDR's best paragraph pairs (SDR's rankings).
    """

    widens_pool: ClassVar[bool] = False
    given_only: ClassVar[bool] = False
    explains_with_pairs: ClassVar[bool] = False

    def __init__(self, context: ScoringContext, method: Method) -> None:
        self.context = context
        self.method = method

    @abstractmethod
    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        """`(D,)` the score of each document; the positions `docs` must be scored."""

    def refine(
        self, query: Query, docs: Positions, scores: Scores, scratch: QueryScratch
    ) -> Scores:
        """`scores` (from `scores`) with the documents `docs` scored exactly, for a method
        that estimates most documents' scores (the compressed sentence level): the fusions
        refine their own best documents this way before ranking them. Exact methods return
        `scores` as they are."""
        return scores

    def rank(self, query: Query, options: SimilarOptions, allowed: Positions) -> RankedScores:
        """`query`'s ranking of the `allowed` documents: every one scored, exhaustively."""
        scores = self.scores(query, allowed, QueryScratch())
        return RankedScores(scores, allowed, ScoringMode.exhaustive, self.method)

    @property
    def computes_sdr(self) -> bool:
        """Whether ranking by this method computes SDR's paragraph matrix."""
        return False


ScorerClass = type[Scorer]
