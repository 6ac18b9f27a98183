from __future__ import annotations

import numpy as np

from indexer.search import _ranges


def test_ranges_equals_concatenated_aranges() -> None:
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 100, size=50)
    ends = starts + rng.integers(0, 9, size=50)
    expected = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends, strict=True)])
    np.testing.assert_array_equal(_ranges(starts, ends), expected)
