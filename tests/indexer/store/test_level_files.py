"""A level's files: a Flat level's float16 vectors are its one copy on disk and its exact index
is built from them when read; a level with an index file (IVF, or a version built before Flat
levels stopped writing theirs) is read from it."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from docsim.indexer.store.faiss_files import flat_index
from docsim.indexer.store.level_files import level_files, open_level_index
from docsim.indexer.store.vector_index import FaissIndex

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def written_level(folder: Path, count: int = 1500, dim: int = 24) -> tuple[dict, np.ndarray]:
    """A Flat level written as a build writes it (float16 vectors and ids, no index file),
    and its vectors."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    half = vectors.astype(np.float16)
    ids = np.sort(rng.choice(10 * count, size=count, replace=False)).astype(np.int64)
    np.save(folder / "sentence.f16.npy", half)
    np.save(folder / "sentence.ids.npy", ids)
    level = {
        "count": count,
        "factory": "Flat",
        "index_file": None,
        "vectors_file": "sentence.f16.npy",
        "ids_file": "sentence.ids.npy",
    }
    return level, half


def test_a_flat_level_is_searched_as_an_index_over_its_float16_vectors(tmp_path: Path) -> None:
    level, half = written_level(tmp_path)
    ids = np.load(tmp_path / "sentence.ids.npy")
    opened = open_level_index(tmp_path, level)
    reference = FaissIndex.build(half.astype(np.float32), ids, "Flat")  # the plain way
    queries = np.random.default_rng(8).standard_normal((20, 24)).astype(np.float32)
    for got, want in zip(opened.search(queries, 10), reference.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_array_equal(got.scores, want.scores)
    np.testing.assert_array_equal(opened.ids(), ids)
    np.testing.assert_array_equal(opened.reconstruct(ids[:5]), half[:5].astype(np.float32))
    assert level_files(level) == ["sentence.f16.npy", "sentence.ids.npy"]


def test_a_level_with_an_index_file_is_read_from_it(tmp_path: Path) -> None:
    """A version built before: its `.faiss` is read (here one that differs from the float16
    file, to tell which one was read)."""
    level, half = written_level(tmp_path)
    ids = np.load(tmp_path / "sentence.ids.npy")
    FaissIndex.build(-half.astype(np.float32), ids, "Flat").save(tmp_path / "sentence.faiss")
    old = {**level, "index_file": "sentence.faiss"}
    opened = open_level_index(tmp_path, old)
    np.testing.assert_array_equal(opened.reconstruct(ids[:3]), -half[:3].astype(np.float32))
    assert level_files(old) == ["sentence.faiss", "sentence.f16.npy", "sentence.ids.npy"]


@pytest.mark.parametrize("count", [0, 1, 1500])
def test_a_flat_index_filled_in_place_is_the_one_adding_makes(tmp_path: Path, count: int) -> None:
    """`flat_index` (storage allocated once) against `build` (adding blocks):
    byte for byte FAISS's serialisation, from blocks of uneven sizes."""
    level, half = written_level(tmp_path)
    ids = np.load(tmp_path / "sentence.ids.npy")[:count]
    vectors = half[:count]
    cuts = [0, min(count, 700), min(count, 701), count]
    blocks = [vectors[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    filled = flat_index(24, ids, blocks)
    built = FaissIndex.build(vectors.astype(np.float32), ids, "Flat")
    assert (
        faiss.serialize_index(filled.host).tobytes() == faiss.serialize_index(built.host).tobytes()
    )
    with pytest.raises(ValueError, match="vectors for"):
        flat_index(24, np.arange(count + 1), blocks)
