"""Score fusion against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from docsim.search.ranking.fusion import fuse, normalise, outliers_only
from docsim.search.settings import parse_weights

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def test_zscore_by_hand() -> None:
    scores = np.array([1.0, 2.0, 3.0, 100.0])  # the last is not ranked
    out = normalise(scores, np.array([0, 1, 2]), "zscore")
    spread = np.sqrt(2 / 3)  # population std of 1, 2, 3
    np.testing.assert_allclose(out, [-1 / spread, 0.0, 1 / spread, 0.0])


def test_minmax_by_hand_and_unscored_documents_get_the_lowest() -> None:
    scores = np.array([2.0, -np.inf, 4.0, 3.0])
    out = normalise(scores, np.arange(4), "minmax")
    np.testing.assert_allclose(out, [0.0, 0.0, 1.0, 0.5])


def test_constant_scores_normalise_to_zero() -> None:
    for how in ("zscore", "minmax"):
        np.testing.assert_array_equal(normalise(np.full(3, 5.0), np.arange(3), how), 0.0)


def test_fuse_by_hand() -> None:
    bm25 = np.array([0.0, 10.0, 5.0])
    dense = np.array([0.9, 0.1, 0.5])
    out = fuse({"bm25": bm25, "dense": dense}, {"bm25": 2.0, "dense": 1.0}, np.arange(3), "minmax")
    # min-max: bm25 -> 0, 1, 0.5; dense -> 1, 0, 0.5
    np.testing.assert_allclose(out, [2 * 0 + 1, 2 * 1 + 0, 2 * 0.5 + 0.5])


def test_outliers_by_hand() -> None:
    # 20 documents: 19 at 0, one at 10 -> z = -1/sqrt(19) for the 19, sqrt(19) for the one
    scores = np.r_[np.zeros(19), 10.0, 99.0]  # the last is not ranked
    ranked = np.arange(20)
    top = np.sqrt(19)
    out = outliers_only(scores, ranked, 4.0)
    np.testing.assert_allclose(out, np.r_[np.zeros(19), 1.0, 0.0])  # the strongest: 1
    spread = np.r_[np.zeros(18), 2.0, 10.0]  # z of 2 and 10 over 20 documents
    z = normalise(spread, ranked, "zscore")
    expected = np.maximum(z - 0.5, 0) / (z.max() - 0.5)  # z of 2: 0.64, of 10: 4.3
    np.testing.assert_allclose(outliers_only(spread, ranked, 0.5), expected)
    assert 0 < expected[18] < expected[19] == 1.0
    assert not outliers_only(scores, ranked, top).any()  # none above the threshold: all 0
    assert not outliers_only(np.full(5, 3.0), np.arange(5), 0.0).any()  # constant
    assert not outliers_only(scores, ranked[:0], 1.0).any()  # nothing ranked


def test_fuse_counts_a_gated_method_by_its_outliers() -> None:
    dense = np.linspace(0.0, 1.0, 20)
    quoted = np.r_[np.zeros(19), 10.0]
    ranked = np.arange(20)
    fused = fuse({"d": dense, "q": quoted}, {"d": 1.0, "q": 2.0}, ranked, "minmax", {"q": 4.0})
    np.testing.assert_allclose(
        fused, normalise(dense, ranked, "minmax") + 2 * np.r_[np.zeros(19), 1]
    )
    flat = fuse({"d": dense, "q": np.ones(20)}, {"d": 1.0, "q": 2.0}, ranked, "minmax", {"q": 4.0})
    np.testing.assert_allclose(flat, normalise(dense, ranked, "minmax"))  # no outlier: as before


def test_a_zero_weight_method_needs_no_scores_but_a_missing_one_fails() -> None:
    np.testing.assert_array_equal(
        fuse({"a": np.array([1.0, 2.0])}, {"a": 1.0}, np.arange(2), "minmax"), [0.0, 1.0]
    )
    with pytest.raises(ValueError, match="no scores for b"):
        fuse({"a": np.array([1.0, 2.0])}, {"a": 1.0, "b": 0.5}, np.arange(2))


def test_unknown_normaliser_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown normaliser"):
        normalise(np.ones(2), np.arange(2), "softmax")


def test_parse_weights() -> None:
    assert parse_weights(" bm25:1, sdr:0.5 ") == {"bm25": 1.0, "sdr": 0.5}
    for bad in ("bm25", "bm25:x", "bm25:1,bm25:2", "", "sdr:nan"):
        with pytest.raises(ValueError):
            parse_weights(bad)
