"""Containers of the built image, run with buildah (there is no Docker engine here).

buildah's chroot isolation shares the caller's network: a server in a container listens on
the machine's ports, and reaches the test's PostgreSQL on the loopback address; run in a
network namespace (`netns`), it has that namespace's network instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

from tests.utils.scripts import load_script

BUILDAH = load_script("scripts/image.py", "image_script").BUILDAH  # as the build runs it


class Container:
    """A working container of `image`: the same image config (user, working directory,
    environment) for every command run in it, as a compose service's container. A `volumes`
    mount replaces what buildah would put at a path the image declares a VOLUME (a folder of
    the container's own, mounted over the bind mount)."""

    def __init__(self, image: str, volumes: Mapping[Path, str], netns: str | None = None) -> None:
        """`netns`: a network namespace its commands run in (`ip netns exec`: chroot
        isolation keeps the caller's network, so the container has that namespace's)."""
        self.volumes = dict(volumes)
        self.netns = netns
        self.name = subprocess.run(
            [*BUILDAH, "from", "--quiet", image], check=True, capture_output=True, text=True
        ).stdout.strip()
        for inside in self.volumes.values():  # the mount, not buildah's stand-in for VOLUME
            destination = inside.split(":")[0]
            subprocess.run([*BUILDAH, "config", "--volume", f"{destination}-", self.name],
                           check=True, capture_output=True)  # fmt: skip
        self.started: list[subprocess.Popen] = []

    def command(self, args: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """`buildah run`'s command line for `args` with the extra environment `env`."""
        out = ["ip", "netns", "exec", self.netns] if self.netns else []
        out += [*BUILDAH, "run", "--isolation", "chroot"]
        for host, inside in self.volumes.items():
            out += ["--volume", f"{host}:{inside}"]
        for key, value in env.items():
            out += ["--env", f"{key}={value}"]
        return [*out, self.name, "--", *args]

    def run(
        self, args: Sequence[str], env: Mapping[str, str], timeout: float = 600
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(args, env), capture_output=True, text=True, timeout=timeout
        )

    def start(self, args: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen:
        """`args` in the background (its own process group), stdout and stderr to `log`."""
        process = subprocess.Popen(
            self.command(args, env),
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started.append(process)
        return process

    def stop(self, process: subprocess.Popen, timeout: float = 90) -> int:
        """SIGTERM to the command `process` runs in the container, as `docker stop` sends it
        to a container's first process (buildah itself would SIGKILL it), and its exit code."""
        (inside,) = [  # buildah -> buildah-chroot-runtime -> buildah-chroot-exec -> the command
            child
            for child in psutil.Process(process.pid).children(recursive=True)
            if child.parent().cmdline()[:1] == ["buildah-chroot-exec"]
        ]
        inside.send_signal(signal.SIGTERM)
        return process.wait(timeout=timeout)

    def remove(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        subprocess.run([*BUILDAH, "rm", self.name], capture_output=True)
