"""The container image, built from the project's Dockerfile and run as the compose files run it.

There is no Docker engine here: `scripts/image.py` builds the Dockerfile with buildah, from a
Debian base bootstrapped from Debian's packages and with this machine's pip configuration as
build arguments. Each compose service then runs in a container of its own made from the image
(`tests/utils/containers.py`), with the compose file's command, environment and volumes: the
data volume is a folder of this machine owned by the image's user, as a fresh named volume
is; PostgreSQL is a throwaway server of this machine (what `postgres` is in compose), reached
over the loopback address (buildah's chroot isolation shares the machine's network).

`make test-image` runs this file (also part of `make test-slow`); with `DOCSIM_IMAGE_REPORT`
set, the build's time and size and each command's result are written there as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.utils.containers import Container
from tests.utils.netns_cluster import NetnsCluster
from tests.utils.postgres import PostgresServer, free_port, running_server
from tests.utils.scripts import load_script
from tests.utils.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.image]

ROOT = Path(__file__).resolve().parents[1]
IMAGE = load_script("scripts/image.py", "image_script")
build_image, machine_pip, remove_images = IMAGE.build_image, IMAGE.machine_pip, IMAGE.remove_images

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
SHARDED = yaml.safe_load((ROOT / "docker-compose.sharded.yml").read_text())["services"]
TAG = "localhost/docsim:image-test"
KEY = "image-test-key"
DEPENDS = ("buildah", "debootstrap")


@pytest.fixture(scope="module")
def report() -> Iterator[dict]:
    done: dict = {"commands": []}
    yield done
    path = os.environ.get("DOCSIM_IMAGE_REPORT")
    if path:
        Path(path).write_text(json.dumps(done, indent=2) + "\n")


@pytest.fixture(scope="module")
def image(report: dict) -> Iterator[str]:
    missing = [tool for tool in DEPENDS if shutil.which(tool) is None]
    assert not missing, f"apt-get install {' '.join(missing)} (make test-image does)"
    assert os.geteuid() == 0, "buildah's chroot isolation and debootstrap need root"
    report["build"] = build_image(TAG)
    yield TAG
    remove_images(TAG, f"{TAG}-ray")


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_server() as server:
        yield server


def volume(path: Path) -> Path:
    """A data volume as a fresh named volume is: empty, owned by the image's user."""
    path.mkdir(parents=True)
    shutil.chown(path, 10001, 10001)
    return path


def compose_env(service: dict, database_url: str) -> dict[str, str]:
    """`service`'s compose environment, the database being the throwaway server."""
    env = {k: str(v) for k, v in service["environment"].items() if not str(v).startswith("${")}
    return env | {"DOCSIM_DB__URL": database_url, "DOCSIM_API__API_KEY": KEY}


def on_port(command: list[str], port: int) -> list[str]:
    """A compose command with its port 8000 replaced by `port` (the network is the machine's)."""
    return [str(port) if a == "8000" else a.replace(":8000", f":{port}") for a in command]


def run(report: dict, container: Container, command: list[str], env: dict) -> str:
    """`command` in `container`, recorded in the report; fails the test on a non-zero exit."""
    started = time.perf_counter()
    done = container.run(command, env)
    seconds = round(time.perf_counter() - started, 1)
    report["commands"].append({"command": command, "exit": done.returncode, "seconds": seconds})
    assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
    return done.stdout


def stop(report: dict, name: str, container: Container, process: subprocess.Popen) -> None:
    """SIGTERM to a service, as `docker compose stop` sends it; it must exit 0."""
    code = container.stop(process)
    report["commands"].append({"service": name, "stopped_by": "SIGTERM", "exit": code})
    assert code == 0, f"{name} exited {code} on SIGTERM"


def test_the_image_runs_as_its_unprivileged_user(image: str, tmp_path: Path) -> None:
    data = volume(tmp_path / "data")
    container = Container(image, {data: "/data"})
    try:
        shown = container.run(["sh", "-c", "id -un; pwd; touch /data/written"], {})
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.split() == ["docsim", "/app"]
        assert (data / "written").stat().st_uid == 10001
        config = subprocess.run(
            ["buildah", "--storage-driver", "vfs", "inspect", "--type", "image", image],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        oci = json.loads(config.stdout)["OCIv1"]["config"]
        assert oci["User"] == "docsim" and oci["Cmd"] == ["docsim", "serve"]
        assert set(oci["Volumes"]) == {"/data"} and set(oci["ExposedPorts"]) == {"8000/tcp"}
    finally:
        container.remove()


def test_the_compose_services_run_from_the_image(
    image: str, postgres: PostgresServer, sample_corpus: Path, tmp_path: Path, report: dict
) -> None:
    """migrate, the documented `docsim index`, api (until its health check passes, then
    searched), worker (taking a reindex job posted to the api), each in its own container."""
    database = postgres.database()
    data = volume(tmp_path / "data")
    corpora = tmp_path / "corpora"
    (corpora / "sample").mkdir(parents=True)
    for path in sorted(sample_corpus.glob("*.md"))[:12]:
        shutil.copy(path, corpora / "sample" / path.name)
    mounts = {data: "/data", corpora: "/corpora:ro"}
    # `docker compose run --rm worker docsim index`: a one-off in the worker's container
    containers = {name: Container(image, mounts) for name in ("migrate", "api", "worker")}
    port = free_port()
    try:
        run(report, containers["migrate"], SERVICES["migrate"]["command"],
            compose_env(SERVICES["migrate"], database))  # fmt: skip
        seeded = run(report, containers["worker"], ["docsim", "index", "--no-progress"],
                     compose_env(SERVICES["worker"], database))  # fmt: skip
        assert json.loads(seeded[seeded.index("{\n") :])["counts"]["document"] == 48
        logs = tmp_path / "logs"
        logs.mkdir()
        api = containers["api"].start(
            on_port(SERVICES["api"]["command"], port),
            compose_env(SERVICES["api"], database),
            logs / "api.log",
        )
        health = on_port(SERVICES["api"]["healthcheck"]["test"][1:], port)  # after "CMD"
        until(lambda: containers["api"].run(health, {}).returncode == 0, seconds=240, every=2)
        report["commands"].append({"service": "api", "healthcheck": "passed"})
        _search(f"http://127.0.0.1:{port}", report)

        worker = containers["worker"].start(
            SERVICES["worker"]["command"],
            compose_env(SERVICES["worker"], database),
            logs / "worker.log",
        )
        _reindex(f"http://127.0.0.1:{port}", report)
        stop(report, "api", containers["api"], api)
        stop(report, "worker", containers["worker"], worker)
    finally:
        for container in containers.values():
            container.remove()


def _search(base: str, report: dict) -> None:
    """POST /similar, GET /explain (as data and as a PNG: matplotlib in the image) and GET
    /metrics against the served sample corpus."""
    headers = {"X-API-Key": KEY}
    similar = httpx.post(
        f"{base}/similar",
        json={"document": {"text": "A court weighed the evidence of the witnesses."}, "top_k": 3},
        headers=headers,
        timeout=120,
    )
    assert similar.status_code == 200, similar.text
    found = similar.json()
    assert len(found["results"]) == 3
    pair = {"source": found["query_id"], "target": found["results"][0]["document_id"]}
    explained = {
        form: httpx.get(
            f"{base}/explain", params=pair | {"format": form}, headers=headers, timeout=120
        )
        for form in ("json", "png")
    }
    assert explained["json"].status_code == 200, explained["json"].text
    assert explained["json"].json()["alignments"]
    assert explained["png"].content.startswith(b"\x89PNG"), explained["png"].text
    metrics = httpx.get(f"{base}/metrics", headers=headers, timeout=30)
    assert metrics.status_code == 200 and "docsim_" in metrics.text
    report["commands"] += [
        {"request": "POST /similar", "status": similar.status_code, "results": 3},
        {"request": "GET /explain", "status": explained["json"].status_code},
        {"request": "GET /explain?format=png", "status": explained["png"].status_code},
        {"request": "GET /metrics", "status": metrics.status_code},
    ]


def _reindex(base: str, report: dict) -> None:
    """A reindex job of /corpora/sample, taken by the worker; the api swaps to its version."""
    headers = {"X-API-Key": KEY}
    posted = httpx.post(f"{base}/jobs/reindex", json={"source": "/corpora/sample"}, headers=headers)
    assert posted.status_code == 202, posted.text
    job_url = f"{base}/jobs/{posted.json()['job_id']}"

    def finished() -> bool:
        return httpx.get(job_url, headers=headers).json()["status"] in {"succeeded", "failed"}

    until(finished, seconds=300, every=1)
    job = httpx.get(job_url, headers=headers).json()
    assert job["status"] == "succeeded", job
    until(lambda: httpx.get(f"{base}/ready").json().get("index_version") == 2, seconds=60)
    assert httpx.get(f"{base}/ready").json()["documents"] == 12
    report["commands"].append({"request": "POST /jobs/reindex", "job": job["status"]})


def test_the_sharded_services_run_from_the_ray_image(
    postgres: PostgresServer, sample_corpus: Path, tmp_path: Path, report: dict
) -> None:
    """docker-compose.sharded.yml on separate networks: a Ray head (until its health check
    passes) and a Ray worker node from the image built with `EXTRAS=ray`, each in a network
    namespace of its own (`NetnsCluster`'s, without Ray of this machine: chroot isolation
    gives a container the namespace it is run in), and the api, on this machine's network,
    placing its shards on the worker across the bridge (the shards' resource only it offers)."""
    report["build_ray"] = build_image(f"{TAG}-ray", extras="ray")
    database = postgres.database()
    data = volume(tmp_path / "data")
    port = free_port()
    ray_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "image-test-token-0123456789abcdef",
               "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    logs = tmp_path / "logs"
    logs.mkdir()
    with NetnsCluster(workers=1, start_ray=False) as network:
        nodes = {"ray-head": network.head.name, "ray-worker": network.workers[0].name}
        containers = {name: Container(f"{TAG}-ray", {data: "/data"}, netns) for name, netns in
                      [*nodes.items(), ("api", None)]}  # fmt: skip

        def on_head(command: list[str]) -> list[str]:
            """The service name `ray-head` made the head namespace's address."""
            return [a.replace("ray-head:", f"{network.head.address}:") for a in command]

        try:
            started = [
                containers[name].start(on_head(SHARDED[name]["command"]), ray_env, logs / name)
                for name in nodes
            ]
            health = on_head(SHARDED["ray-head"]["healthcheck"]["test"][1:])
            until(lambda: containers["ray-head"].run(health, ray_env).returncode == 0, 120, 2)
            report["commands"].append({"service": "ray-head", "healthcheck": "passed"})
            serve_on_the_cluster(
                report, containers["api"], database, on_head, ray_env, port, logs / "api"
            )
            assert "on 2 shard actors" in (logs / "api").read_text()
            shards = httpx.get(f"http://127.0.0.1:{port}/ready").json()["shards"]
            assert shards["nodes"] == {network.workers[0].address: 2}, shards
            stop(report, "api", containers["api"], containers["api"].started[-1])
            for name, node in zip(reversed(nodes), reversed(started), strict=True):
                report["commands"].append({"service": name, "exit": containers[name].stop(node)})
        finally:
            for container in containers.values():
                container.remove()


def serve_on_the_cluster(
    report: dict,
    api: Container,
    database: str,
    on_head: Any,
    ray_env: dict,
    port: int,
    log: Path,
) -> None:
    """Migrate, index the sample corpus, and start the sharded api (its output in `log`);
    `POST /similar` must be answered from the shards."""
    run(report, api, SERVICES["migrate"]["command"], compose_env(SERVICES["migrate"], database))
    run(report, api, ["docsim", "index", "--no-progress"],
        compose_env(SERVICES["worker"], database))  # fmt: skip
    sharded = {k: v for k, v in SHARDED["api"]["environment"].items() if "${" not in v}
    env = compose_env(SERVICES["api"], database) | sharded | ray_env
    env |= {"DOCSIM_SHARDS__COUNT": "2", "DOCSIM_SHARDS__CPUS": "1"}
    env["DOCSIM_RAY__ADDRESS"] = on_head([env["DOCSIM_RAY__ADDRESS"]])[0]
    api.start(on_port(SERVICES["api"]["command"], port), env, log)
    probe = on_port(SERVICES["api"]["healthcheck"]["test"][1:], port)
    until(lambda: api.run(probe, {}).returncode == 0, seconds=300, every=2)
    base = f"http://127.0.0.1:{port}"
    until(lambda: httpx.get(f"{base}/ready").status_code == 200, seconds=300, every=2)
    similar = httpx.post(
        f"{base}/similar",
        json={"document": {"text": "The appeal against the conviction."}, "top_k": 5},
        headers={"X-API-Key": KEY},
        timeout=120,
    )
    assert similar.status_code == 200 and len(similar.json()["results"]) == 5, similar.text
    report["commands"].append({"request": "POST /similar (2 shards)", "status": 200})


# The gpu variant's two pip commands (Dockerfile, stage `build`), resolved without installing
GPU_INSTALLS = ('pip install "torch==${TORCH_VERSION}";', "extra=gpu")
SOURCES = "pyproject.toml README.md app indexer models search migrations docsim"


def test_the_gpu_variants_packages_resolve(image: str, report: dict) -> None:
    """What the gpu variant installs resolves against the package indexes: PyPI's CUDA torch
    and faiss-gpu-cu12 with their CUDA libraries (a dry run: there is no GPU or CUDA here).
    This machine's wheel folder is left out: its `torch-2.13.0+cpu` also satisfies
    `torch==2.13.0` and, a local version, would win."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert all(command in dockerfile for command in GPU_INSTALLS)
    pip = machine_pip()
    build_args = {k: v for k, v in pip.build_args.items() if k != "PIP_FIND_LINKS"}
    mounts = {path: f"{path}:ro" for path in pip.mounts} | {ROOT: "/src:ro"}
    container = Container(image, mounts)
    try:
        resolve = (
            f"mkdir /tmp/src && cd /src && cp -r {SOURCES} /tmp/src && cd /tmp/src && "
            'pip install --dry-run --ignore-installed --quiet --report /tmp/gpu.json ".[gpu]" '
            '"torch==2.13.0" && cat /tmp/gpu.json'
        )
        done = container.run(["sh", "-c", resolve], build_args, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        container.remove()
    installs = json.loads(done.stdout)["install"]
    versions = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}
    assert versions["torch"] == "2.13.0"  # not "+cpu"
    assert "faiss-gpu-cu12" in versions and "faiss-cpu" not in versions
    cuda = sorted(name for name in versions if name.startswith("nvidia-"))
    assert cuda, versions
    report["gpu_resolved"] = {"torch": versions["torch"], "faiss-gpu-cu12":
                              versions["faiss-gpu-cu12"], "cuda_packages": cuda}  # fmt: skip
