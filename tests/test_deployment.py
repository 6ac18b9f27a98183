"""The Docker deployment, checked without a Docker engine (there is none on these machines).

The compose files are parsed and their wiring checked (services, start order, health checks,
the shared data volume, the GPU override), every `COPY` source of the Dockerfile must exist,
and then the compose services' own commands run here, as separate processes on the run's
database (SQLite, or PostgreSQL with `--db postgresql`): `migrate`, the documented
`docker compose run worker docsim index`, `api` until its health check passes, and `worker`,
which must take a reindex job posted to the api; the api then swaps to the new version.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import inspect

from docsim.indexer.store.db import make_engine
from docsim.search.settings import QuerySettings
from tests.utils.postgres import free_port
from tests.utils.waiting import until

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
GPU = yaml.safe_load((ROOT / "docker-compose.gpu.yml").read_text())
SHARDED = yaml.safe_load((ROOT / "docker-compose.sharded.yml").read_text())
SERVICES = COMPOSE["services"]
KEY = "compose-test-key"


def test_compose_names_and_orders_the_services() -> None:
    assert set(SERVICES) == {"postgres", "migrate", "api", "worker"}
    assert SERVICES["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in ("api", "worker"):
        assert SERVICES[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"}
        }
        env = SERVICES[name]["environment"]
        assert env["DOCSIM_DB__URL"].startswith("postgresql+psycopg://docsim:")
        assert env["DOCSIM_DB__URL"].endswith("@postgres:5432/docsim")
        assert env["DOCSIM_DB__AUTO_MIGRATE"] == "false"  # only `migrate` migrates
        assert "docsim-data:/data" in SERVICES[name]["volumes"]  # one data volume, shared
        assert env["DOCSIM_DATA_DIR"] == "/data"
    assert SERVICES["api"]["environment"]["DOCSIM_JOBS__EMBEDDED_WORKER"] == "false"
    assert SERVICES["migrate"]["command"] == ["alembic", "upgrade", "head"]
    assert SERVICES["migrate"]["restart"] == "no"
    assert "pg_isready" in SERVICES["postgres"]["healthcheck"]["test"]
    assert "/health" in " ".join(SERVICES["api"]["healthcheck"]["test"])
    assert set(COMPOSE["volumes"]) == {"docsim-data", "postgres-data"}


def test_the_gpu_override_builds_the_cuda_image_and_reserves_gpus() -> None:
    overrides = GPU["services"]
    assert set(overrides) <= set(SERVICES)
    for name in ("migrate", "api", "worker"):
        assert overrides[name]["image"].endswith("-gpu")
        assert overrides[name]["build"]["args"]["VARIANT"] == "gpu"
    for name in ("api", "worker"):
        (device,) = overrides[name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]


def test_the_sharded_override_places_shards_on_a_ray_cluster() -> None:
    """The api serves on shard actors of a Ray head and workers; every node mounts the data
    volume (a shard maps its range of the version's files) and shares the auth token."""
    services = SHARDED["services"]
    assert {"ray-head", "ray-worker"} <= set(services)
    for name in ("migrate", "api", "worker", "ray-head", "ray-worker"):
        assert services[name]["build"]["args"]["EXTRAS"] == "ray"
    api = services["api"]["environment"]
    # the api is no Ray node: it joins through Ray Client, which the head serves
    assert api["DOCSIM_RAY__ADDRESS"] == "ray://ray-head:10001"
    assert "--ray-client-server-port=10001" in services["ray-head"]["command"]
    assert api["DOCSIM_SHARDS__COUNT"].startswith("${DOCSIM_SHARDS")
    assert services["ray-head"]["command"][:3] == ["ray", "start", "--head"]
    assert "--address=ray-head:6379" in services["ray-worker"]["command"]
    for name in ("api", "ray-head", "ray-worker"):
        env = services[name]["environment"]
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"].startswith(
            "${RAY_AUTH_TOKEN"
        )
    for name in ("ray-head", "ray-worker"):
        assert "docsim-data:/data" in services[name]["volumes"]
    assert "EXTRAS:+,$EXTRAS" in (ROOT / "Dockerfile").read_text()


def test_the_dockerfile_copies_what_exists_and_runs_docsim() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "ARG VARIANT=cpu" in text
    # the CPU variant's torch comes from PyTorch's CPU index unless the build says otherwise
    assert "ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu" in text
    assert '${TORCH_CPU_INDEX:+--index-url "$TORCH_CPU_INDEX"}' in text
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in text
    for line in text.splitlines():
        if line.startswith("COPY") and "--from" not in line:
            *sources, _ = line.split()[1:]
            for source in sources:
                assert (ROOT / source).exists(), f"Dockerfile copies missing {source}"
    cmd = re.search(r"^CMD (.+)$", text, re.M)
    assert cmd is not None and json.loads(cmd.group(1)) == ["docsim", "serve"]
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


# --- the services' commands, run here ---------------------------------------------------------
def _environment(tmp_path: Path, tiny_encoder_dir: Path, port: int) -> dict[str, str]:
    """The compose environment of api/worker with this machine's paths and database."""
    env = dict(os.environ)
    compose_env = {
        k: v for k, v in SERVICES["api"]["environment"].items() if not v.startswith("${")
    }
    del compose_env["DOCSIM_DB__URL"]
    env.update(compose_env)
    data = tmp_path / "data"
    env.update(
        {
            "DOCSIM_DATA_DIR": str(data),
            "DOCSIM_DB__URL": QuerySettings(data_dir=data).database_url,  # SQLite or the run's PG
            "DOCSIM_JOBS__ALLOWED_ROOTS": json.dumps([str(tmp_path / "corpora")]),
            "DOCSIM_API__API_KEY": KEY,
            "DOCSIM_API__SWAP_POLL_SECONDS": "0.2",
            "DOCSIM_JOBS__POLL_SECONDS": "0.2",
            "DOCSIM_ENCODER__NAME": str(tiny_encoder_dir),  # the image's default is MiniLM
            "HF_HUB_OFFLINE": "1",
        }
    )
    return env


def _local(command: list[str], port: int) -> list[str]:
    """A compose command as run here: loopback instead of 0.0.0.0, a free port."""
    command = [sys.executable if c == "python" else c for c in command]
    command = [str(Path(sys.executable).parent / c) if c in ("docsim", "alembic") else c
               for c in command]  # fmt: skip
    out = list(command)
    for i, arg in enumerate(out[:-1]):
        if arg == "--host":
            out[i + 1] = "127.0.0.1"
        if arg == "--port":
            out[i + 1] = str(port)
    return [a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in out]


@pytest.fixture()
def processes() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


@pytest.mark.heavy_sql
@pytest.mark.long
def test_the_compose_commands_run_as_a_deployment(
    tmp_path: Path, tiny_encoder_dir: Path, sample_corpus: Path, processes: list
) -> None:
    port = free_port()
    env = _environment(tmp_path, tiny_encoder_dir, port)
    run = {"env": env, "cwd": ROOT, "capture_output": True, "text": True, "timeout": 300}

    migrate = subprocess.run(_local(SERVICES["migrate"]["command"], port), **run)
    assert migrate.returncode == 0, migrate.stderr
    engine = make_engine(env["DOCSIM_DB__URL"])
    assert {"jobs", "documents", "index_versions"} <= set(inspect(engine).get_table_names())
    engine.dispose()

    seeded = subprocess.run(_local(["docsim", "index", "--no-progress"], port), **run)
    assert seeded.returncode == 0, seeded.stderr
    assert json.loads(seeded.stdout)["version_id"] == 1

    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("api", "worker"):
        processes.append(
            subprocess.Popen(
                _local(SERVICES[name]["command"], port),
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=(logs / f"{name}.log").open("w"),
            )
        )
    api, worker = processes
    health = _local(SERVICES["api"]["healthcheck"]["test"][1:], port)  # after "CMD"
    until(lambda: subprocess.run(health, capture_output=True, env=env).returncode == 0)

    base = f"http://127.0.0.1:{port}"
    corpus = tmp_path / "corpora" / "sample"
    corpus.mkdir(parents=True)
    for path in sorted(sample_corpus.glob("*.md"))[:12]:
        (corpus / path.name).write_text(path.read_text())
    posted = httpx.post(
        f"{base}/jobs/reindex", json={"source": str(corpus)}, headers={"X-API-Key": KEY}
    )
    assert posted.status_code == 202, posted.text
    job_id = posted.json()["job_id"]

    def finished() -> bool:
        job = httpx.get(f"{base}/jobs/{job_id}", headers={"X-API-Key": KEY}).json()
        return job["status"] in {"succeeded", "failed"}

    until(finished)
    job = httpx.get(f"{base}/jobs/{job_id}", headers={"X-API-Key": KEY}).json()
    assert job["status"] == "succeeded", job
    assert job["worker"] is not None and str(worker.pid) in job["worker"]  # not the api
    until(lambda: httpx.get(f"{base}/ready").json().get("index_version") == 2)
    assert httpx.get(f"{base}/ready").json()["documents"] == 12
    lines = (logs / "api.log").read_text().splitlines()
    assert any(json.loads(line).get("logger") == "uvicorn.error" for line in lines if line)

    for process in (api, worker):
        process.send_signal(signal.SIGTERM)
    assert api.wait(timeout=60) == 0
    assert worker.wait(timeout=60) == 0


# --- the Kubernetes manifest (KubeRay), checked against compose and the settings ---------------
KUBE = {
    (doc["kind"], doc["metadata"]["name"]): doc
    for doc in yaml.safe_load_all((ROOT / "deploy/kubernetes/docsim-ray.yaml").read_text())
}


def _pods() -> dict[str, dict]:
    """`name -> pod spec` of every pod template of the manifest."""
    cluster = KUBE[("RayCluster", "docsim")]["spec"]
    pods = {"ray-head": cluster["headGroupSpec"]["template"]["spec"]}
    pods |= {f"ray-{g['groupName']}": g["template"]["spec"] for g in cluster["workerGroupSpecs"]}
    for kind, name in (("Job", "docsim-migrate"), ("Deployment", "docsim-api"), (
            "Deployment", "docsim-worker")):  # fmt: skip
        pods[name] = KUBE[(kind, name)]["spec"]["template"]["spec"]
    return pods


def _env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def test_the_kubernetes_manifest_runs_composes_commands_on_a_ray_cluster() -> None:
    """The api, the worker and the migration run the commands the compose test runs; the api
    joins the RayCluster's head Service with its token; every pod mounts the one data volume
    as the image's user."""
    pods = _pods()
    (api,) = pods["docsim-api"]["containers"]
    (worker,) = pods["docsim-worker"]["containers"]
    (migrate,) = pods["docsim-migrate"]["containers"]
    assert api["command"] == SERVICES["api"]["command"]
    # the worker pod is a Ray node without CPUs first (Ray Data's driver needs a raylet)
    assert worker["command"][:2] == ["sh", "-c"]
    start, run = worker["command"][2].split(" && ")
    assert run == "exec " + " ".join(SERVICES["worker"]["command"])
    assert migrate["command"] == SERVICES["migrate"]["command"]
    head = f"ray://{KUBE[('RayCluster', 'docsim')]['metadata']['name']}-head-svc:10001"
    assert _env(api)["DOCSIM_RAY__ADDRESS"]["value"] == head  # Ray Client: no raylet here
    service = head.removeprefix("ray://").split(":")[0]
    assert start.startswith(f"ray start --address={service}:6379 --num-cpus=0"), start
    assert _env(worker)["DOCSIM_RAY__ADDRESS"]["value"] == "auto"
    assert KUBE[("RayCluster", "docsim")]["spec"]["headGroupSpec"]["rayStartParams"] == {
        "num-cpus": "0"
    }
    assert {api["readinessProbe"]["httpGet"]["path"], api["livenessProbe"]["httpGet"]["path"]} == {
        "/ready", "/health"}  # fmt: skip
    uid = re.search(r"useradd .*--uid (\d+)", (ROOT / "Dockerfile").read_text())
    assert uid is not None
    for name, pod in pods.items():
        assert pod["securityContext"]["runAsUser"] == int(uid.group(1)), name
        assert pod["volumes"] == [
            {"name": "docsim-data", "persistentVolumeClaim": {"claimName": "docsim-data"}}
        ], name
        for container in pod["containers"]:
            assert container["image"] == "docsim:latest-ray", name
            assert {"name": "docsim-data", "mountPath": "/data"} in container["volumeMounts"]
            env = _env(container)
            if name.startswith("ray-") or "DOCSIM_RAY__ADDRESS" in env:
                assert env["RAY_AUTH_MODE"]["value"] == "token", name
                secret = env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
                assert secret == {"name": "docsim-ray-auth", "key": "token"}, name


def test_the_kubernetes_environment_names_the_services_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every `DOCSIM_*` variable of the manifest is a setting of the service (a misspelt one
    would be ignored), and its values are valid ones."""
    from docsim.app.core.settings import ServiceSettings

    def is_setting(name: str) -> bool:
        model: type = ServiceSettings
        for part in name.removeprefix("DOCSIM_").lower().split("__"):
            field = model.model_fields.get(part)
            if field is None:
                return False
            model = field.annotation  # type: ignore[assignment]
        return True

    seen = 0
    for pod in _pods().values():
        for container in pod["containers"]:
            for name, entry in _env(container).items():
                if not name.startswith("DOCSIM_"):
                    continue
                assert is_setting(name), name
                seen += 1
                value = entry.get("value", "postgresql+psycopg://u:p@db:5432/docsim")
                monkeypatch.setenv(name, value)
            ServiceSettings()  # raises on an invalid value
    assert seen > 15


# What the test knows of KubeRay's ray.io/v1 RayCluster: the fields of its spec, of the head
# group and of a worker group that the manifest may use (its CRD's schema is not to be had from
# the package registries here; each group's pod template is checked against Kubernetes' own).
RAY_CLUSTER_FIELDS = {
    "spec": {"rayVersion", "headGroupSpec", "workerGroupSpecs", "enableInTreeAutoscaling"},
    "head": {"rayStartParams", "template", "serviceType"},
    "worker": {"groupName", "replicas", "minReplicas", "maxReplicas", "rayStartParams", "template"},
}


def test_the_kubernetes_manifest_holds_to_kubernetes_schemas() -> None:
    """Every core object of the manifest, and every pod template of the RayCluster, is valid
    against Kubernetes 1.37's schemas in strict mode (a misspelt or misplaced field fails, as
    the broken copy shows); the RayCluster's own fields are KubeRay's, with string start
    parameters and replicas within their bounds."""
    import copy

    import kubernetes_validate

    def strict(doc: dict) -> None:
        kubernetes_validate.validate(doc, "1.37", strict=True)

    for (kind, _name), doc in KUBE.items():
        if kind != "RayCluster":
            strict(doc)
    cluster = KUBE[("RayCluster", "docsim")]["spec"]
    groups = [("head", cluster["headGroupSpec"])]
    groups += [("worker", g) for g in cluster["workerGroupSpecs"]]
    assert set(cluster) <= RAY_CLUSTER_FIELDS["spec"]
    for role, group in groups:
        assert set(group) <= RAY_CLUSTER_FIELDS[role], role
        assert all(isinstance(v, str) for v in group["rayStartParams"].values()), role
        template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": role}}
        strict(template | {"template": group["template"]})
        if role == "worker":
            assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]

    broken = copy.deepcopy(KUBE[("Deployment", "docsim-api")])
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        strict(broken)


def test_the_shards_fit_the_ray_clusters_workers() -> None:
    """The api's shard actors each hold a unit of the resource that only the worker group
    offers (`ray start --resources`, as KubeRay passes it), and the workers have units and
    CPUs for all of them: none on the head. Compose's workers offer it too."""
    import shlex

    (api,) = _pods()["docsim-api"]["containers"]
    env = {name: entry["value"] for name, entry in _env(api).items() if "value" in entry}
    count, cpus = int(env["DOCSIM_SHARDS__COUNT"]), float(env["DOCSIM_SHARDS__CPUS"])
    resource = env["DOCSIM_SHARDS__NODE_RESOURCE"]
    cluster = KUBE[("RayCluster", "docsim")]["spec"]
    assert "resources" not in cluster["headGroupSpec"]["rayStartParams"]
    units = worker_cpus = 0.0
    for group in cluster["workerGroupSpecs"]:
        offered = json.loads(shlex.split(group["rayStartParams"]["resources"])[0])
        (container,) = group["template"]["spec"]["containers"]
        units += group["replicas"] * offered.get(resource, 0)
        worker_cpus += group["replicas"] * float(container["resources"]["requests"]["cpu"])
    assert units >= count and worker_cpus >= count * cpus, (units, worker_cpus, count)
    # and compose's: the workers offer the resource the api's shards ask for
    (offer,) = [a for a in SHARDED["services"]["ray-worker"]["command"] if "--resources" in a]
    offered = json.loads(offer.split("=", 1)[1])
    api_env = SHARDED["services"]["api"]["environment"]
    assert offered.get(api_env["DOCSIM_SHARDS__NODE_RESOURCE"], 0) >= 1, (offered, api_env)
