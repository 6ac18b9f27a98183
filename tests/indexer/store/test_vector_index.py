from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from docsim.indexer.store.faiss_files import IvfLists, ivf_flat_index
from docsim.indexer.store.numpy_index import NumpyIndex
from docsim.indexer.store.vector_index import (
    FaissIndex,
    NearestCentroid,
    choose_factory,
    gpu_count,
    kmeans,
    shard,
)

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def unit_vectors(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture()
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    vectors = unit_vectors(3000, 48, seed=1)
    ids = np.arange(3000, dtype=np.int64) * 7919 + (5 << 40)  # sparse, large, like SQL keys
    queries = unit_vectors(25, 48, seed=2)
    return vectors, ids, queries


def test_flat_search_equals_numpy_brute_force(data, tmp_path: Path) -> None:
    vectors, ids, queries = data
    index = FaissIndex.build(vectors, ids, "Flat")
    reference = NumpyIndex(vectors, ids)
    for got, want in zip(index.search(queries, 10), reference.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-5)
    index.save(tmp_path / "x.faiss")
    loaded = FaissIndex.load(tmp_path / "x.faiss", "Flat", mmap=True)
    assert loaded.count == 3000
    np.testing.assert_array_equal(loaded.search(queries, 5)[0].ids, index.search(queries, 5)[0].ids)
    np.testing.assert_allclose(loaded.reconstruct(ids[:3]), vectors[:3], atol=1e-7)


def test_ivf_recall_against_brute_force(data) -> None:
    vectors, ids, queries = data
    factory = choose_factory(len(vectors), flat_max_vectors=100, large_factory="IVF{nlist},Flat")
    assert factory.startswith("IVF")
    index = FaissIndex.build(vectors, ids, factory, nprobe=64)
    reference = NumpyIndex(vectors, ids)
    found = [
        len(set(g.ids) & set(w.ids)) / 10
        for g, w in zip(index.search(queries, 10), reference.search(queries, 10), strict=True)
    ]
    assert np.mean(found) >= 0.95


def test_padding_labels_are_dropped() -> None:
    vectors = unit_vectors(3, 8, seed=0)
    index = FaissIndex.build(vectors, np.array([10, 20, 30]))
    hits = index.search(vectors[:1], 50)[0]
    assert sorted(hits.ids.tolist()) == [10, 20, 30]
    assert hits.ids[0] == 10 and hits.scores[0] == pytest.approx(1.0, abs=1e-6)
    empty = FaissIndex.build(np.empty((0, 8), np.float32), np.empty(0, np.int64))
    assert empty.search(vectors[:2], 5)[1].ids.size == 0


def test_mismatched_ids_are_rejected() -> None:
    with pytest.raises(ValueError, match="do not match"):
        FaissIndex.build(unit_vectors(3, 8, 0), np.array([1, 2]))


@pytest.mark.parametrize("factory", ["Flat", "IVF40,Flat"])
def test_sharded_search_equals_the_whole_index(data, factory: str) -> None:
    """The multi-GPU layout (IndexShards over disjoint parts), here with CPU parts."""
    vectors, ids, queries = data
    whole = FaissIndex.build(vectors, ids, factory, nprobe=8)
    sharded = FaissIndex(shard(whole.index, 3), factory, host=whole.index)
    parts = [sharded.index.at(i) for i in range(3)]
    assert sorted(p.ntotal for p in parts) == [1000, 1000, 1000]
    part_ids = [set(faiss_ids(p)) for p in parts]
    assert not (part_ids[0] & part_ids[1]) and set().union(*part_ids) == set(ids.tolist())
    for got, want in zip(sharded.search(queries, 10), whole.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6, atol=1e-6)


def faiss_ids(index) -> list[int]:  # noqa: ANN001
    import faiss  # the test may look inside; product code keeps faiss in one module

    return faiss.vector_to_array(faiss.downcast_index(index).id_map).tolist()


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() == 0, reason="needs faiss-gpu and a GPU")
def test_gpu_search_equals_cpu_and_changes_reach_the_gpu_copy(data) -> None:
    vectors, ids, queries = data
    cpu = FaissIndex.build(vectors, ids, "Flat")
    gpu = cpu.to_gpu()  # sharded over every GPU when there are several
    assert gpu.on_gpu
    for got, want in zip(gpu.search(queries, 10), cpu.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got.ids, want.ids)
    gpu.remove(ids[:1500])
    cpu.remove(ids[:1500])
    assert gpu.count == cpu.count == 1500
    for got, want in zip(gpu.search(queries, 10), cpu.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got.ids, want.ids)
    np.testing.assert_array_equal(np.sort(gpu.ids()), np.sort(ids[1500:]))


@pytest.mark.parametrize("factory", ["Flat", "IVF40,Flat"])
def test_removal_keeps_ids_and_vectors_together(data, factory: str) -> None:
    """A regression: removing through IndexIDMap2 from an IVF index (which does not renumber
    like Flat) used to leave ids pointing at other vectors."""
    vectors, ids, queries = data
    index = FaissIndex.build(vectors, ids, factory, nprobe=40)  # nprobe = nlist: exhaustive
    assert index.remove(np.concatenate([ids[::2], [12345]])) == 1500  # an unknown id is fine
    reference = NumpyIndex(vectors[1::2], ids[1::2])
    for got, want in zip(index.search(queries, 10), reference.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.sort(index.ids()), np.sort(ids[1::2]))
    np.testing.assert_allclose(index.reconstruct(ids[1:7:2]), vectors[1:7:2], atol=1e-6)
    index.add(vectors[:2], ids[:2])
    assert index.search(vectors[:1], 1)[0].ids[0] == ids[0]


@pytest.mark.parametrize("factory", ["Flat", "IVF16,Flat"])
def test_search_within_ids_equals_brute_force_over_them(data, factory: str) -> None:
    """A search restricted to some ids (a candidates pool) finds its best among them only,
    however far they are from the query's nearest neighbours in the whole index."""
    vectors, ids, queries = data
    index = FaissIndex.build(vectors, ids, factory, nprobe=16)
    within = ids[np.random.default_rng(3).choice(len(ids), 40, replace=False)]
    reference = NumpyIndex(vectors, ids)
    got, want = index.search(queries, 5, within=within), reference.search(queries, 5, within)
    for g, w in zip(got, want, strict=True):
        assert np.isin(g.ids, within).all() and len(g.ids) == 5
        np.testing.assert_array_equal(g.ids, w.ids)
        np.testing.assert_allclose(g.scores, w.scores, rtol=1e-5, atol=1e-5)
    assert all(len(h.ids) == 0 for h in index.search(queries, 5, within=within[:0]))


@pytest.mark.parametrize("factory", ["IVF40,Flat", "IVF600,Flat"])  # most lists filled; few
def test_an_ivf_level_filled_from_its_lists_is_the_index_faiss_fills(
    data, factory: str, tmp_path: Path
) -> None:
    """`IvfLists` then `ivf_flat_index` against the reference: the same trained index filled
    block by block in memory. Blocks of uneven sizes, float16 rows as a build stores them;
    byte for byte FAISS's serialisation, and the same searches."""
    vectors, ids, queries = data
    half = vectors.astype(np.float16)
    blocks = [(0, 700), (700, 701), (701, 2000), (2000, 3000)]  # one of a single vector
    expected = FaissIndex.trained(48, factory, lambda rows: half[rows], len(ids), nprobe=9)
    lists = IvfLists(FaissIndex.trained(48, factory, lambda rows: half[rows], len(ids), nprobe=9))
    for start, end in blocks:
        expected.add(half[start:end], ids[start:end])
        lists.assign(half[start:end])
    lists.save(tmp_path / "level.ivf.npz", len(ids))
    nlist = faiss.extract_index_ivf(expected.host.index).nlist
    size = (tmp_path / "level.ivf.npz").stat().st_size  # centroids and 4 bytes a vector
    assert size < nlist * 48 * 4 + 4 * len(ids) + 2048
    filled = ivf_flat_index(factory, tmp_path / "level.ivf.npz", half, ids)
    got, want = faiss.serialize_index(filled.host), faiss.serialize_index(expected.host)
    assert got.tobytes() == want.tobytes()
    for g, w in zip(filled.search(queries, 5), expected.search(queries, 5), strict=True):
        np.testing.assert_array_equal(g.ids, w.ids)
    filled.add(vectors[:1], np.array([10**9]))  # it takes changes as a filled index does
    assert filled.search(vectors[:1], 1)[0].ids[0] in (10**9, ids[0])


def test_the_lists_take_only_an_empty_ivf_flat_index(data, tmp_path: Path) -> None:
    vectors, ids, _ = data
    assert not IvfLists.accepts(FaissIndex.build(vectors, ids, "Flat"))
    assert not IvfLists.accepts(FaissIndex.build(vectors, ids, "IVF16,Flat"))  # filled
    sq = FaissIndex.trained(48, "IVF16,SQ8", lambda rows: vectors[rows], len(ids))
    with pytest.raises(TypeError, match="IVF-Flat"):
        IvfLists(sq)
    lists = IvfLists(FaissIndex.trained(48, "IVF16,Flat", lambda r: vectors[r], len(ids)))
    lists.assign(vectors[:10])
    with pytest.raises(ValueError, match="10 vectors assigned but 11"):
        lists.save(tmp_path / "never.npz", 11)
    lists.save(tmp_path / "ten.npz", 10)
    with pytest.raises(ValueError, match="10 lists for 11 vectors"):
        ivf_flat_index("IVF16,Flat", tmp_path / "ten.npz", vectors[:11], ids[:11])


def test_nearest_centroid_equals_the_largest_product() -> None:
    rng = np.random.default_rng(3)
    centroids = rng.standard_normal((37, 16)).astype(np.float32)
    rows = rng.standard_normal((500, 16)).astype(np.float32)
    found = NearestCentroid(centroids)(rows)
    assert found.dtype == np.int64
    assert np.array_equal(found, (rows @ centroids.T).argmax(axis=1))
    assert NearestCentroid(centroids)(rows[:0]).shape == (0,)


def test_kmeans_gives_unit_centroids_that_separate_clusters() -> None:
    """Three tight clusters on the sphere: three unit centroids, each near one of them."""
    rng = np.random.default_rng(4)
    centres = np.eye(8, dtype=np.float32)[:3]
    rows = np.repeat(centres, 100, axis=0) + 0.01 * rng.standard_normal((300, 8))
    found = kmeans(rows.astype(np.float32), 3, seed=0)
    assert found.shape == (3, 8)
    assert np.allclose(np.linalg.norm(found, axis=1), 1.0, atol=1e-5)
    assert sorted((found @ centres.T).argmax(axis=1).tolist()) == [0, 1, 2]
    with pytest.raises(ValueError, match="cannot fit 4 centroids on 3 rows"):
        kmeans(rows[:3].astype(np.float32), 4, seed=0)
