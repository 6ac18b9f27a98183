"""The sharded service answers as the in-process one on 60 real AILA judgments (slow:
`make test-slow`): long documents of many paragraphs, the development queries posted and
judgments by id, every method, `normalize` off, a pool, candidate mode and the unit
granularities."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.settings import JobSettings, ShardSettings
from docsim.search.shards.shard import SEARCHED_ON_SHARDS
from tests.app.test_sharded_service import (
    METHODS,
    assert_same,
    assert_same_units,
    ranking,
    unit_hits,
)
from tests.utils.corpora import AILA_DIR
from tests.utils.indexes import publish
from tests.utils.ray_local import local_ray

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not AILA_DIR.exists(), reason="../shared/data/aila2019 not available"),
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed"),
]


@pytest.fixture(scope="module")
def clients(
    tmp_path_factory: pytest.TempPathFactory, tiny_encoder_dir: Path
) -> Iterator[tuple[TestClient, TestClient]]:
    corpus = tmp_path_factory.mktemp("aila60")
    for file in sorted(AILA_DIR.glob("*.txt"))[:60]:
        shutil.copy(file, corpus / file.name)
    settings = ServiceSettings(
        data_dir=tmp_path_factory.mktemp("data"), jobs=JobSettings(embedded_worker=False)
    )
    publish(corpus, settings, tiny_encoder_dir)
    sharded = settings.model_copy(update={"shards": ShardSettings(count=3, cpus=0.5)})
    with local_ray(), TestClient(create_app(settings)) as local:
        with TestClient(create_app(sharded)) as remote:
            yield local, remote


def test_sixty_judgments_rank_the_same_on_shards(clients: tuple[TestClient, TestClient]) -> None:
    local, remote = clients
    queries = (AILA_DIR.parent / "queries_dev.txt").read_text(encoding="utf-8").splitlines()
    ids = [r for r, _ in ranking(local, {"document": {"text": queries[0].split("||")[1]}})]
    bodies = [{"document": {"text": q.split("||", 1)[1]}} for q in queries[:4]]
    bodies += [{"document_id": d} for d in ids[:2]]
    bodies += [
        {**bodies[0], "normalize": False},
        {**bodies[0], "candidates": ids[10:25]},
    ]
    for method in METHODS:
        for body in bodies:
            request = {**body, "method": method, "mode": "exhaustive"}
            assert_same(ranking(local, request), ranking(remote, request))
    for method in ("sdr", "fused"):  # the coordinator's retrieval, partly on the shards
        for body in (bodies[0], bodies[4]):
            request = {**body, "method": method, "mode": "candidate"}
            assert_same(ranking(local, request), ranking(remote, request))
    for granularity in SEARCHED_ON_SHARDS:
        for body in (bodies[0], bodies[4], bodies[-1]):
            request = {**body, "granularity": granularity, "top_k": 30}
            assert_same_units(unit_hits(local, request), unit_hits(remote, request))
