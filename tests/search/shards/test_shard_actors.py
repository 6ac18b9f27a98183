"""SDR shards as Ray actors on a local Ray: the same ranking as in this process, and a shard
killed before or during a query is a `ShardUnavailableError`, never a ranking without it, until
Ray has restarted it from its spec."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from docsim.search.errors import ShardUnavailableError
from docsim.search.searcher import Searcher
from docsim.search.served.sentence_scan import ScanShape
from docsim.search.shards.actors import load_shard, shard_specs
from docsim.search.shards.coordinator import ShardedSdr, sentence_method_scores
from docsim.search.shards.cuts import shards_of
from docsim.search.shards.ray_shards import RayShards, ShardPlacementError
from docsim.search.shards.shard import SEARCHED_ON_SHARDS, in_process
from tests.search.shards.test_shards import POOL, shard_query
from tests.search.test_search import posted_query
from tests.utils.ray_local import local_ray as start_local_ray


@pytest.fixture(scope="module")
def local_ray(_postgres) -> Iterator[None]:  # noqa: ANN001
    if _postgres is not None:  # as in tests/app/test_sharded_service.py
        pytest.skip("Ray shards are tested on the SQLite pass")
    if importlib.util.find_spec("ray") is None:  # found, not imported: Ray reads its token
        pytest.skip("ray is not installed")  # at import, which `start_local_ray` sets first
    with start_local_ray():
        yield


@pytest.fixture(scope="module")
def tiebreak(searcher: Searcher) -> np.ndarray:
    return searcher.tiebreak  # the same fixed tie order


def test_a_spec_loads_the_shard_it_describes(searcher: Searcher, tiebreak: np.ndarray) -> None:
    """From the version's vectors file, memory-mapped: the same vectors as the loaded index
    (which holds them as float32, read from that file)."""
    for spec, shard in zip(
        shard_specs(searcher.index, tiebreak, 3),
        shards_of(searcher.index, tiebreak, 3),
        strict=True,
    ):
        loaded = load_shard(spec)
        assert loaded.first == shard.first and loaded.n_documents == shard.n_documents
        assert set(spec.levels) == set(loaded.units) == set(shard.units) == set(SEARCHED_ON_SHARDS)
        for level, rows in spec.levels.items():
            assert rows.file_rows.shape == (2,)  # a fresh version: one contiguous run each
            (got, got_first), (expected, expected_first) = loaded.units[level], shard.units[level]
            assert got.dtype == torch.float16 and got_first == expected_first
            assert np.array_equal(got[:].float().numpy(), expected.numpy()), level


def test_a_spec_compresses_a_cpu_shard_as_in_process(
    searcher: Searcher, tiebreak: np.ndarray
) -> None:
    """A spec with a scan shape loads a shard whose compressed rows are those `shards_of`
    makes from the same rows (the same fixed sample, basis and layout)."""
    shape = ScanShape(dimensions=16, group=0, seed=0)
    for spec, shard in zip(
        shard_specs(searcher.index, tiebreak, 3, shape),
        shards_of(searcher.index, tiebreak, 3, shape),
        strict=True,
    ):
        loaded = load_shard(spec)
        assert loaded.scan is not None and shard.scan is not None
        assert torch.equal(loaded.scan.rows, shard.scan.rows)
        assert torch.equal(loaded.scan.basis, shard.scan.basis)
        assert torch.equal(loaded.scan.group_counts, shard.scan.group_counts)
    assert all(load_shard(s).scan is None for s in shard_specs(searcher.index, tiebreak, 2))


def restarted(shards: RayShards, which: int, before: str, seconds: float = 60) -> None:
    """Wait until Ray has restarted shard `which` (a new incarnation answers)."""
    import ray

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if ray.get(shards.actors[which].ping.remote(), timeout=5) != before:
                return
        except Exception:  # noqa: BLE001, S110 - still restarting
            pass
        time.sleep(0.2)
    raise TimeoutError(f"shard {which} was not restarted in {seconds} s")


@pytest.mark.long
def test_ray_shards_rank_as_in_process_and_recover_from_a_kill(
    local_ray: None, searcher: Searcher, tiebreak: np.ndarray
) -> None:
    import ray

    query = shard_query(searcher, posted_query(searcher), "q", None)
    reference = ShardedSdr(in_process(shards_of(searcher.index, tiebreak, 2)), 2, tiebreak)
    expected, expected_stats, _ = reference.rank(query, 48, True)
    shape = ScanShape(dimensions=16, group=0, seed=0)  # compressed shards: SDR stays exact
    shards = RayShards(shard_specs(searcher.index, tiebreak, 2, shape), num_cpus=0.5, timeout=30)
    try:
        sharded = ShardedSdr(shards.call, 2, tiebreak, compressed=True)
        hits, _, scored = sharded.rank(query, 48, True)
        assert np.array_equal(hits.positions, expected.positions) and scored == 48
        np.testing.assert_allclose(hits.scores, expected.scores, rtol=0, atol=1e-6)

        # killed between a query's two rounds: the restarted shard has lost the first round,
        # so the query is refused, never ranked without that shard's documents
        before = ray.get(shards.actors[1].ping.remote())
        shards.call("moments", [(query,)] * 2)
        ray.kill(shards.actors[1], no_restart=False)
        restarted(shards, 1, before)
        with pytest.raises(ShardUnavailableError, match="no first round"):
            shards.call("top", [(query.key, expected_stats, 48)] * 2)
        # and the next query is answered in full by the restarted shard, from its spec,
        # which compresses its sentences again as before
        assert np.array_equal(sharded.rank(query, 48, True)[0].positions, expected.positions)
        options = {"ot_reg": 0.05, "ot_iterations": 50}
        reference = shards_of(searcher.index, tiebreak, 2, shape)
        np.testing.assert_array_equal(
            sharded.sentence_scores(query, "maxsim", **options),
            sentence_method_scores(in_process(reference), 2, query, "maxsim", 48, **options),
        )
        reference_sharded = ShardedSdr(in_process(reference), 2, tiebreak, compressed=True)
        np.testing.assert_array_equal(  # the compressed first pass, on the same basis
            sharded.sentence_estimates(query, "maxsim"),
            reference_sharded.sentence_estimates(query, "maxsim"),
        )
    finally:
        shards.close()


def test_a_dead_shard_is_refused(local_ray: None, searcher: Searcher, tiebreak: np.ndarray) -> None:
    """A shard Ray cannot bring back (here: killed for good) is a ShardUnavailableError."""
    import ray

    query = shard_query(searcher, posted_query(searcher), "dead", None)
    shards = RayShards(shard_specs(searcher.index, tiebreak, 2), num_cpus=0.5, timeout=30)
    ray.kill(shards.actors[0], no_restart=True)
    with pytest.raises(ShardUnavailableError, match="could not answer"):
        ShardedSdr(shards.call, 2, tiebreak).rank(query, 10, True)
    shards.close()


@pytest.mark.gpu
@pytest.mark.parametrize("pool", [None, POOL])
def test_gpu_shard_actors_rank_as_the_cpu(
    local_ray: None, searcher: Searcher, tiebreak: np.ndarray, pool: list[str] | None
) -> None:
    """Two actors sharing one GPU (half each) hold their ranges there as float16 and rank as
    the CPU shards in this process: SDR normalised and not, and the sentence-set methods."""
    import ray
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    query = shard_query(searcher, posted_query(searcher), "gpu", pool)
    reference = ShardedSdr(in_process(shards_of(searcher.index, tiebreak, 2)), 2, tiebreak)
    shards = RayShards(
        shard_specs(searcher.index, tiebreak, 2), num_cpus=0.5, num_gpus=0.5, timeout=60
    )
    try:
        assert ray.get([a.device.remote() for a in shards.actors]) == ["cuda:0", "cuda:0"]
        assert all(
            m["gpu_allocated"] > 0 for m in ray.get([a.memory.remote() for a in shards.actors])
        )
        sharded = ShardedSdr(shards.call, 2, tiebreak)
        for normalize in (True, False):
            expected, expected_stats, expected_scored = reference.rank(query, None, normalize)
            hits, stats, scored = sharded.rank(query, None, normalize)
            assert scored == expected_scored
            assert np.array_equal(hits.positions, expected.positions)
            np.testing.assert_allclose(hits.scores, expected.scores, rtol=0, atol=1e-5)
            if normalize:
                np.testing.assert_allclose(stats.mean, expected_stats.mean, atol=1e-6)
                np.testing.assert_allclose(stats.std, expected_stats.std, atol=1e-6)
        for method in ("maxsim", "best-sentence", "ot"):
            np.testing.assert_allclose(
                sharded.sentence_scores(query, method),
                reference.sentence_scores(query, method),
                rtol=0,
                atol=1e-5,
            )
    finally:
        shards.close()


def test_shards_are_placed_only_where_they_fit(
    local_ray: None, searcher: Searcher, tiebreak: np.ndarray
) -> None:
    """Actors the 2-CPU cluster can never hold are refused at once; actors it could hold but
    for those running wait (here: not at all) and are refused as `busy`, never left pending;
    once the others close, they start."""
    import ray

    specs = shard_specs(searcher.index, tiebreak, 2)
    with pytest.raises(ShardPlacementError, match="cannot hold") as never:
        RayShards(specs, num_cpus=1.5)
    assert not never.value.busy
    serving = RayShards(specs, num_cpus=0.75, wait_for_room=30)  # earlier tests' freed
    with pytest.raises(ShardPlacementError, match="beside those running") as busy:
        RayShards(specs, num_cpus=0.75)
    assert busy.value.busy
    assert ray.available_resources()["CPU"] == pytest.approx(0.5)  # nothing left pending
    serving.close()
    after = RayShards(specs, num_cpus=0.75, wait_for_room=30)
    after.close()
