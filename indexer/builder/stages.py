"""The build's stages 2-3: encode and store in blocks, write the vector files.

1. (`indexer.builder.split_plan`): read the corpus (or the stored documents of a version) and
   split every document into the build's blocks, on disk.
2. `encode_and_store`: in blocks of documents, chunk and encode every level (or take the
   vectors the active version holds for an unchanged document: `block_stream`), write the
   block's vectors to `<tmp>/blocks/`, then insert its SQL rows (status `building`, invisible to
   readers) and record the block as done, in one transaction.
3. `write_vector_indexes`: `<tmp>/<level>.i8.npy` (vectors as int8 rows, or `.f16.npy`
   float16: `IndexSettings.stored_rows`) and `<level>.ids.npy` (int64 ids, row-aligned) for
   every level, and an IVF-Flat level's lists.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
from sqlalchemy import Engine
from tqdm import tqdm

from docsim.indexer.builder.block_stream import EncodeTimes, encode_prepared, prepared_blocks
from docsim.indexer.builder.engines import EncodeEngine, LocalEngine, one_ahead
from docsim.indexer.builder.reuse import Reuse
from docsim.indexer.builder.split_plan import SplitPlan
from docsim.indexer.settings import Settings
from docsim.indexer.store.faiss_files import IvfLists
from docsim.indexer.store.level_files import SCANNED_LEVELS
from docsim.indexer.store.manifest import LevelEntry, file_sha256
from docsim.indexer.store.stored_rows import (
    FILE_SUFFIX,
    RowFormat,
    float16_rows,
    quantized,
    row_format,
    stored_dtype,
    stored_shape,
)
from docsim.indexer.store.units import UnitCounter, count_units, insert_documents
from docsim.indexer.store.vector_index import FLAT, FaissIndex, choose_factory, gpu_count
from docsim.indexer.store.versions import set_build_state
from docsim.indexer.text.documents import LEVELS, Document
from docsim.models.encoders.encoder import Encoder

logger = logging.getLogger(__name__)

SignalHandler = Callable[[int, FrameType | None], Any] | int | None  # from `signal.getsignal`


def plan_fingerprint(docs: Iterable[Document], encoder: Encoder, capacity: int, block: int) -> str:
    """What must not change for a build to resume: the documents, their split, the encoder
    and its backend, the chunk size and the block size."""
    digest = hashlib.sha256()
    identity = encoder.identity()
    digest.update(
        json.dumps([identity.get("config_hash"), identity.get("backend"), capacity, block]).encode()
    )
    for doc in docs:
        digest.update(doc.doc_id.encode() + b"\0" + doc.text.encode() + b"\0")
        for sentence in doc.sentences():
            digest.update(b"%d:%d," % (sentence.start, sentence.end))
    return digest.hexdigest()


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then act on the first one as its handler
    would. In the main thread only (elsewhere Python delivers no signals). A block's SQL
    transaction is short; an interrupt inside it could leave the connection half-way through
    a commit, and the build's cleanup unable to write."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[tuple[int, FrameType | None]] = []
    previous: dict[int, SignalHandler] = {
        s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)
    }
    for signum in previous:
        signal.signal(signum, lambda number, frame: held.append((number, frame)))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            number, frame = held[0]
            handler = previous[number]
            if callable(handler):
                handler(number, frame)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), number)


def _block_file(folder: Path, block: int) -> Path:
    return folder / "blocks" / f"{block:06d}.npz"


def encode_and_store(
    engine: Engine,
    version_id: int,
    plan: SplitPlan,
    encoder: Encoder,
    *,
    folder: Path,
    capacity: int,
    fingerprint: str,
    blocks_done: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
    show_progress: bool,
    encode_engine: EncodeEngine | None = None,
    reuse: Reuse | None = None,
    rows: RowFormat = "float16",
) -> int:
    """Stage 2: chunk, encode and insert the SQL rows of every document of `plan`, block by
    block, after the `blocks_done` committed before.

    The vectors come from `encode_engine` (default: this process, `LocalEngine`), except those
    of the documents `reuse` keeps from the active version (`block_stream`).

    Each block's vectors go to `<folder>/blocks/<n>.npz` first, stored as `rows` (float32
    blocks of 100x AILA: 86 GB; int8: 19); its rows and the new count of committed blocks
    then go to SQL in one transaction, so SQL says which blocks a resume skips. Returns the
    number of blocks.
    """
    (folder / "blocks").mkdir(exist_ok=True)
    counter = UnitCounter(version_id)
    counter.next.update(count_units(engine, version_id))  # after the blocks already committed
    total, done = plan.n_sentences, plan.sentences_before(blocks_done)
    times = EncodeTimes()
    local = encode_engine or LocalEngine(encoder)
    # read back and chunked in a thread one block ahead of the encoder, so that a GPU is
    # not left idle while the host tokenises the next block
    pending = one_ahead(prepared_blocks(plan.blocks(blocks_done), encoder, capacity, times, reuse))
    started = time.perf_counter()
    # closing(): an engine's resources (a local Ray) go as soon as the loop ends or fails;
    # the encoder's thread first (it reads `pending`), then the chunking thread
    with (
        tqdm(
            total=total, initial=done, desc="encode", unit="sent", disable=not show_progress
        ) as bar,
        contextlib.closing(pending),
        contextlib.closing(encode_prepared(pending, local, reuse)) as encoded,
    ):
        waited = time.perf_counter()
        for b, (block, vectors) in enumerate(encoded, start=blocks_done):
            stored = time.perf_counter()
            times.waiting += stored - waited
            arrays = {"document": np.stack([v.document.numpy() for v in vectors])}
            for level, attr in (
                ("section", "sections"),
                ("paragraph", "paragraphs"),
                ("sentence", "sentences"),
                ("chunk", "chunks"),
            ):
                arrays[level] = np.concatenate([getattr(v, attr).numpy() for v in vectors])
            with interrupts_held(), engine.begin() as conn:
                ids = insert_documents(conn, version_id, block, counter)
                _save_block(_block_file(folder, b), arrays, ids, rows)
                set_build_state(
                    conn, version_id, {"fingerprint": fingerprint, "blocks_done": b + 1}
                )
            n = sum(len(v.sentences) for v in vectors)
            done += n
            bar.update(n)
            if on_progress is not None:
                on_progress(done, total)
            waited = time.perf_counter()
            times.storing += waited - stored
    times.log(time.perf_counter() - started, getattr(local, "seconds", None))
    return plan.n_blocks


def _save_block(
    target: Path, arrays: dict[str, np.ndarray], ids: dict[str, list[int]], rows: RowFormat
) -> None:
    """One block's vectors of every level (stored as `rows`) and their ids, written whole
    (to a partial file first)."""
    partial = target.with_suffix(".partial.npz")
    # numbers only; naming `allow_pickle` tells the type checker `**` does not fill it
    np.savez(
        partial,
        allow_pickle=False,
        **{f"{lv}_vectors": quantized(arrays[lv], rows) for lv in LEVELS},
        **{f"{lv}_ids": np.asarray(ids[lv], np.int64) for lv in LEVELS},
    )
    os.replace(partial, target)


class LevelBlocks:
    """One level's vectors and ids in the block files, read a block at a time, to be stored
    as `row` rows."""

    def __init__(
        self, folder: Path, n_blocks: int, level: str, dim: int, row: RowFormat = "float16"
    ) -> None:
        self.files = [_block_file(folder, b) for b in range(n_blocks)]
        self.level, self.dim, self.row = level, dim, row
        parts = []
        for file in self.files:
            with np.load(file) as block:
                parts.append(block[f"{level}_ids"])
        self.ids = np.concatenate(parts) if parts else np.empty(0, np.int64)  # (n,) int64
        self.starts = np.concatenate([[0], np.cumsum([len(p) for p in parts])])  # (B + 1,)

    def stored(self) -> Iterator[np.ndarray]:
        """Each block's rows as the version stores them (`row`), in order: a block written in
        that format as it is, one of another (float32, before blocks were stored so) stored."""
        for file in self.files:
            with np.load(file) as block:
                found = block[f"{self.level}_vectors"]
            if row_format(found) == self.row and found.dtype != np.float32:
                yield found
            elif found.dtype.names is not None:
                yield quantized(float16_rows(found), self.row)
            else:
                yield quantized(found.reshape(-1, self.dim), self.row)

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """`(len(positions), d)` float16 (as stored and read back): the vectors at
        `positions`, in their order."""
        out = np.empty((len(positions), self.dim), dtype=np.float16)
        block_of = np.searchsorted(self.starts, positions, side="right") - 1
        for b, part in enumerate(self.stored()):
            wanted = np.flatnonzero(block_of == b)
            out[wanted] = float16_rows(part[positions[wanted] - self.starts[b]])
        return out


def write_vector_indexes(
    folder: Path, n_blocks: int, dim: int, settings: Settings
) -> dict[str, LevelEntry]:
    """Stage 3: float16 vectors and ids per level, from the block files, a level at a time and
    a block at a time: a build holds what FAISS keeps of one level and one block's vectors,
    never every level's vectors at once. The float16 file is each level's one copy on disk: a
    Flat level has nothing beside it, an IVF-Flat level its lists (`<level>.ivf.npz`) unless
    they are deferred (`IndexSettings.scanned_level_lists`), and a reader builds the index
    from them (`store.level_files.open_level_index`); an index of another factory (codes, not
    a copy) is saved as FAISS writes it."""
    use_gpu = settings.index.use_gpu == "auto" and gpu_count() > 0
    row = settings.index.stored_rows
    levels: dict[str, LevelEntry] = {}
    for level in LEVELS:
        blocks = LevelBlocks(folder, n_blocks, level, dim, row)
        ids = blocks.ids
        factory = choose_factory(
            len(ids), settings.index.flat_max_vectors, settings.index.large_factory
        )
        deferred = factory != FLAT and _defers_lists(level, settings, use_gpu)
        index = None
        if factory != FLAT and not deferred:
            index = FaissIndex.trained(
                dim, factory, blocks.rows, len(ids), nprobe=settings.index.nprobe, use_gpu=use_gpu
            )
        vectors_file, ids_file = f"{level}.{FILE_SUFFIX[row]}.npy", f"{level}.ids.npy"
        # an IVF-Flat level keeps its lists beside its float16 file, recorded as its blocks
        # pass: never filled in memory (`IvfLists`); another index is filled and saved
        streamed = None
        if index is not None and IvfLists.accepts(index):
            streamed = IvfLists(index)
        with (folder / vectors_file).open("wb") as out:
            header = {
                "descr": np.lib.format.dtype_to_descr(stored_dtype(row, dim)),
                "fortran_order": False,
                "shape": stored_shape(row, len(ids), dim),
            }
            np.lib.format.write_array_header_1_0(out, header)
            at = 0
            for stored in blocks.stored():  # (n_b, d) float16 or (n_b,) int8 rows
                # FAISS holds the vectors as they are stored and served (read back as
                # float16), so that unit search, SDR scoring and documents added later all
                # score with the same numbers
                out.write(stored.tobytes())
                if index is not None:
                    half = float16_rows(stored)  # (n_b, d)
                    if streamed is not None:
                        streamed.assign(half)
                    else:
                        index.add(half, ids[at : at + len(half)])
                at += len(stored)
        index_file = lists_file = None
        if streamed is not None:
            lists_file = f"{level}.ivf.npz"
            streamed.save(folder / lists_file, len(ids))
        elif index is not None:
            index_file = f"{level}.faiss"
            index.save(folder / index_file)
        np.save(folder / ids_file, ids)
        names = [n for n in (index_file, lists_file, vectors_file, ids_file) if n is not None]
        levels[level] = {
            "count": int(len(ids)),
            "factory": factory,
            "index_file": index_file,
            "vectors_file": vectors_file,
            "row_format": row,
            "ids_file": ids_file,
            "bytes": sum((folder / name).stat().st_size for name in names),
            "sha256": {name: file_sha256(folder / name) for name in names},
        }
        if lists_file is not None:
            levels[level]["lists_file"] = lists_file
        if deferred:
            levels[level]["nprobe"] = settings.index.nprobe
        del index
    return levels


def _defers_lists(level: str, settings: Settings, use_gpu: bool) -> bool:
    """Whether the build leaves `level`'s IVF lists to a reader that searches it (a CPU
    service scans the `SCANNED_LEVELS` and never reads them)."""
    choice = settings.index.scanned_level_lists
    if level not in SCANNED_LEVELS or choice == "write":
        return False
    return choice == "defer" or not use_gpu
