"""`best_cosines`: each found unit's best cosine, against a float64 reference, and the same
number for equal vectors wherever they sit and whatever else is scored with them (so that the
service ranks units alike in one process and on shards)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from docsim.search.units import best_cosines

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def test_best_cosines_equal_the_reference() -> None:
    rng = np.random.default_rng(0)
    level = rng.standard_normal((40, 16)).astype(np.float32)  # (n, d)
    ids = np.arange(100, 140, dtype=np.int64)
    queries = rng.standard_normal((5, 16)).astype(np.float32)  # (m, d)
    found = rng.integers(100, 140, 60)  # (p,) units found, with repeats
    rows = rng.integers(0, 5, 60)  # (p,) by which query row
    got = best_cosines(ids, torch.from_numpy(level), queries, found, rows, block=7)
    assert sorted(got) == sorted(set(found.tolist()))
    for unit, score in got.items():
        pairs = rows[found == unit]
        expected = max(float(level[unit - 100].astype(np.float64) @ queries[r]) for r in pairs)
        assert abs(score - expected) < 1e-5, unit


def test_equal_vectors_score_the_same_wherever_they_are() -> None:
    """A sentence repeated in two documents: its two units get the very same score, also with
    other units around them and in another block."""
    rng = np.random.default_rng(1)
    level = rng.standard_normal((300, 384)).astype(np.float32)  # (n, d)
    level[17] = level[251]
    ids = np.arange(300, dtype=np.int64)
    queries = rng.standard_normal((3, 384)).astype(np.float32)  # (m, d)
    found = np.concatenate([np.arange(300), [17, 251]])  # (p,)
    rows = np.concatenate([np.zeros(300, np.int64), [2, 2]])
    for block in (5, 64, 8192):
        got = best_cosines(ids, torch.from_numpy(level), queries, found, rows, block=block)
        assert got[17] == got[251]
        alone = best_cosines(ids, torch.from_numpy(level), queries, found[-1:], rows[-1:])
        assert alone[251] == got[251]
    assert best_cosines(ids, torch.from_numpy(level), queries, found[:0], rows[:0]) == {}
