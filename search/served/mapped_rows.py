"""A level's vectors read from the version's memory-mapped vectors file (float16 or int8 rows,
`indexer.store.stored_rows`, read as float16), with the rows of later document changes beside
it: what a sharded service's coordinator holds per level.

`MappedRows` answers the few tensor operations the coordinator applies to such a level (rows
by slice or by index, shape, dtype) by gathering only the rows asked for, so that neither
loading nor a document change reads the file into memory: a change keeps the map and adds a
row map (8 bytes a row) and its added rows. Runs of consecutive rows (a scoring pass's block,
the documents the exact stage rescores) are read with `pread`, not through the map, so that
their pages stay in the page cache and out of the process's resident set.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from docsim.indexer.store.stored_rows import float16_rows, open_stored, row_dim

# rows of a float16 file cast to float32 and multiplied at a time on the CPU: a block's
# float32 copy (6 MiB) comes from memory the allocator reuses; at 65,536 rows each cast was
# a fresh mapping whose page faults made SDR's pass 2.79 times slower. Exhaustive `sdr` over
# AILA, posted dev queries, p50: 192 and 197 ms in 8,192-row blocks, 165 and 148 in 4,096,
# 157 in 2,048 (runs alternated)
MAPPED_BLOCK_SENTENCES = 4096
# rows gathered by position are read run by run with `pread` when their runs are few or hold
# this many rows on average; scattered single rows are cheaper through the map
MIN_ROWS_PER_READ = 8
FEW_READS = 64


class MappedRows:
    """`(R, d)` float16 rows: each a row of the memory-mapped `file` or one of `added`.

    Args:
        file: the stored rows, memory-mapped (read-only): `(N, d)` float16 or `(N,)` int8
            rows with their scales (`stored_rows`), read as float16.
        place: `(R,)` int64, row r's row in `file` when >= 0, else `added[-1 - place[r]]`.
        added: `(A, d)` float16 rows added since the build.
    """

    def __init__(self, file: np.ndarray, place: np.ndarray, added: np.ndarray) -> None:
        self.file = file
        self.place = place
        self.added = added

    @classmethod
    def of_file(cls, path: Path) -> MappedRows:
        """Every row of a stored `.npy` file, in order, memory-mapped."""
        file = open_stored(path)  # (N, d) float16 or (N,) int8 rows
        empty = np.empty((0, row_dim(file)), dtype=np.float16)
        return cls(file, np.arange(file.shape[0], dtype=np.int64), empty)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.place), row_dim(self.file))

    @property
    def dtype(self) -> torch.dtype:
        return torch.float16

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def __len__(self) -> int:
        return len(self.place)

    def numel(self) -> int:
        return self.shape[0] * self.shape[1]

    def element_size(self) -> int:
        return 2

    def memory_bytes(self) -> int:
        """What it holds in the process's memory: the row map and the added rows (the file's
        pages belong to the page cache, shared with every process that maps it)."""
        return int(self.place.nbytes + self.added.nbytes)

    def __getitem__(self, rows: slice | torch.Tensor | np.ndarray) -> torch.Tensor:
        """The rows asked for (a slice, or integer positions of any shape `(...)`) as a
        float16 tensor `(..., d)`: a copy, read from the file's pages they are on."""
        if isinstance(rows, torch.Tensor):
            rows = rows.cpu().numpy()
        if isinstance(rows, np.ndarray) and rows.dtype == np.bool_:
            raise TypeError("MappedRows takes positions or a slice, not a mask")
        place = self.place[rows]  # (...) or (k,)
        flat = place.reshape(-1)  # a scoring pass's block: one run of the file, one read
        in_file = flat >= 0
        if in_file.all():  # no row added since the build: no second copy
            out = self.read_rows(flat)
        else:
            out = np.empty((len(flat), self.shape[1]), dtype=np.float16)
            out[in_file] = self.read_rows(flat[in_file])
            out[~in_file] = self.added[-1 - flat[~in_file]]
        return torch.from_numpy(out.reshape(*place.shape, self.shape[1]))

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """`(k, d)` float16: the file's rows `rows` `(k,)`, in that order. Runs of consecutive
        rows (a scoring pass's block, each document's sentences when the exact stage rescores
        documents) are read with `pread` instead of through the map, so that their pages stay
        in the page cache (shared, reclaimable) and do not pile up in this process's resident
        set query after query; rows too scattered for that (a unit search's
        nearest sentences: on average fewer than `MIN_ROWS_PER_READ` a run) come through the
        map, one page each."""
        if not len(rows):
            return np.empty((0, self.shape[1]), dtype=np.float16)
        ascending = bool(np.all(rows[1:] > rows[:-1]))  # a sub-collection's rows are
        distinct, at = (rows, None) if ascending else np.unique(rows, return_inverse=True)
        starts = np.flatnonzero(np.r_[True, np.diff(distinct) != 1])  # (n,) each run's first
        if len(starts) * MIN_ROWS_PER_READ > len(distinct) and len(starts) > FEW_READS:
            return as_float16(self.file[rows])
        ends = np.r_[starts[1:], len(distinct)]  # (n,)
        read = as_float16(self._read_runs(distinct[starts], distinct[ends - 1] + 1))  # (u, d)
        return read if at is None else read[at.reshape(-1)]

    def _read_runs(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """The file's rows `starts[i]:stops[i]` as stored (`(k, d)` or `(k,)` records), one
        run after another, with `pread` through one descriptor (a file not mapped: by
        slicing)."""
        file = self.file
        out = np.empty((int((stops - starts).sum()), *file.shape[1:]), dtype=file.dtype)
        fd = -1
        if isinstance(file, np.memmap) and file.filename is not None:
            try:
                fd = os.open(file.filename, os.O_RDONLY)
            except FileNotFoundError:  # the version's folder was removed (retired, or its
                pass  # collection deleted) while a request still reads it: the map holds it
        if fd < 0 or not isinstance(file, np.memmap):
            at = 0
            for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
                out[at : at + stop - start] = file[start:stop]
                at += stop - start
            return out
        width = int(np.prod(file.shape[1:], dtype=np.int64)) * file.dtype.itemsize  # a row
        view = memoryview(out.data).cast("B")
        try:
            at = 0
            for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
                done, size, offset = 0, (stop - start) * width, file.offset + start * width
                while done < size:
                    got = os.preadv(fd, [view[at + done : at + size]], offset + done)
                    if got <= 0:
                        raise OSError(f"{file.filename}: short read at row {start}")
                    done += got
                at += size
        finally:
            os.close(fd)
        return out

    def changed(self, keep: np.ndarray, added: np.ndarray) -> MappedRows:
        """These rows where `keep` `(R,)` is true, then `added` `(a, d)`: the file stays
        mapped; added rows no kept row refers to are dropped."""
        place = self.place[keep]  # (k,)
        earlier = place < 0
        carried = self.added[-1 - place[earlier]]  # (c, d): added before, still kept
        place[earlier] = -1 - np.arange(len(carried))
        new = np.asarray(added, dtype=np.float16).reshape(-1, self.shape[1])  # (a, d)
        fresh = -1 - np.arange(len(carried), len(carried) + len(new))
        return MappedRows(self.file, np.concatenate([place, fresh]), np.concatenate([carried, new]))


def as_float16(stored: np.ndarray) -> np.ndarray:
    """Rows read from the file, as float16 `(k, d)`: float16 rows as they are (no copy)."""
    return stored if stored.dtype == np.float16 else float16_rows(stored)
