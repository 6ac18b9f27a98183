"""Index arithmetic on numpy arrays shared by the scorers."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Positions = npt.NDArray[np.int64]  # (k,) document (or row) positions
Scores = npt.NDArray[np.float64]  # (D,) one score per document of the collection


def concatenated_ranges(starts: Positions, ends: Positions) -> Positions:
    """The concatenation of `arange(start, end)` for each pair, without a Python loop."""
    lengths = ends - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    rows: Positions = np.arange(int(lengths.sum())) + offsets
    return rows
