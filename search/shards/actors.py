"""SDR shards as Ray actors: each loads its range of a version's sentence (and paragraph and
section) vectors itself, as float16 memory-mapped from the version's files, so that Ray can
restart a dead one from a small `ShardSpec` (the files' paths and the range's rows, never the
vectors).

`search.shards.ray_shards.RayShards` places them on a Ray cluster and calls them.
"""

from __future__ import annotations

import logging
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from docsim.indexer.store.stored_rows import open_stored, row_format
from docsim.models.kernels.scoring import RaggedCollection
from docsim.search.served.mapped_rows import MappedRows
from docsim.search.served.sentence_scan import ScanShape, scan_basis
from docsim.search.shards.cuts import compressed, shard_cuts
from docsim.search.shards.shard import SEARCHED_ON_SHARDS, SdrShard

if TYPE_CHECKING:  # the actors' process imports no SQL
    from docsim.search.served.loaded_index import LoadedIndex

logger = logging.getLogger(__name__)
CALL_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class LevelRows:
    """How a shard loads its rows of one level from the version's float16 `.npy` file.

    Attributes:
        vectors_file: the level's vectors (rows by ascending id).
        file_rows: `(2,)` a contiguous run `[start, stop)` of the file's rows, or `(R_s,)`
            each row's place in the file, -1 for rows added after the build.
        added: `(A, d)` float16 vectors of the added rows, in order.
        first_row: the global row (collection order) of its first row.
    """

    vectors_file: str
    file_rows: np.ndarray
    added: np.ndarray
    first_row: int = 0

    def load(self, device: str = "cpu") -> torch.Tensor:
        """`(R_s, d)` float16: on the CPU a contiguous run of a float16 file stays
        memory-mapped, and an int8 file's rows are read as they are asked for (`MappedRows`);
        on a GPU the rows are copied there."""
        mapped = open_stored(Path(self.vectors_file))  # (N, d) float16 or (N,) int8 rows
        if row_format(mapped) == "int8":
            read = self._mapped(mapped)  # answers the reads a shard makes, as a tensor would
            return cast(torch.Tensor, read) if device == "cpu" else read[:].to(device)
        rows: torch.Tensor
        if self.file_rows.shape == (2,) and not len(self.added):
            start, stop = (int(x) for x in self.file_rows)
            with warnings.catch_warnings():  # a read-only map: torch never writes to it here
                warnings.simplefilter("ignore", UserWarning)
                rows = torch.from_numpy(mapped[start:stop])
        else:
            gathered = np.empty((len(self.file_rows), mapped.shape[1]), dtype=np.float16)
            kept = self.file_rows >= 0
            gathered[kept] = mapped[self.file_rows[kept]]
            gathered[~kept] = self.added
            rows = torch.from_numpy(gathered)
        return rows if device == "cpu" else rows.to(device)  # products cast per block

    def _mapped(self, file: np.ndarray) -> MappedRows:
        """These rows of the mapped `file`, read as they are asked for."""
        if self.file_rows.shape == (2,):
            place = np.arange(int(self.file_rows[0]), int(self.file_rows[1]), dtype=np.int64)
        else:
            place = self.file_rows.astype(np.int64)  # a copy: the added rows are placed below
            place[place < 0] = -1 - np.arange(int((place < 0).sum()))
        return MappedRows(file, place, np.asarray(self.added, dtype=np.float16))


@dataclass(frozen=True)
class ShardSpec:
    """How a shard loads documents `[first, first + D_s)` of a version.

    Attributes:
        levels: its rows of the sentence level and of the other levels searched on shards.
        paragraph_lengths, document_lengths: the range's structure.
        tiebreak: `(D_s,)` its slice of the collection's fixed random tie order.
        scan: how a CPU shard compresses its sentences for the sentence-set methods' first
            pass (None, or on a GPU: it scores them all exactly).
        basis: `(d, k)` float32, the basis it projects them on: the whole collection's
            (`scan_basis`), so that every shard compresses as one process does.
    """

    levels: dict[str, LevelRows]
    paragraph_lengths: np.ndarray
    document_lengths: np.ndarray
    first: int
    tiebreak: np.ndarray
    scan: ScanShape | None = None
    basis: np.ndarray | None = None


def load_shard(spec: ShardSpec, device: str = "cpu") -> SdrShard:
    """The shard `spec` describes, its rows on `device` ("cpu" or "cuda")."""
    held = {level: rows.load(device) for level, rows in spec.levels.items()}
    collection = RaggedCollection(
        sentences=held.pop("sentence"),
        paragraph_lengths=torch.from_numpy(spec.paragraph_lengths),
        document_lengths=torch.from_numpy(spec.document_lengths),
    )
    units = {level: (rows, spec.levels[level].first_row) for level, rows in held.items()}
    basis = torch.from_numpy(spec.basis) if spec.basis is not None else None
    scan = compressed(collection, spec.scan if device == "cpu" else None, basis)
    return SdrShard(
        collection, spec.first, spec.tiebreak, spec.levels["sentence"].first_row, units, scan
    )


def level_rows(index: LoadedIndex, level: str, r0: int, r1: int) -> LevelRows:
    """Where global rows `[r0, r1)` of `level` are: a run of the version's file, or the
    place of each (kept rows) and the vectors of rows added since the build."""
    info = index.manifest["levels"][level]
    file_ids = np.load(Path(index.path) / info["ids_file"], mmap_mode="r")
    ids = index.ids[level][r0:r1]  # collection order is ascending id
    place = np.searchsorted(file_ids, ids)
    found = (place < len(file_ids)) & (file_ids[np.minimum(place, len(file_ids) - 1)] == ids)
    rows = np.where(found, place, -1).astype(np.int64)
    contiguous = len(rows) and found.all() and rows[-1] - rows[0] == len(rows) - 1
    added = index.vectors[level][torch.from_numpy(np.flatnonzero(~found) + r0)]  # (A, d)
    return LevelRows(
        vectors_file=str(Path(index.path) / info["vectors_file"]),
        file_rows=np.array([rows[0], rows[-1] + 1]) if contiguous else rows,
        added=added.numpy().astype(np.float16),
        first_row=r0,
    )


def shard_specs(
    index: LoadedIndex, tiebreak: np.ndarray, n: int, scan: ScanShape | None = None
) -> list[ShardSpec]:
    """`n` shards of a loaded version, by about equal sentence counts, compressing their
    sentences as `scan` says (None: not compressed)."""
    lengths = index.collection
    basis = None if scan is None else scan_basis(index.vectors["sentence"], scan).numpy()
    specs = []
    for cut in shard_cuts(index, n):
        p0, p1 = cut.rows["paragraph"]
        specs.append(
            ShardSpec(
                levels={
                    level: level_rows(index, level, *cut.rows[level])
                    for level in SEARCHED_ON_SHARDS
                },
                paragraph_lengths=lengths.paragraph_lengths[p0:p1].numpy().copy(),
                document_lengths=lengths.document_lengths[cut.first : cut.stop].numpy().copy(),
                first=cut.first,
                tiebreak=np.asarray(tiebreak[cut.first : cut.stop]).copy(),
                scan=scan,
                basis=basis,
            )
        )
    return specs


class ShardActor:
    """The actor's body: one shard, loaded from its spec (again, when Ray restarts it)."""

    def __init__(self, spec: ShardSpec) -> None:
        import ray

        # a GPU Ray gave this actor (num_gpus > 0): Ray sets CUDA_VISIBLE_DEVICES to it
        device = "cuda" if ray.get_gpu_ids() and torch.cuda.is_available() else "cpu"
        self.shard = load_shard(spec, device)
        self.incarnation = uuid.uuid4().hex  # a new one each time Ray restarts it
        logger.info(
            "Shard of documents %d-%d loaded on %s (%d sentences)",
            spec.first,
            spec.first + self.shard.n_documents,
            device,
            self.shard.collection.sentences.shape[0],
        )

    def moments(self, query: Any) -> Any:
        return self.shard.moments(query)

    def top(self, key: str, stats: Any, k: int | None) -> Any:
        return self.shard.top(key, stats, k)

    def sentence_scores(self, query: Any, method: str, *options: Any) -> Any:
        return self.shard.sentence_scores(query, method, *options)

    def sentence_estimates(self, query: Any, method: str) -> Any:
        return self.shard.sentence_estimates(query, method)

    def nearest(self, level: str, vectors: Any, k: int, within: Any = None) -> Any:
        return self.shard.nearest(level, vectors, k, within)

    def ping(self) -> str:
        return self.incarnation

    def node(self) -> str:
        """The address of the Ray node it runs on."""
        import ray

        return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]

    def device(self) -> str:
        """Where its sentences are: "cpu", or "cuda:N" as this actor sees the GPU Ray gave it."""
        return str(self.shard.device)

    def memory(self) -> dict[str, int]:
        """This process's resident and unique (not shared with the page cache) bytes, and on
        a GPU the bytes torch holds there."""
        import psutil

        info = psutil.Process().memory_full_info()
        out = {"rss": int(info.rss), "uss": int(info.uss)}
        if self.shard.device.type == "cuda":
            out["gpu_allocated"] = int(torch.cuda.memory_allocated(self.shard.device))
        return out
