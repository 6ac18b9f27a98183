"""The encode engines: Ray Data gives the same version as the local engine."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from indexer.config import RaySettings, Settings
from indexer.db import make_engine, upgrade
from indexer.engines import EngineError, make_encode_engine
from indexer.pipeline import build_index
from indexer.reader import LoadedIndex
from indexer.sentences import SentenceSplitter
from indexer.store import active_version
from models.encoder import Encoder

LEVELS = ("document", "section", "paragraph", "sentence", "chunk")


@pytest.fixture()
def short_dir() -> Iterator[Path]:
    """Ray's sockets live under the data directory, whose path must stay short."""
    folder = Path(tempfile.mkdtemp(prefix="dsr"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def build(corpus: Path, data: Path, encoder: Encoder, splitter, kind: str) -> LoadedIndex:  # noqa: ANN001
    settings = Settings(data_dir=data, ray=RaySettings(local_cpus=2, actors=2))
    settings.index.block_documents = 8  # several blocks, spread over both actors
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    build_index(
        corpus,
        settings=settings,
        engine=engine,
        encoder=encoder,
        splitter=splitter,
        show_progress=False,
        encode_engine=make_encode_engine(kind, settings, encoder, 8),
    )
    loaded = LoadedIndex.load(engine, active_version(engine))
    engine.dispose()
    return loaded


@pytest.mark.slow
def test_the_ray_engine_builds_the_local_engines_version(
    sample_corpus: Path,
    tiny_encoder: Encoder,
    splitter: SentenceSplitter,
    short_dir: Path,
    tmp_path: Path,
) -> None:
    local = build(sample_corpus, tmp_path / "local", tiny_encoder, splitter, "local")
    distributed = build(sample_corpus, short_dir / "d", tiny_encoder, splitter, "ray")
    assert distributed.external_ids == local.external_ids
    for level in LEVELS:
        np.testing.assert_array_equal(distributed.ids[level], local.ids[level])
        np.testing.assert_allclose(
            distributed.vectors[level].numpy(), local.vectors[level].numpy(), atol=1e-5
        )
    import ray

    assert list((short_dir / "d" / "ray").glob("session_*"))  # Ray's files stayed in the data dir
    assert not ray.is_initialized()  # the local Ray started for the build was stopped


def test_a_data_directory_too_long_for_rays_sockets_is_refused(
    sample_corpus: Path, tiny_encoder: Encoder, splitter: SentenceSplitter, tmp_path: Path
) -> None:
    deep = tmp_path / ("x" * 60)
    with pytest.raises(EngineError, match="too long for its sockets"):
        build(sample_corpus, deep, tiny_encoder, splitter, "ray")


def test_unknown_engines_are_refused(tiny_encoder: Encoder) -> None:
    with pytest.raises(EngineError, match="unknown engine 'spark'"):
        make_encode_engine("spark", Settings(), tiny_encoder, 8)
