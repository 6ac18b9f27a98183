from __future__ import annotations

import os
import signal
from pathlib import Path

import faiss
import numpy as np
import pytest

from docsim.indexer.builder.stages import interrupts_held, write_vector_indexes
from docsim.indexer.settings import Settings
from docsim.indexer.store.level_files import open_level_index
from docsim.indexer.store.stored_rows import (
    FILE_SUFFIX,
    ROW_FORMATS,
    RowFormat,
    float16_rows,
    quantized,
)
from docsim.indexer.store.vector_index import FaissIndex
from docsim.indexer.text.documents import LEVELS

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


@pytest.fixture()
def ctrl_c_raises():
    """Ctrl-C as in a terminal (a background run, as CI's, inherits SIGINT ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_an_interrupt_inside_a_held_block_acts_after_it(ctrl_c_raises: None) -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("after the signal")  # the block goes on to its end
        steps.append("never")
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_a_held_block_without_signals_changes_nothing() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGTERM) == before


def test_an_ignored_interrupt_stays_ignored() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


SIZES = {"document": 3, "section": 7, "paragraph": 40, "sentence": 150, "chunk": 12}


def _block_files(folder: Path, dim: int, row: RowFormat | None) -> dict[str, list[np.ndarray]]:
    """Four block files of random unit rows in `folder/blocks` (float32, or stored as `row`);
    returns each level's float32 rows, block by block."""
    rng = np.random.default_rng(0)
    (folder / "blocks").mkdir()
    whole: dict[str, list[np.ndarray]] = {level: [] for level in LEVELS}
    for b in range(4):
        arrays = {}
        for level in LEVELS:
            n = SIZES[level] + b  # blocks of different sizes
            vectors = rng.standard_normal((n, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            arrays[f"{level}_vectors"] = vectors if row is None else quantized(vectors, row)
            arrays[f"{level}_ids"] = np.arange(n, dtype=np.int64) + 1000 * b
            whole[level].append(vectors)
        np.savez(folder / "blocks" / f"{b:06d}.npz", **arrays)
    return whole


@pytest.mark.parametrize("blocks_stored", [False, True])  # float32 blocks (before), or as stored
@pytest.mark.parametrize("row", ROW_FORMATS)
@pytest.mark.parametrize("flat_max_vectors", [1_000_000, 300])  # Flat, and IVF for large levels
def test_vector_files_written_a_block_at_a_time_equal_those_of_the_whole_matrix(
    tmp_path: Path, flat_max_vectors: int, row: RowFormat, blocks_stored: bool
) -> None:
    """Stage 3 reads the block files a level and a block at a time; what it writes equals
    what the whole matrix stored at once gives (the reference), byte for byte, and FAISS
    holds the rows as they are read back."""
    dim = 16
    whole = _block_files(tmp_path, dim, row if blocks_stored else None)
    index = {"flat_max_vectors": flat_max_vectors, "stored_rows": row}
    settings = Settings(data_dir=tmp_path, index=index | {"scanned_level_lists": "write"})
    levels = write_vector_indexes(tmp_path, 4, dim, settings)
    assert levels["sentence"]["factory"] == ("Flat" if flat_max_vectors > 1000 else "IVF15,Flat")
    for level in LEVELS:
        stored = quantized(np.concatenate(whole[level]), row)
        matrix = float16_rows(stored)  # (n, d) as read back
        ids = np.concatenate([np.arange(SIZES[level] + b) + 1000 * b for b in range(4)])
        assert levels[level]["vectors_file"] == f"{level}.{FILE_SUFFIX[row]}.npy"
        assert levels[level]["row_format"] == row
        written = np.load(tmp_path / levels[level]["vectors_file"])
        assert written.tobytes() == stored.tobytes() and written.dtype == stored.dtype
        np.testing.assert_array_equal(np.load(tmp_path / f"{level}.ids.npy"), ids)
        reference = FaissIndex.build(
            matrix.astype(np.float32), ids, levels[level]["factory"], nprobe=32
        )
        if levels[level]["factory"] == "Flat":  # the float16 file is its one copy on disk
            assert levels[level]["index_file"] is None
            assert not (tmp_path / f"{level}.faiss").exists()
            loaded = open_level_index(tmp_path, levels[level])
            np.testing.assert_array_equal(loaded.reconstruct(ids), reference.reconstruct(ids))
        else:  # IVF-Flat: its lists beside the float16 file, filled as FAISS fills it
            assert levels[level]["index_file"] is None
            assert levels[level]["lists_file"] == f"{level}.ivf.npz"
            assert not (tmp_path / f"{level}.faiss").exists()
            loaded = open_level_index(tmp_path, levels[level])
            got = faiss.serialize_index(loaded.host).tobytes()
            assert got == faiss.serialize_index(reference.host).tobytes(), level
        assert loaded.count == len(ids)


@pytest.mark.parametrize("row", ROW_FORMATS)
def test_deferred_lists_give_the_index_written_lists_give(tmp_path: Path, row: RowFormat) -> None:
    """A level whose lists the build deferred has no lists file; a reader trains and fills
    the same index, byte for byte, as the one the written lists give."""
    dim, index = 16, {"flat_max_vectors": 300, "stored_rows": row}
    built = {}
    for lists in ("write", "defer"):
        folder = tmp_path / lists
        folder.mkdir()
        _block_files(folder, dim, row)
        settings = Settings(data_dir=folder, index=index | {"scanned_level_lists": lists})
        built[lists] = write_vector_indexes(folder, 4, dim, settings)["sentence"]
    written, deferred = built["write"], built["defer"]
    assert written["lists_file"] == "sentence.ivf.npz" and "nprobe" not in written
    assert "lists_file" not in deferred and deferred["nprobe"] == 32
    assert not (tmp_path / "defer" / "sentence.ivf.npz").exists()
    assert deferred["factory"] == written["factory"] == "IVF15,Flat"
    assert deferred["bytes"] < written["bytes"]
    indices = {lists: open_level_index(tmp_path / lists, built[lists]) for lists in built}
    got, want = (faiss.serialize_index(indices[k].host).tobytes() for k in ("defer", "write"))
    assert got == want


def test_auto_defers_the_scanned_levels_lists_on_a_cpu_build(tmp_path: Path) -> None:
    _block_files(tmp_path, 16, "int8")
    index = {"flat_max_vectors": 30, "scanned_level_lists": "auto", "use_gpu": "never"}
    levels = write_vector_indexes(tmp_path, 4, 16, Settings(data_dir=tmp_path, index=index))
    assert all(
        levels[level]["factory"].startswith("IVF") for level in LEVELS if level != "document"
    )
    held = {level for level in LEVELS if "lists_file" in levels[level]}
    assert held == {"section"}  # a CPU service searches sections through FAISS
