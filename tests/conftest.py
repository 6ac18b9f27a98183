from __future__ import annotations

from collections.abc import Iterator
from copy import deepcopy
from pathlib import Path

import pytest
from sqlalchemy import Engine

from indexer.config import Settings
from indexer.corpus import SAMPLE_CORPUS
from indexer.db import make_engine, upgrade
from indexer.sentences import SentenceSplitter, load_splitter
from models.loading import load_encoder
from models.tiny import write_tiny_encoder
from models.transformer import TransformerEncoder


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))


@pytest.fixture(scope="session")
def _tiny_encoder(tiny_encoder_dir: Path) -> TransformerEncoder:
    return load_encoder(tiny_encoder_dir, precision="fp32")  # type: ignore[return-value]


@pytest.fixture()
def tiny_encoder(_tiny_encoder: TransformerEncoder) -> TransformerEncoder:
    return deepcopy(_tiny_encoder)


@pytest.fixture(scope="session")
def minilm() -> TransformerEncoder:
    return load_encoder("minilm", precision="fp32")  # type: ignore[return-value]


@pytest.fixture(scope="session")
def splitter() -> SentenceSplitter:
    return load_splitter()


@pytest.fixture(scope="session")
def sample_corpus() -> Path:
    return SAMPLE_CORPUS


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture()
def engine(settings: Settings) -> Iterator[Engine]:
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    yield engine
    engine.dispose()
