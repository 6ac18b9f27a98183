"""A real `docsim serve` process for the benchmarks that load it over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


@contextmanager
def docsim_server(
    env: dict[str, str], port: int, log_path: Path, *options: str, ready_seconds: float = 300
) -> Iterator[subprocess.Popen]:
    """`docsim serve --port PORT OPTIONS` with `env`, its output in `log_path`, once its
    /ready answers 200; stopped (terminated, then killed) on the way out."""
    docsim = str(Path(sys.executable).parent / "docsim")
    with socket.socket() as probe:  # another server there would answer /ready in its place
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            raise RuntimeError(f"port {port} is taken: another server would be measured")
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [docsim, "serve", "--port", str(port), *options],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + ready_seconds
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                while True:
                    try:
                        if client.get("/ready").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError(f"the server did not become ready (see {log_path})")
                    time.sleep(1)
            yield server
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
