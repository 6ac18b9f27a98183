"""The service on a Ray cluster of separate nodes (`tests.utils.netns_cluster`: a head and two
worker nodes, each in its own network namespace): the api runs in a namespace of its own and
joins through Ray Client (`ray://head:10001`, as its Kubernetes pod does), its shards are
placed on the worker nodes only (two each, by `DOCSIM_SHARDS__NODE_RESOURCE`),
and its answers equal the service's in one process. Then a worker node is killed while 8
clients query: every answer is the exact ranking or a 503 with `Retry-After`, `/ready` and
`/metrics` name the missing shards, and once the node is back every answer is exact again.
Then the head itself is killed and started again: the api answers 503 while it is cut off,
joins the new cluster and places its shards again, and every answer is exact again.

Set `DOCSIM_CLUSTER_REPORT` to a file to keep the run's figures (JSON): the nodes, the shards
per node, the answers compared, the answers during each loss by status, the times to recover.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.search.settings import SearchSettings
from tests.app.test_sharded_service import QUERY, assert_same
from tests.utils.netns_cluster import SHARD_RESOURCE, NetnsCluster, unavailable
from tests.utils.postgres import free_port
from tests.utils.querying_clients import QueryingClients, ranking

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed"),
]
logger = logging.getLogger(__name__)
SHARDS = 4
CLIENTS = 8
METHODS = ["sdr", "maxsim", "best-sentence", "ot", "fused"]
QUERIES: list[dict[str, Any]] = [
    {"document": QUERY},
    {"document_id": "baking-01"},
    {"document_id": "astronomy-02"},
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[NetnsCluster]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    with NetnsCluster(workers=2, shard_units=2) as made:
        yield made


@pytest.fixture()
def served(
    cluster: NetnsCluster,
    fresh_settings,
    _postgres,  # noqa: ANN001
) -> Iterator[tuple[TestClient, str]]:
    """The sample corpus's version served in this process, and by an api on the cluster's
    head (its URL), its shards on the worker nodes."""
    if _postgres is not None:
        pytest.skip("the cluster is tested on the SQLite pass")
    settings: ServiceSettings = fresh_settings(embedded_worker=False)
    # exact sentences on both sides, as tests/app/test_sharded_service.py compares them
    settings = settings.model_copy(update={"search": SearchSettings(sentence_store="float32")})
    port = free_port()
    env = {
        "DOCSIM_DATA_DIR": str(settings.data_dir),
        "DOCSIM_SEARCH__SENTENCE_STORE": "float32",
        "DOCSIM_JOBS__EMBEDDED_WORKER": "false",
        "DOCSIM_RAY__ADDRESS": cluster.client_address,
        "DOCSIM_SHARDS__COUNT": str(SHARDS),
        "DOCSIM_SHARDS__CPUS": "0.5",
        "DOCSIM_SHARDS__NODE_RESOURCE": SHARD_RESOURCE,
        "DOCSIM_SHARDS__CALL_TIMEOUT_SECONDS": "10",
        "DOCSIM_API__HOST": cluster.client.address,
        "DOCSIM_API__PORT": str(port),
    }
    log = settings.data_dir / "api.log"
    with log.open("wb") as out:
        docsim = str(Path(sys.executable).parent / "docsim")
        api = cluster.popen(cluster.client, [docsim, "serve"], env, stdout=out, stderr=out)
    url = f"http://{cluster.client.address}:{port}"
    try:
        _wait_ready(url, api, log)
        with TestClient(create_app(settings)) as local:
            yield local, url
    finally:
        api.terminate()
        try:
            api.wait(30)
        except subprocess.TimeoutExpired:
            api.kill()
            api.wait(10)


def _wait_ready(url: str, api: subprocess.Popen[bytes], log: Path, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if api.poll() is not None:
            raise RuntimeError(f"the api exited:\n{_log_tail(log)}")
        try:
            if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the api was not ready in {seconds:g} s:\n{_log_tail(log)}")


def _log_tail(log: Path) -> str:
    """The api's log without its access lines, last 4,000 characters."""
    lines = log.read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if "uvicorn.access" not in line)[-4000:]


def test_a_cluster_answers_as_one_process_and_survives_losing_a_node(
    cluster: NetnsCluster, served: tuple[TestClient, str]
) -> None:
    local, url = served
    report: dict[str, Any] = {"nodes": [n.address for n in cluster.nodes], "shards": SHARDS}
    with httpx.Client(base_url=url, timeout=60) as http:
        ready = http.get("/ready").json()["shards"]
        report["shards_per_node"] = ready["nodes"]
        workers = {w.address for w in cluster.workers}
        assert ready["health"] == "green" and set(ready["nodes"]) == workers, ready
        assert all(count == 2 for count in ready["nodes"].values()), ready
        expected = {}
        for method in METHODS:
            for i, query in enumerate(QUERIES):
                body = {"top_k": 48, "method": method, **query}
                remote = http.post("/similar", json=body)
                assert remote.status_code == 200, remote.text
                mine = local.post("/similar", json=body)
                assert_same(ranking(mine.json()), ranking(remote.json()))
                expected[(method, i)] = ranking(mine.json())
        report["answers_compared"] = len(expected)
        report["per_query"] = traffic_and_latency(cluster, http, local)
        report["loss"] = lose_a_node(cluster, http, url, expected)
        report["head_restart"] = restart_the_head(cluster, http, url, expected)
        assert http.post("/similar", json={"method": "fused", **QUERIES[0]}).status_code == 200
    logger.info("cluster run: %s", report)
    path = os.environ.get("DOCSIM_CLUSTER_REPORT")
    if path:
        Path(path).write_text(json.dumps(report, indent=1) + "\n")


def traffic_and_latency(
    cluster: NetnsCluster, http: httpx.Client, local: TestClient, rounds: int = 20
) -> dict[str, float]:
    """One `sdr` query, `rounds` times, on the cluster and in one process: the median latency
    of each, and the bytes the worker nodes' links carried per query (to and from the
    shards, with Ray's own traffic in the same time)."""
    body = {"top_k": 10, "method": "sdr", **QUERIES[1]}

    def median_seconds(post: Any) -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            assert post("/similar", json=body).status_code == 200
            times.append(time.perf_counter() - started)
        return sorted(times)[len(times) // 2]

    one_process = median_seconds(local.post)
    before = cluster.link_bytes(cluster.workers)
    on_cluster = median_seconds(http.post)
    carried = cluster.link_bytes(cluster.workers) - before
    return {
        "median_ms_one_process": round(one_process * 1000, 1),
        "median_ms_cluster": round(on_cluster * 1000, 1),
        "cluster_over_one_process": round(on_cluster / one_process, 2),
        "worker_link_bytes_per_query": round(carried / rounds),
    }


def lose_a_node(
    cluster: NetnsCluster,
    http: httpx.Client,
    url: str,
    expected: dict[tuple[str, int], list[tuple[str, float]]],
) -> dict[str, Any]:
    """Kill a worker node under 8 querying clients, start it again, and check every answer;
    the figures of the run."""
    with QueryingClients(url, expected, QUERIES, assert_same, CLIENTS) as clients:
        time.sleep(3)
        lost = cluster.workers[0]
        killed_at = time.monotonic()
        killed = cluster.kill(lost)
        clients.phase = "lost"  # from the moment its processes are gone
        not_ready = _wait_for(lambda: http.get("/ready"), lambda r: r.status_code == 503, 60)
        assert "2 of 4 shards do not answer" in not_ready.json()["detail"], not_ready.text
        missing = _missing_shards(http)
        assert missing == 2, missing
        time.sleep(5)
        back_at = time.monotonic()
        cluster.start_ray(lost)
        green = _wait_for(lambda: http.get("/ready"), lambda r: r.status_code == 200, 180)
        recovery = time.monotonic() - back_at
        clients.phase = "recovered"
        time.sleep(3)
    return {
        "killed_node": lost.address,
        "processes_killed": killed,
        "missing_shards_on_metrics": missing,
        **clients.figures(),
        "seconds_from_restart_to_green": round(recovery, 1),
        "seconds_from_kill_to_green": round(time.monotonic() - killed_at, 1),
        "shards_per_node_after": green.json()["shards"]["nodes"],
    }


def restart_the_head(
    cluster: NetnsCluster,
    http: httpx.Client,
    url: str,
    expected: dict[tuple[str, int], list[tuple[str, float]]],
) -> dict[str, Any]:
    """Kill the head under 8 querying clients, then start it again and the workers after it
    (Ray without GCS fault tolerance lets no worker join a new head: their supervisors, here
    the test, start them again, as KubeRay restarts pods); the api joins the new cluster and
    places its shards again. The figures of the run."""
    with QueryingClients(url, expected, QUERIES, assert_same, CLIENTS) as clients:
        time.sleep(3)
        killed_at = time.monotonic()
        killed = cluster.kill(cluster.head)
        clients.phase = "lost"
        # Ray Client gives the lost head 30 s before the api knows it is cut off
        cut_off = _wait_for(
            lambda: http.get("/ready", timeout=120),
            lambda r: r.status_code == 503 and "unreachable" in r.text,
            120,
        )
        missing = _missing_shards(http)
        back_at = time.monotonic()
        cluster.start_ray(cluster.head)
        for worker in cluster.workers:
            cluster.kill(worker)
            cluster.start_ray(worker)
        cluster.wait_for_nodes(len(cluster.nodes))
        green = _wait_for(
            lambda: http.get("/ready", timeout=120), lambda r: r.status_code == 200, 300
        )
        recovery = time.monotonic() - back_at
        clients.phase = "recovered"
        time.sleep(3)
    return {
        "processes_killed": killed,
        "ready_while_lost": cut_off.json()["detail"],
        "missing_shards_on_metrics": missing,
        **clients.figures(),
        "seconds_from_restart_to_green": round(recovery, 1),
        "seconds_from_kill_to_green": round(time.monotonic() - killed_at, 1),
        "shards_per_node_after": green.json()["shards"]["nodes"],
    }


def _missing_shards(http: httpx.Client) -> float:
    """`/metrics`' count of the default collection's missing shards."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "docsim_shards" and sample.labels.get("state") == "missing":
                return sample.value
    raise AssertionError("/metrics has no docsim_shards")


def _wait_for(ask: Any, done: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        answer = ask()
        if done(answer):
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:g} s: {answer.status_code} {answer.text}")
        time.sleep(0.5)


def test_a_build_on_the_cluster_encodes_on_its_workers_as_one_process_does(
    cluster: NetnsCluster,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    _postgres,  # noqa: ANN001
) -> None:
    """`docsim index --engine ray` run on a Ray node (Ray Data needs a raylet beside its
    driver: through Ray Client it is refused), here the head's, as a `docsim worker` pod
    that starts a raylet without CPUs first: Ray Data's encode actors hold a CPU each, and
    only the workers have CPUs (the head has none, as on KubeRay), so they encode on the
    worker nodes; the version equals the one a build in one process makes, level by level
    (same ids, vectors to 1e-5), and its vectors crossed the workers' links."""
    if _postgres is not None:
        pytest.skip("the cluster is tested on the SQLite pass")
    assert cluster.head.cpus == 0 and all(w.cpus > 0 for w in cluster.workers)
    docsim = str(Path(sys.executable).parent / "docsim")
    common = [str(sample_corpus), "--encoder", str(tiny_encoder_dir), "--backend", "torch"]
    common += ["--no-progress"]
    started = time.monotonic()
    alone = subprocess.run(
        [docsim, "index", *common, "--data-dir", str(tmp_path / "alone")],
        capture_output=True,
        text=True,
    )
    assert alone.returncode == 0, alone.stderr[-3000:]
    env = {"DOCSIM_RAY__ADDRESS": cluster.ray_address, "DOCSIM_RAY__ACTORS": "2"}
    argv = [docsim, "index", *common, "--engine", "ray", "--data-dir", str(tmp_path / "ray")]
    alone_seconds = time.monotonic() - started
    before, started = cluster.link_bytes(cluster.workers), time.monotonic()
    spread = cluster.popen(
        cluster.head, argv, env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, _ = spread.communicate(timeout=600)
    assert spread.returncode == 0, out.decode()[-3000:]
    assert "on Ray with 2 actor(s)" in out.decode()
    carried = cluster.link_bytes(cluster.workers) - before
    spread_seconds = time.monotonic() - started
    local, distributed = (_loaded(tmp_path / name) for name in ("alone", "ray"))
    assert distributed.external_ids == local.external_ids
    for level in ("document", "section", "paragraph", "sentence", "chunk"):
        np.testing.assert_array_equal(distributed.ids[level], local.ids[level])
        np.testing.assert_allclose(
            distributed.vectors[level].numpy(), local.vectors[level].numpy(), atol=1e-5
        )
    # at least the sentence vectors came back over the workers' links (as float16, at least)
    assert carried > local.vectors["sentence"].numel() * 2, carried
    figures = {
        "seconds_one_process": round(alone_seconds, 1),
        "seconds_on_the_cluster": round(spread_seconds, 1),
        "worker_link_bytes": carried,
        "levels_equal": 5,
    }
    logger.info("build on the cluster: %s", figures)
    path = os.environ.get("DOCSIM_CLUSTER_REPORT")
    if path and Path(path).exists():  # beside the serving test's figures
        report = json.loads(Path(path).read_text())
        Path(path).write_text(json.dumps(report | {"build": figures}, indent=1) + "\n")


def _loaded(data_dir: Path) -> Any:
    from docsim.indexer.store.db import make_engine
    from docsim.indexer.store.versions import active_version
    from docsim.search.served.loaded_index import LoadedIndex
    from docsim.search.settings import QuerySettings

    engine = make_engine(QuerySettings(data_dir=data_dir).database_url)
    try:
        return LoadedIndex.load(engine, active_version(engine))
    finally:
        engine.dispose()
