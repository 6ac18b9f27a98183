"""A local Ray for tests, in a short temporary folder (Ray's socket paths are limited)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def local_ray(cpus: int = 2) -> Iterator[None]:
    from docsim.indexer.ray_session import private_cluster_environment

    private_cluster_environment()  # before Ray is imported: it reads the token then
    import ray

    folder = Path(tempfile.mkdtemp(prefix="dsr"))
    ray.init(
        num_cpus=cpus,
        include_dashboard=False,
        _temp_dir=str(folder),
        configure_logging=False,
        log_to_driver=False,
    )
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
