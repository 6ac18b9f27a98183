"""Shard actors whose Ray connection is gone (a cluster's head lost: Ray Client gives up after
its grace period, and `ray.is_initialized()` turns false) answer every call with a
`ShardUnavailableError` naming the lost cluster, report every shard missing, and touch Ray no
more: closing them neither fails nor starts a Ray. The service then places new ones
(`app.services.lost_shards.LostShards`; on a real cluster in
tests/app/test_cluster_slow.py)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from docsim.search.errors import ShardUnavailableError
from docsim.search.searcher import Searcher
from docsim.search.shards.actors import shard_specs
from docsim.search.shards.coordinator import ShardedSdr
from docsim.search.shards.ray_shards import RayShards
from tests.search.shards.test_shards import shard_query
from tests.search.test_search import posted_query
from tests.utils.ray_local import local_ray


def test_shards_of_a_lost_cluster_are_refused_and_left_alone(
    searcher: Searcher,
    _postgres,  # noqa: ANN001
) -> None:
    if _postgres is not None:  # as in tests/search/shards/test_shard_actors.py
        pytest.skip("Ray shards are tested on the SQLite pass")
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed")
    tiebreak: np.ndarray = searcher.tiebreak
    query = shard_query(searcher, posted_query(searcher), "lost", None)
    with local_ray():
        import ray

        shards = RayShards(shard_specs(searcher.index, tiebreak, 2), num_cpus=0.5, timeout=30)
        sharded = ShardedSdr(shards.call, 2, tiebreak)
        assert shards.connected and shards.check().colour == "green"
        ranked = sharded.rank(query, 10, True)[0]
        assert len(ranked.positions) == 10
        ray.shutdown()  # as Ray Client leaves it once the head is given up

        assert not shards.connected
        with pytest.raises(ShardUnavailableError, match="unreachable"):
            sharded.rank(query, 10, True)
        health = shards.health()
        assert health.cut_off and health.missing == [0, 1] and health.colour == "red"
        with pytest.raises(ShardUnavailableError, match="unreachable"):
            shards.check()
        shards.close()
        assert not ray.is_initialized()  # nothing of it started a Ray again
