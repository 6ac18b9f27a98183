"""`indexer.ray_session`: joining Ray leaves the process's own signal handling in place."""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

import pytest

from docsim.indexer.ray_session import connect_ray
from docsim.indexer.settings import Settings

pytestmark = pytest.mark.no_sql


def test_joining_ray_keeps_the_processes_sigterm_handler() -> None:
    """`ray.init` installs a SIGTERM handler that exits at once; a sharded api's graceful stop
    (uvicorn's handler) must survive it (found when the image's api exited 15 on SIGTERM)."""

    def graceful(signum: int, frame: FrameType | None) -> None:  # stands in for uvicorn's
        pass

    imported = sys.modules.get("ray")  # not imported here: Ray reads its token at import
    if imported is not None and imported.is_initialized():  # left running by another test
        imported.shutdown()
    previous = signal.signal(signal.SIGTERM, graceful)
    data = Path(tempfile.mkdtemp(prefix="ray-"))  # Ray's socket paths must stay short
    try:
        ray, started = connect_ray(Settings(data_dir=data))
        assert started and ray.is_initialized()
        assert signal.getsignal(signal.SIGTERM) is graceful
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(data, ignore_errors=True)
