"""The shard actors on a Ray cluster: placed across its nodes, called one round at a time, and
their health told shard by shard.

Placement: each actor holds `num_cpus` (and `num_gpus`), and one unit of the custom resource
`node_resource` when given (`DOCSIM_SHARDS__NODE_RESOURCE`): the nodes started with it
(`ray start --resources '{"docsim_shard": 2}'`) are the ones that hold shards, as many each
as they have units, and the head holds none. `spread` asks Ray to spread the actors over the
nodes (its `SPREAD` strategy) rather than fill one node first. Ray restarts an actor whose
process or node died (`max_restarts=-1`) wherever it finds room again: the node when it
returns, or another with a free unit.

`call` is `ShardedSdr`'s way to reach them: one round on every shard at once, and a
`ShardUnavailableError` (503) when one is dead, restarting or too slow, or when the cluster
itself is cut off, never a ranking without it. `health` asks each shard on its own, for
`/ready` and `/metrics`.

The actors belong to the connection that made them. When the process loses its cluster (a
head that died: `indexer.ray_session`), `connected` turns false for good, every call is a
503, and the service places new actors once it has joined again
(`app.services.lost_shards`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from docsim.indexer.ray_session import ray_connected, ray_generation
from docsim.search.errors import ShardUnavailableError
from docsim.search.shards.actors import CALL_TIMEOUT_SECONDS, ShardActor, ShardSpec

logger = logging.getLogger(__name__)
HEALTH_TIMEOUT_SECONDS = 5.0


class ShardPlacementError(ShardUnavailableError):
    """The cluster has no room for the shard actors asked for: too few CPUs, GPUs or units of
    the shards' node resource in all, or (`busy`) too few free beside the actors that hold
    them (the serving version's shards)."""

    def __init__(self, message: str, *, busy: bool) -> None:
        super().__init__(message)
        self.busy = busy


def missing_resources(free: Mapping[str, float], need: Mapping[str, float]) -> dict[str, float]:
    """How much of each resource in `need` `free` lacks (empty: it fits)."""
    return {k: v - free.get(k, 0.0) for k, v in need.items() if free.get(k, 0.0) + 1e-9 < v}


@dataclass(frozen=True)
class ShardsHealth:
    """Each shard's answer to a ping: the node it answered from, or None (dead, restarting,
    its node lost, or slower than the check's timeout); `cut_off`: none could be asked, the
    cluster being unreachable."""

    nodes: tuple[str | None, ...]
    cut_off: bool = False

    @classmethod
    def unreachable(cls, shards: int) -> ShardsHealth:
        """None of `shards` could be asked: the cluster is cut off."""
        return cls((None,) * shards, cut_off=True)

    @property
    def missing(self) -> list[int]:
        return [i for i, node in enumerate(self.nodes) if node is None]

    @property
    def colour(self) -> str:
        """As a search cluster says it: `green`, every shard answers; `red`, one does not (a
        query would be a 503: docsim keeps no replica to answer in its place)."""
        return "red" if self.missing else "green"

    def per_node(self) -> dict[str, int]:
        """The answering shards on each node."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            if node is not None:
                counts[node] = counts.get(node, 0) + 1
        return counts

    def describe(self) -> str:
        missing = self.missing
        listed = ", ".join(map(str, missing))
        return f"{len(missing)} of {len(self.nodes)} shards do not answer (shard {listed})"


class RayShards:
    """Shard actors on Ray (a local Ray, or the cluster at `address`), restarted by Ray when
    they die; `call` is `ShardedSdr`'s."""

    def __init__(
        self,
        specs: Sequence[ShardSpec],
        *,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        node_resource: str | None = None,
        spread: bool = True,
        timeout: float = CALL_TIMEOUT_SECONDS,
        load_timeout: float | None = None,
        wait_for_room: float = 0.0,
    ) -> None:
        """Start one actor per spec once the cluster has room for all of them (waiting up to
        `wait_for_room` seconds for resources being freed), and wait until each has loaded.

        Raises:
            ShardPlacementError: no room (the actors are not started).
            ShardUnavailableError: they did not all load within `load_timeout` (default:
                `timeout`, a call's), and were killed.
        """
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        per_actor = {"CPU": num_cpus} | ({"GPU": num_gpus} if num_gpus else {})
        if node_resource:
            per_actor[node_resource] = 1.0
        need = {name: len(specs) * amount for name, amount in per_actor.items()}
        _wait_for_room(ray, need, len(specs), wait_for_room)
        strategy: Literal["SPREAD", "DEFAULT"] = "SPREAD" if spread else "DEFAULT"
        remote = ray.remote(
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            resources={node_resource: 1.0} if node_resource else {},
            scheduling_strategy=strategy,
            max_restarts=-1,
        )(ShardActor)
        self.generation = ray_generation()  # the connection the actors belong to
        self.actors = [remote.remote(spec) for spec in specs]
        self.timeout = timeout
        load_timeout = timeout if load_timeout is None else load_timeout
        try:
            ray.get(self._pings(), timeout=load_timeout)  # loaded, ready
        except (RayActorError, GetTimeoutError) as error:
            self.close()
            raise ShardUnavailableError(
                f"the shard actors did not load within {load_timeout:g} s ({type(error).__name__})"
            ) from error
        health = self.health()
        logger.info("%d shard actors placed: %s per node", len(specs), health.per_node())

    def _pings(self) -> list[Any]:
        """A ping of every actor, one object ref each (the ignore: Ray's stubs type the
        `.remote` of a `ray.method`-decorated method only)."""
        return [a.ping.remote() for a in self.actors]  # type: ignore[attr-defined]

    @property
    def connected(self) -> bool:
        """Whether the connection that made the actors still stands (false for good once
        the cluster was lost: the actors are then unreachable from here)."""
        return ray_connected(self.generation)

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        if not self.connected:  # never touch Ray then: a call could start a new local one
            raise self._cut_off()
        refs = []
        try:
            refs = [getattr(a, method).remote(*x) for a, x in zip(self.actors, args, strict=True)]
            return ray.get(refs, timeout=self.timeout)
        except (RayActorError, GetTimeoutError) as error:
            if not self.connected:
                raise self._cut_off() from error
            for ref in refs:
                with contextlib.suppress(Exception):  # cut off meanwhile: nothing to cancel
                    ray.cancel(ref, force=False)
            raise ShardUnavailableError(
                f"a shard could not answer ({type(error).__name__}); it is restarting: retry"
            ) from error
        except Exception as error:  # Ray Client's, once cut off: ConnectionError, Exception
            if isinstance(error, ConnectionError) or not self.connected:
                raise self._cut_off() from error
            raise  # a shard's own failure (RayTaskError): a bug, not an outage

    @staticmethod
    def _cut_off() -> ShardUnavailableError:
        return ShardUnavailableError(
            "the Ray cluster is unreachable (its head lost?): the shards are placed again "
            "once it is back; retry"
        )

    def health(self, timeout: float = HEALTH_TIMEOUT_SECONDS) -> ShardsHealth:
        """Each shard asked on its own where it runs, all within `timeout` seconds."""
        import ray

        if not self.connected:
            return ShardsHealth.unreachable(len(self.actors))
        try:
            refs = [a.node.remote() for a in self.actors]  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - Ray Client cut off, not yet given up
            return ShardsHealth.unreachable(len(self.actors))
        deadline = time.monotonic() + timeout
        nodes: list[str | None] = []
        for ref in refs:  # asked at once; a dead one answers at once, with its error
            try:
                nodes.append(ray.get(ref, timeout=max(deadline - time.monotonic(), 0.01)))
            except Exception:  # noqa: BLE001 - dead, restarting or late: no answer
                nodes.append(None)
                if not self.connected:  # cut off meanwhile: touch Ray no more
                    return ShardsHealth.unreachable(len(self.actors))
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=False)
        return ShardsHealth(tuple(nodes))

    def check(self, timeout: float = HEALTH_TIMEOUT_SECONDS) -> ShardsHealth:
        """Every shard answers within `timeout` seconds (readiness); their health.

        Raises:
            ShardUnavailableError: one did not, naming which.
        """
        health = self.health(timeout)
        if health.cut_off:
            raise self._cut_off()
        if health.missing:
            raise ShardUnavailableError(f"{health.describe()}: they are restarting; retry")
        return health

    def close(self) -> None:
        import ray

        if not self.connected:  # Ray was shut down or lost: the actors are out of reach
            return
        for actor in self.actors:
            try:  # the ignore: Ray types a started actor as its handle or its class
                ray.kill(actor, no_restart=True)  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - already gone, or Ray is shutting down
                logger.debug("A shard actor could not be killed", exc_info=True)


def _wait_for_room(ray: Any, need: Mapping[str, float], count: int, seconds: float) -> None:
    """Returns once the cluster has `need` free (waiting up to `seconds` for actors being
    closed).

    Raises:
        ShardPlacementError: the cluster lacks it in all, or it was not freed in time.
    """
    short = missing_resources(ray.cluster_resources(), need)
    if short:
        raise ShardPlacementError(
            f"the Ray cluster cannot hold {count} shard actors: it lacks {short} "
            "(DOCSIM_SHARDS__CPUS, __GPUS, __NODE_RESOURCE)",
            busy=False,
        )
    deadline = time.monotonic() + seconds
    while short := missing_resources(ray.available_resources(), need):
        if time.monotonic() >= deadline:
            raise ShardPlacementError(
                f"no room for {count} shard actors beside those running: {short} short",
                busy=True,
            )
        time.sleep(0.1)
