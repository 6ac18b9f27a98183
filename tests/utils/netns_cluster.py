"""A Ray cluster of separate nodes on this machine: each node is a network namespace of its own
(its own interface and address on a private bridge, its own loopback), Ray's head or a
worker started inside it with `ray start`, as separate machines would run them. A node is
lost by killing every process in its namespace (SIGKILL), and comes back by starting Ray in
it again. The nodes share the file system, as a cluster shares a volume of the index.

Making namespaces needs root and `ip` (iproute2); `unavailable()` says why a machine cannot.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

RAY_PORT = 6390
CLIENT_PORT = 10001
SHARD_RESOURCE = "docsim_shard"


def unavailable() -> str | None:
    """Why this machine cannot run the cluster (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's `ip`"
    probe = f"dsp{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], check=False)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Node:
    """A namespace `name` holding a Ray node at `address`; `resources`: its custom ones."""

    name: str
    address: str
    host_link: str  # its veth's end on the bridge
    cpus: int
    resources: Mapping[str, float] = field(default_factory=dict)


class NetnsCluster:
    """A head and `workers` worker nodes, each worker with `shard_units` units of
    `SHARD_RESOURCE` (the head none), and a namespace without Ray for the api (`client`),
    which joins through Ray Client (`client_address`) as the api's pod does on Kubernetes.
    Use as a context manager: everything it made is removed on exit."""

    def __init__(
        self,
        workers: int = 2,
        *,
        shard_units: int = 2,
        worker_cpus: int = 2,
        start_ray: bool = True,
    ) -> None:
        """`start_ray=False`: the namespaces and their network only (the caller runs Ray in
        them: tests/test_image.py, from the image's containers)."""
        tag = os.getpid() % 100000
        self.prefix = f"dsc{tag}"
        subnet = f"10.213.{tag % 250}"
        self.bridge = f"{self.prefix}b"
        self.gateway = f"{subnet}.1"
        # no CPU on the head, as on KubeRay (docsim-ray.yaml): work goes to the workers
        self.head = Node(f"{self.prefix}h", f"{subnet}.2", f"{self.prefix}vh", cpus=0)
        self.workers = [
            Node(
                f"{self.prefix}w{i}",
                f"{subnet}.{3 + i}",
                f"{self.prefix}v{i}",
                cpus=worker_cpus,
                resources={SHARD_RESOURCE: shard_units},
            )
            for i in range(workers)
        ]
        self.client = Node(f"{self.prefix}a", f"{subnet}.99", f"{self.prefix}va", cpus=0)
        self.temp = Path(f"/tmp/{self.prefix}")  # short: Ray's socket paths live below it
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self._bin = Path(sys.executable).parent
        self._start_ray = start_ray

    @property
    def ray_address(self) -> str:
        return f"{self.head.address}:{RAY_PORT}"

    @property
    def client_address(self) -> str:
        """Ray Client's address on the head (`ray start --head` serves it on 10001)."""
        return f"ray://{self.head.address}:{CLIENT_PORT}"

    @property
    def nodes(self) -> list[Node]:
        return [self.head, *self.workers]

    # --- the network ---------------------------------------------------------------------
    def __enter__(self) -> NetnsCluster:
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for node in [*self.nodes, self.client]:
                self._make(node)
            self.temp.mkdir(parents=True, exist_ok=True)
            if self._start_ray:
                for node in self.nodes:
                    self.start_ray(node)
                self.wait_for_nodes(len(self.nodes))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _make(self, node: Node) -> None:
        _ip("netns", "add", node.name)
        _ip(
            "link",
            "add",
            node.host_link,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            node.name,
        )
        _ip("link", "set", node.host_link, "master", self.bridge)
        _ip("link", "set", node.host_link, "up")
        inside = ("netns", "exec", node.name, "ip")
        _ip(*inside, "addr", "add", f"{node.address}/24", "dev", "eth0")
        _ip(*inside, "link", "set", "eth0", "up")
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "route", "add", "default", "via", self.gateway)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for node in [*self.nodes, self.client]:
            self.kill(node)
            subprocess.run(["ip", "netns", "del", node.name], capture_output=True, check=False)
            subprocess.run(["ip", "link", "del", node.host_link], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)
        shutil.rmtree(self.temp, ignore_errors=True)

    # --- processes -----------------------------------------------------------------------
    def popen(
        self,
        node: Node,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        **kwargs: object,
    ) -> subprocess.Popen[bytes]:
        """`argv` run inside `node`'s namespace, with the cluster's Ray token."""
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            ["ip", "netns", "exec", node.name, *argv], env={**self.env, **(env or {})}, **kwargs
        )

    def start_ray(self, node: Node) -> None:
        """Start Ray's head (the head node) or a worker joining it, and wait for `ray start`."""
        ray = str(self._bin / "ray")
        temp = self.node_temp(node)  # empty, as a restarted container's
        shutil.rmtree(temp, ignore_errors=True)
        temp.mkdir(parents=True)
        argv = [ray, "start", "--node-ip-address", node.address, "--num-cpus", str(node.cpus)]
        argv += ["--temp-dir", str(temp), "--disable-usage-stats"]
        if node is self.head:
            argv += ["--head", "--port", str(RAY_PORT), "--include-dashboard", "false"]
        else:
            argv += ["--address", self.ray_address]
        if node.resources:
            argv += ["--resources", _json(node.resources)]
        started = self.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = started.communicate(timeout=120)
        if started.returncode != 0:
            raise RuntimeError(f"ray start on {node.name} failed:\n{out.decode()[-2000:]}")

    def node_temp(self, node: Node) -> Path:
        """`node`'s own temporary folder (its sessions, sockets and logs)."""
        return self.temp / node.name.removeprefix(self.prefix)

    def link_bytes(self, nodes: Sequence[Node]) -> int:
        """The bytes the links of `nodes` have carried both ways so far."""
        total = 0
        for node in nodes:
            stats = Path("/sys/class/net") / node.host_link / "statistics"
            total += sum(int((stats / f"{way}_bytes").read_text()) for way in ("rx", "tx"))
        return total

    def alive_nodes(self) -> int:
        """How many nodes the head counts alive (`ray status`)."""
        status = self.popen(
            self.head,
            [str(self._bin / "ray"), "status", "--address", self.ray_address],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        out, _ = status.communicate(timeout=60)
        text = out.decode()
        active = text.split("Active:", 1)[-1].split("Pending:", 1)[0] if "Active:" in text else ""
        return sum(1 for line in active.splitlines() if " node_" in line)

    def wait_for_nodes(self, count: int, seconds: float = 120) -> None:
        """Returns once the head counts `count` nodes alive."""
        deadline = time.monotonic() + seconds
        while (alive := self.alive_nodes()) != count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{alive} of {count} Ray nodes alive after {seconds:g} s")
            time.sleep(1)

    def pids(self, node: Node) -> list[int]:
        """The processes running in `node`'s namespace."""
        listed = subprocess.run(
            ["ip", "netns", "pids", node.name], capture_output=True, text=True, check=False
        )
        return [int(p) for p in listed.stdout.split()]

    def kill(self, node: Node) -> int:
        """SIGKILL every process in `node`'s namespace (the node is lost); how many."""
        pids = self.pids(node)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        return len(pids)


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, killed and not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _json(values: Mapping[str, float]) -> str:
    import json

    return json.dumps(dict(values))
