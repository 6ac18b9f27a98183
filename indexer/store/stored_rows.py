"""How a level's vectors are stored on disk: its one copy, a `.npy` file of one of two row
formats, both read back as float16 `(n, d)`.

- `float16`: `(n, d)` float16 rows (every version built before issue 54's int8 rows).
- `int8`: `(n,)` records of `d` int8 codes and the row's float32 scale (`int8_row_dtype`),
  388 bytes a row for d = 384 against float16's 768. A row `x` is stored as
  `codes = rint(x / scale)` with `scale = max |x_i| / 127` (the peak rounded up to a float16
  value, `float16_ceiling`: a row read back then stores as the same bytes), and read back as
  `codes * scale` rounded to float16: each component within `scale / 2` of the float value
  (for a unit vector of MiniLM's 384 dimensions, about 0.001), so that a product of two unit
  rows moves by about 3e-4 on average (`tests/indexer/store/test_stored_rows.py` bounds it).

Every reader goes through `float16_rows` (a block, a run, gathered rows) or `row_dim`, so
that the rest of docsim sees float16 rows whatever the file holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np

RowFormat = Literal["float16", "int8"]
ROW_FORMATS: tuple[RowFormat, ...] = ("float16", "int8")
INT8_LIMIT = 127  # codes in [-127, 127]: symmetric, so that -x is stored as -codes
FILE_SUFFIX: dict[RowFormat, str] = {"float16": "f16", "int8": "i8"}


def int8_row_dtype(dim: int) -> np.dtype:
    """One stored int8 row: `codes` `(dim,)` int8 and its float32 `scale`, packed."""
    return np.dtype([("codes", np.int8, (dim,)), ("scale", "<f4")])


def row_format(stored: np.ndarray) -> RowFormat:
    """The format of a stored array (a mapped file, or rows read from one)."""
    return "int8" if stored.dtype.names is not None else "float16"


def row_dim(stored: np.ndarray) -> int:
    """The vectors' dimension `d` of a stored array of either format."""
    if stored.dtype.names is not None:
        return int(stored.dtype["codes"].shape[0])
    return int(stored.shape[1])


def stored_dtype(row: RowFormat, dim: int) -> np.dtype:
    """The element type of a stored file of format `row`: with `stored_shape`, its header."""
    return int8_row_dtype(dim) if row == "int8" else np.dtype(np.float16)


def stored_shape(row: RowFormat, n: int, dim: int) -> tuple[int, ...]:
    """The shape of a stored file of `n` rows: `(n,)` records, or `(n, d)` float16."""
    return (n,) if row == "int8" else (n, dim)


def quantized(rows: np.ndarray, row: RowFormat) -> np.ndarray:
    """`rows` `(n, d)` (any float dtype) as stored in format `row`: float16 `(n, d)`, or
    `(n,)` int8 records. A zero row is stored with scale 0 and read back as zeros."""
    x = np.asarray(rows, dtype=np.float32)  # (n, d)
    if row == "float16":
        return x.astype(np.float16)
    peak = np.abs(x).max(axis=1) if x.shape[1] else np.zeros(len(x), np.float32)  # (n,)
    scale = (float16_ceiling(peak) / INT8_LIMIT).astype(np.float32)  # (n,)
    safe = np.where(scale > 0, scale, np.float32(1))  # (n,)
    out = np.empty(len(x), dtype=int8_row_dtype(x.shape[1]))
    out["codes"] = np.clip(np.rint(x / safe[:, None]), -INT8_LIMIT, INT8_LIMIT)
    out["scale"] = scale
    return out


def float16_ceiling(values: np.ndarray) -> np.ndarray:
    """`(n,)` float32: the least float16 value at or above each of `values` (the value
    itself past float16's range). A row's peak rounded up so: its largest component reads back
    as that peak exactly, so that storing rows read back gives the same bytes again (a build
    that reuses a version's vectors copies them unchanged)."""
    with np.errstate(over="ignore"):
        half = values.astype(np.float16)
        half = np.where(half < values, np.nextafter(half, np.float16(np.inf)), half)
    out = half.astype(np.float32)
    return np.where(np.isfinite(out), out, values).astype(np.float32)


def float16_rows(stored: np.ndarray) -> np.ndarray:
    """`(n, d)` float16: stored rows of either format (read from the file: a copy)."""
    if stored.dtype.names is None:
        return np.array(stored, dtype=np.float16)
    codes = stored["codes"]  # (n, d) int8
    out = np.empty(codes.shape, np.float16)
    # each product in float32, then rounded to float16: one pass, no float32 copy of the block
    np.multiply(codes, stored["scale"][:, None], out=out, dtype=np.float32, casting="unsafe")
    return out


def open_stored(path: Path) -> np.ndarray:
    """The stored rows of the `.npy` file at `path`, memory-mapped (read-only).

    Raises:
        ValueError: the file holds neither format.
    """
    mapped = np.load(path, mmap_mode="r")
    names = mapped.dtype.names
    if names is not None:
        dim = int(mapped.dtype["codes"].shape[0]) if "codes" in names else -1
        if mapped.ndim != 1 or mapped.dtype != int8_row_dtype(dim):
            raise ValueError(f"{path.name} is not an (n,) array of int8 rows with their scales")
    elif mapped.ndim != 2 or mapped.dtype != np.float16:
        raise ValueError(f"{path.name} is not a float16 (n, d) array")
    return mapped


def float16_blocks(path: Path, n: int, rows: int = 65_536) -> Iterator[np.ndarray]:
    """The `n` rows of the stored `.npy` file at `path` as float16, `rows` at a time
    `(rows, d)`, each read through a mapping opened for it alone: the pages read do not stay
    in the process's resident memory, as they would through one mapping of the whole file."""
    for r0 in range(0, n, rows):
        mapped = open_stored(path)
        try:
            yield float16_rows(mapped[r0 : r0 + rows])
        finally:
            del mapped


def read_float16(path: Path) -> np.ndarray:
    """`(n, d)` float16: every row of the stored `.npy` file at `path`, read into memory."""
    return float16_rows(open_stored(path))
