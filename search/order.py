"""Turning scores into rankings: top k with a fixed random tie order, and rank fusion."""

from __future__ import annotations

import numpy as np

RRF_K = 60


def top_k(scores: np.ndarray, allowed: np.ndarray, k: int, tiebreak: np.ndarray) -> np.ndarray:
    """The best `k` of the positions `allowed` by `scores` `(D,)`, ties broken by `tiebreak`
    `(D,)` (a fixed random order of the documents, never their ids or file order)."""
    allowed = np.asarray(allowed, dtype=np.int64)
    negated = -scores[allowed]  # (a,) ascending is best first
    if 0 < k < len(allowed):
        # only the positions scoring at least the k-th best (all of its ties) can be among
        # the best k: sorting those, not every allowed position (a quarter of a by-id query's
        # time at 300,000 documents went to sorting all of them twice)
        kth = np.partition(negated, k - 1)[k - 1]
        if not np.isnan(kth):  # fewer than k scores that are numbers: sort them all
            near = np.flatnonzero(negated <= kth)  # (m,) m >= k
            allowed, negated = allowed[near], negated[near]
    order = np.lexsort((tiebreak[allowed], negated))
    best: np.ndarray = allowed[order[:k]]
    return best


def reciprocal_rank_fusion(rankings: list[np.ndarray], n: int, k: int = RRF_K) -> np.ndarray:
    """`(n,)` sum over rankings of 1 / (k + rank), ranks from 1; 0 where never ranked."""
    fused = np.zeros(n, dtype=np.float64)
    for order in rankings:
        fused[order] += 1.0 / (k + np.arange(1, len(order) + 1))
    return fused
