from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from docsim.indexer.store.stored_rows import (
    ROW_FORMATS,
    RowFormat,
    float16_blocks,
    float16_ceiling,
    float16_rows,
    int8_row_dtype,
    open_stored,
    quantized,
    read_float16,
    row_dim,
    row_format,
)


def unit_rows(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def reference_int8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row by row, the plain rule: the peak rounded up to float16, over 127; codes rounded."""
    codes, scales = [], []
    for row in x.tolist():
        peak = max(abs(v) for v in row)
        half = float(np.float16(peak))
        if half < peak:
            half = float(np.nextafter(np.float16(half), np.float16(np.inf)))
        scale = float(np.float32(np.float32(half) / np.float32(127)))
        codes.append([int(np.rint(np.float32(v) / np.float32(scale))) if scale else 0 for v in row])
        scales.append(scale)
    return np.array(codes, np.int8), np.array(scales, np.float32)


def test_int8_rows_follow_the_plain_rule_and_read_back_within_half_a_step() -> None:
    x = unit_rows(300, 384, 0)
    x[7] = 0.0  # a zero row: scale 0, read back as zeros
    stored = quantized(x, "int8")
    assert stored.dtype == int8_row_dtype(384) and stored.dtype.itemsize == 388
    codes, scales = reference_int8(x)
    np.testing.assert_array_equal(stored["codes"], codes)
    np.testing.assert_array_equal(stored["scale"], scales)
    back = float16_rows(stored).astype(np.float32)  # (n, d)
    assert back.dtype == np.float32 and not back[7].any()
    # each component within half a step of its value, plus float16's rounding of the result
    step = stored["scale"][:, None]
    assert (np.abs(back - x) <= step / 2 + np.abs(x) * 2.0**-11 + 1e-8).all()
    assert np.abs(stored["codes"]).max() == 127  # every nonzero row uses the whole range
    np.testing.assert_array_equal(quantized(-x, "int8")["codes"], -stored["codes"])


def test_products_of_int8_rows_move_by_little() -> None:
    """The bound the module's docstring states: products of unit rows of 384 dimensions move
    by about 5e-4 at most on average (3e-4 measured), never by 2e-3."""
    x, y = unit_rows(4000, 384, 1), unit_rows(4000, 384, 2)
    back = float16_rows(quantized(x, "int8")).astype(np.float32)
    moved = np.abs((back * y).sum(1) - (x * y).sum(1))
    assert moved.mean() < 5e-4 and moved.max() < 2e-3


@pytest.mark.parametrize("row", ROW_FORMATS)
def test_rows_read_back_store_as_the_same_bytes(row: RowFormat) -> None:
    """A build that reuses a version's vectors stores what it reads back: unchanged."""
    stored = quantized(unit_rows(500, 48, 3) * 3.0, row)
    again = quantized(float16_rows(stored), row)
    assert again.tobytes() == stored.tobytes()


def test_the_float16_ceiling_is_the_least_float16_at_or_above() -> None:
    values = np.array([0.1, 0.5, 1 / 3, 1e-6, 7e4], np.float32)
    got = float16_ceiling(values)
    for value, up in zip(values.tolist(), got.tolist(), strict=True):
        if value > 65504:  # past float16: itself
            assert up == pytest.approx(value)
            continue
        assert up >= value and float(np.float16(up)) == up
        below = np.nextafter(np.float16(up), np.float16(-np.inf))
        assert float(below) < value


@pytest.mark.parametrize("row", ROW_FORMATS)
def test_stored_files_open_mapped_and_read_in_blocks(tmp_path: Path, row: RowFormat) -> None:
    stored = quantized(unit_rows(1000, 32, 4), row)
    path = tmp_path / "level.npy"
    np.save(path, stored)
    mapped = open_stored(path)
    assert isinstance(mapped, np.memmap) and row_format(mapped) == row
    assert row_dim(mapped) == 32 and len(mapped) == 1000
    whole = float16_rows(stored)
    np.testing.assert_array_equal(read_float16(path), whole)
    blocks = list(float16_blocks(path, 1000, rows=300))
    assert [len(b) for b in blocks] == [300, 300, 300, 100]
    np.testing.assert_array_equal(np.concatenate(blocks), whole)


def test_a_file_of_another_array_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "f32.npy", unit_rows(4, 8, 5))
    with pytest.raises(ValueError, match="float16"):
        open_stored(tmp_path / "f32.npy")
    other = np.zeros(3, dtype=[("codes", np.int16, (8,)), ("scale", "<f4")])
    np.save(tmp_path / "i16.npy", other)
    with pytest.raises(ValueError, match="int8 rows"):
        open_stored(tmp_path / "i16.npy")
