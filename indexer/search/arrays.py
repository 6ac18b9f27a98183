"""Index arithmetic on numpy arrays shared by the scorers."""

from __future__ import annotations

import numpy as np


def concatenated_ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of `arange(start, end)` for each pair, without a Python loop."""
    lengths = ends - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(int(lengths.sum())) + offsets
