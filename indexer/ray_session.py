"""The Ray that docsim joins: the configured cluster (`DOCSIM_RAY__ADDRESS`), or a private
local one, for the encode engine of builds and the shard actors of the service.

A process may lose its cluster: an api joined through Ray Client (`ray://head:10001`) is cut
off when the head dies, and after Ray Client's grace period (30 s) `ray.is_initialized()` is
false. `connect_ray` then joins again, and `ray_generation` tells the actors made before
(whose handles belong to the lost connection) from those made after.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from docsim.indexer.errors import RaySessionError
from docsim.indexer.settings import Settings

logger = logging.getLogger(__name__)
RAY_TEMP_MAX = 45  # characters of the temporary folder: Ray's socket paths live below it
_joining = threading.RLock()  # one `ray.init` at a time in a process (collections share Ray)
_generation = [0]  # how many times this process has joined Ray


def ray_generation() -> int:
    """How many times this process has joined Ray so far: an actor handle made under an
    earlier generation belongs to a connection that was lost."""
    return _generation[0]


def ray_connected(generation: int) -> bool:
    """Whether Ray is joined, by the connection of `generation` (the actors made then are
    reachable through it)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized() and _generation[0] == generation


def connect_ray(settings: Settings, *, data: bool = False) -> tuple[Any, bool]:
    """Ray, joined to the configured cluster (`DOCSIM_RAY__ADDRESS`) or to a private local
    one started here, and whether it was started here (the caller then shuts it down). A Ray
    already initialised in this process is used as it is; one that this process joined and
    then lost is joined again. `data`: Ray Data is needed too (the encode engine; shard
    actors are plain Ray).

    Raises:
        ConnectionError: the cluster at the address is unreachable (Ray Client tries for
            about 30 s).
        RaySessionError: Ray is not installed, or the local temporary folder is too long.
    """
    with _joining:
        return _connect(settings, data)


def _connect(settings: Settings, data: bool) -> tuple[Any, bool]:
    # Ray starts a local Ray of its own on any call made while it is not joined (a health
    # check racing a lost connection would start one inside the api); off, before Ray is
    # imported (it reads the variable then): such a call raises instead
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    imported = sys.modules.get("ray")
    if imported is not None and imported.is_initialized():
        return import_ray(data), False
    if imported is not None and _generation[0] > 0:  # joined before: shut down, or lost
        logger.info("Joining Ray again (it was shut down, or lost)")
        imported.shutdown()  # what is left of a lost connection
    if not settings.ray.address:
        local_temp_dir(settings)  # a clear error before anything starts
        private_cluster_environment()  # before Ray is imported: it reads them then
    ray = import_ray(data)
    if ray.is_initialized():
        return ray, False
    options = settings.ray
    if options.address:
        logger.info("Connecting to the Ray cluster at %s", options.address)
        _generation[0] += 1  # first: the handles of a lost connection stay out of reach
        with own_sigterm():
            ray.init(address=options.address, configure_logging=False, log_to_driver=False)
        return ray, True
    temp = local_temp_dir(settings)
    temp.mkdir(parents=True, exist_ok=True)
    logger.info("Starting a local Ray (%d CPUs) in %s", options.local_cpus, temp)
    _generation[0] += 1
    with own_sigterm():
        ray.init(
            num_cpus=options.local_cpus,
            include_dashboard=False,
            _temp_dir=str(temp),
            configure_logging=False,
            log_to_driver=False,
        )
    return ray, True


@contextmanager
def own_sigterm() -> Iterator[None]:
    """Keeps this process's SIGTERM handler through `ray.init`, which installs its own (an
    immediate `sys.exit`): a server's graceful stop (uvicorn's, the worker's) stays in force,
    and `docker stop` ends a sharded api with exit 0 instead of a traceback and 15."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread has handlers, and Ray sets none from elsewhere
        return
    handler = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, handler)


def local_temp_dir(settings: Settings) -> Path:
    temp = (settings.data_dir / "ray").resolve()
    if len(str(temp)) > RAY_TEMP_MAX:
        raise RaySessionError(
            f"Ray's temporary folder {str(temp)!r} is too long for its sockets "
            f"(at most {RAY_TEMP_MAX} characters): use a shorter data directory"
        )
    return temp


def private_cluster_environment() -> None:
    """Settings for the local Ray a build starts: no usage reporting, and token auth.

    Ray 2.60's GCS and raylet listen on every interface whatever node address is asked for
    (checked with `ss -ltn`; its `_node_ip_address` turns 127.0.0.1 into the routable
    address), so a private cluster cannot be kept on loopback. Rather than leave it open to
    the network, token authentication stays on, with a fresh random token per process, passed
    in the environment to Ray's own processes (no token file outside the data directory).
    """
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))


def import_ray(data: bool = False) -> ModuleType:
    """The `ray` module (with `ray.data` when `data`).

    Raises:
        RaySessionError: Ray is not installed.
    """
    try:
        import ray

        if data:
            import ray.data  # noqa: F401
    except ImportError as error:
        raise RaySessionError(
            "Ray is needed (--engine ray, --shards): pip install 'docsim[ray]' (or 'ray[data]')"
        ) from error
    return ray
