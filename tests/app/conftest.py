from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.core.config import ServiceSettings
from app.main import create_app
from indexer.db import make_engine, upgrade
from indexer.pipeline import build_index
from indexer.sentences import load_splitter
from models.loading import load_encoder


@pytest.fixture(scope="session")
def indexed_settings(
    tmp_path_factory: pytest.TempPathFactory, tiny_encoder_dir: Path, sample_corpus: Path
) -> ServiceSettings:
    """A data directory holding one published version of the sample corpus (tiny encoder)."""
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("served"))
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    build_index(
        sample_corpus,
        settings=settings,
        engine=engine,
        encoder=load_encoder(tiny_encoder_dir),
        splitter=load_splitter(),
        show_progress=False,
    )
    engine.dispose()
    return settings


@pytest.fixture(scope="session")
def app(indexed_settings: ServiceSettings) -> Iterator[FastAPI]:
    application = create_app(indexed_settings)
    with TestClient(application):  # runs the lifespan: the index is loaded once
        yield application


@pytest.fixture()
def client(app: FastAPI) -> TestClient:
    return TestClient(app)
