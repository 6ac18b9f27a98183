from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from docsim.app.core.settings import ApiSettings, ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.settings import JobSettings
from tests.utils.indexes import PublishedCopies, publish


@pytest.fixture(scope="session")
def indexed_settings(
    tmp_path_factory: pytest.TempPathFactory, tiny_encoder_dir: Path, sample_corpus: Path
) -> ServiceSettings:
    """A data directory holding one published version of the sample corpus (tiny encoder)."""
    settings = ServiceSettings(
        data_dir=tmp_path_factory.mktemp("served"),
        jobs=JobSettings(embedded_worker=False),  # shared by many tests: never changes
    )
    publish(sample_corpus, settings, tiny_encoder_dir)
    return settings


FAST_JOBS = JobSettings(
    poll_seconds=0.05, heartbeat_seconds=0.1, stale_after_seconds=3, retire_grace_seconds=0
)


@pytest.fixture()
def fresh_settings(
    tmp_path: Path,
    tiny_encoder_dir: Path,
    sample_corpus: Path,
    published_copies: PublishedCopies,
) -> Callable[..., ServiceSettings]:
    """Settings over a new data directory with one published version of the sample corpus,
    for tests that change the index (jobs, document updates); `tmp_path` and the tiny
    encoder's folder are allowed roots. The version is a copy of one built once a session."""

    def make(embedded_worker: bool = True, **api: Any) -> ServiceSettings:
        settings = ServiceSettings(
            data_dir=tmp_path / "data",
            jobs=FAST_JOBS.model_copy(
                update={
                    "allowed_roots": [tmp_path, tiny_encoder_dir],
                    "embedded_worker": embedded_worker,
                }
            ),
            api=ApiSettings(swap_poll_seconds=0.05, **api),
        )
        published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
        return settings

    return make


@pytest.fixture(scope="session")
def app(indexed_settings: ServiceSettings) -> Iterator[FastAPI]:
    application = create_app(indexed_settings)
    with TestClient(application):  # runs the lifespan: the index is loaded once
        yield application


@pytest.fixture()
def client(app: FastAPI) -> TestClient:
    return TestClient(app)
