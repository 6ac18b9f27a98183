"""`search.ranking.top_k` equals sorting every allowed position (the plain reference), with
ties, infinities, NaNs and any `k`."""

from __future__ import annotations

import numpy as np
import pytest

from docsim.search.order import top_k

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def reference(scores: np.ndarray, allowed: np.ndarray, k: int, tiebreak: np.ndarray) -> list:
    """Every allowed position sorted by score (best first, NaN last), then by `tiebreak`."""

    def key(p: int) -> tuple:
        score = scores[p]
        return (np.isnan(score), -score if not np.isnan(score) else 0.0, tiebreak[p])

    return sorted(allowed.tolist(), key=key)[:k]


@pytest.mark.parametrize("seed", range(40))
def test_top_k_equals_sorting_every_allowed_position(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    scores = rng.integers(0, int(rng.integers(1, 30)), n).astype(np.float64)  # many ties
    special = rng.random(n)
    scores[special < 0.1] = -np.inf
    if seed % 3 == 0:
        scores[special > 0.9] = np.nan
    if seed % 5 == 0:
        scores[special > 0.95] = np.inf
    tiebreak = rng.permutation(n)
    allowed = np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False))
    for k in (0, 1, 2, 7, len(allowed) // 2, len(allowed), len(allowed) + 3):
        found = top_k(scores, allowed, k, tiebreak).tolist()
        assert found == reference(scores, allowed, k, tiebreak), (seed, k)
