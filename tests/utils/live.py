"""A real docsim server on a loopback port, in a thread of the test process (uvicorn), for
tests that need many concurrent clients over real HTTP connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from tests.utils.postgres import free_port


@contextmanager
def live_server(settings: ServiceSettings, ready_within: float = 60.0) -> Iterator[str]:
    """Serve `settings` until the block ends; yields the base URL once `/ready` says ready."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_config=None, access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="docsim-live-server", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_within
        while True:
            try:
                if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the live server did not become ready")
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(60)
