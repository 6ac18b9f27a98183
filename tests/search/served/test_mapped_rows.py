"""`MappedRows` reads as the array it stands for: the file's rows with some removed and rows
added, by slice and by positions of any shape, through changes, with the file never copied."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from docsim.indexer.store.stored_rows import ROW_FORMATS, float16_rows, quantized
from docsim.search.served.mapped_rows import MappedRows

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


@pytest.fixture(params=ROW_FORMATS)
def file_rows(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, np.ndarray]:
    """A stored file of either format, and its rows as float16 `(N, d)` (as read back)."""
    stored = quantized(np.random.default_rng(0).standard_normal((50, 8)), request.param)
    np.save(tmp_path / "level.npy", stored)
    return tmp_path / "level.npy", float16_rows(stored)


def assert_reads_as(mapped: MappedRows, expected: np.ndarray) -> None:
    """Every way the coordinator reads rows, against the plain array."""
    assert mapped.shape == expected.shape and len(mapped) == len(expected)
    assert mapped.numel() * mapped.element_size() == expected.nbytes
    assert torch.equal(mapped[0 : len(expected)], torch.from_numpy(expected))
    assert torch.equal(mapped[3:9], torch.from_numpy(expected[3:9]))
    positions = np.random.default_rng(1).integers(0, len(expected), (4, 6))  # (4, 6)
    got = mapped[torch.from_numpy(positions)]
    assert got.dtype == torch.float16 and got.shape == (4, 6, expected.shape[1])
    assert torch.equal(got, torch.from_numpy(expected[positions]))
    assert torch.equal(mapped[torch.tensor([], dtype=torch.long)], torch.empty(0, 8).half())


def test_a_file_reads_as_its_rows(file_rows: tuple[Path, np.ndarray]) -> None:
    path, rows = file_rows
    mapped = MappedRows.of_file(path)
    assert isinstance(mapped.file, np.memmap)  # mapped, not read in
    assert_reads_as(mapped, rows)


def test_changes_keep_the_map_and_only_the_rows_added(file_rows: tuple[Path, np.ndarray]) -> None:
    path, rows = file_rows
    rng = np.random.default_rng(2)
    first = MappedRows.of_file(path)
    mapped, expected = first, rows
    for step in range(4):
        keep = rng.random(len(expected)) > 0.2  # (R,)
        added = rng.standard_normal((step + 2, 8)).astype(np.float16)  # (a, d)
        mapped = mapped.changed(keep, added)
        expected = np.concatenate([expected[keep], added])
        assert_reads_as(mapped, expected)
        assert mapped.file is first.file  # the same map: the file is never read in
        # the added rows held are exactly those still kept: removed ones are dropped
        assert len(mapped.added) == int((mapped.place < 0).sum())


def test_a_mask_is_refused(file_rows: tuple[Path, np.ndarray]) -> None:
    mapped = MappedRows.of_file(file_rows[0])
    with pytest.raises(TypeError, match="not a mask"):
        mapped[torch.ones(len(mapped), dtype=torch.bool)]


def test_a_run_of_the_file_is_read_not_mapped(file_rows: tuple[Path, np.ndarray]) -> None:
    path, rows = file_rows
    mapped = MappedRows.of_file(path)
    for start, stop in ((0, 50), (7, 8), (13, 41)):
        assert np.array_equal(mapped.read_rows(np.arange(start, stop)), rows[start:stop])
        assert torch.equal(mapped[start:stop], torch.from_numpy(rows[start:stop]))
    # after a change the slice is no longer one run of the file: gathered, still right
    changed = mapped.changed(np.arange(50) % 3 != 0, np.ones((2, 8), np.float16))
    expected = np.concatenate([rows[np.arange(50) % 3 != 0], np.ones((2, 8), np.float16)])
    assert torch.equal(changed[5:20], torch.from_numpy(expected[5:20]))


class _CountedMap(np.memmap):
    """A map that counts the reads by position made through it (slices are not counted)."""

    by_position = 0

    def __getitem__(self, key):  # noqa: ANN001, ANN204
        if not isinstance(key, slice | int | tuple):
            _CountedMap.by_position += 1
        return super().__getitem__(key)


def test_runs_of_rows_are_read_not_mapped_and_scattered_rows_are_mapped(tmp_path: Path) -> None:
    rows = np.random.default_rng(3).standard_normal((5000, 8)).astype(np.float16)  # (N, d)
    np.save(tmp_path / "level.npy", rows)
    mapped = MappedRows.of_file(tmp_path / "level.npy")
    mapped.file = mapped.file.view(_CountedMap)  # keeps the file name and offset
    rng = np.random.default_rng(4)
    starts = rng.integers(0, 4900, 40)  # documents of 1 to 99 rows, in any order, repeated
    runs = np.concatenate([np.arange(s, s + rng.integers(1, 100)) for s in starts])
    runs = np.concatenate([runs, runs[:30]])
    scattered = rng.choice(5000, 1000, replace=False)  # (1000,) single rows
    _CountedMap.by_position = 0
    got = mapped[torch.from_numpy(runs)]
    assert _CountedMap.by_position == 0  # every run read with pread
    assert torch.equal(got, torch.from_numpy(rows[runs]))
    assert torch.equal(mapped[torch.from_numpy(scattered)], torch.from_numpy(rows[scattered]))
    assert _CountedMap.by_position == 1  # scattered: through the map
    assert mapped[torch.from_numpy(runs[:0])].shape == (0, 8)


def test_rows_are_still_read_after_the_file_is_removed(tmp_path: Path) -> None:
    """A retired version's folder goes while requests still read it: the map holds the file."""
    rows = np.random.default_rng(5).standard_normal((300, 8)).astype(np.float16)  # (N, d)
    np.save(tmp_path / "level.npy", rows)
    mapped = MappedRows.of_file(tmp_path / "level.npy")
    (tmp_path / "level.npy").unlink()
    runs = np.r_[np.arange(10, 60), np.arange(200, 280)]
    assert torch.equal(mapped[torch.from_numpy(runs)], torch.from_numpy(rows[runs]))
    assert torch.equal(mapped[5:90], torch.from_numpy(rows[5:90]))
