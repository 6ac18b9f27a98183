"""The pipeline's third stage: a request's runs, one for each `like` and `unlike` document,
combined into one ranking (Elasticsearch's `more_like_this`, Qdrant's recommendations)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from docsim.search.arrays import Positions, Scores
from docsim.search.ranking.scorer import RankedScores


def combined(runs: Sequence[RankedScores], n_likes: int) -> tuple[Scores, Positions]:
    """The mean of the first `n_likes` runs' scores minus the mean of the others', over the
    union of the likes' pools; a document outside a run's pool counts that run's lowest."""
    pool = np.unique(np.concatenate([r.pool for r in runs[:n_likes]]))
    out = np.full(len(runs[0].scores), -np.inf)
    total = np.zeros(len(pool))
    n_unlikes = len(runs) - n_likes
    for i, run in enumerate(runs):
        floor = float(run.scores[run.pool].min()) if len(run.pool) else 0.0
        held = np.where(np.isin(pool, run.pool), run.scores[pool], floor)
        total += held / n_likes if i < n_likes else -held / n_unlikes
    out[pool] = total
    return out, pool
