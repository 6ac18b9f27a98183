"""The encode engines: Ray Data gives the same version as the local engine."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from docsim.indexer.builder.engines import make_encode_engine, one_ahead
from docsim.indexer.errors import EngineError
from docsim.indexer.settings import RaySettings
from docsim.indexer.store.db import make_engine
from docsim.indexer.store.versions import active_version
from docsim.models.encoders.encoder import Encoder
from docsim.models.inference.pacing import before_batch, paced
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.settings import QuerySettings
from tests.utils.corpora import synthetic_markdown, write_text_corpus
from tests.utils.indexes import publish

LEVELS = ("document", "section", "paragraph", "sentence", "chunk")


@pytest.fixture()
def short_dir() -> Iterator[Path]:
    """Ray's sockets live under the data directory, whose path must stay short."""
    folder = Path(tempfile.mkdtemp(prefix="dsr"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def build(
    corpus: Path, data: Path, encoder: Encoder, kind: str, database: str | None = None
) -> LoadedIndex:
    settings = QuerySettings(data_dir=data, ray=RaySettings(local_cpus=2, actors=2))
    if database is not None:
        settings.db.url = database
    settings.index.block_documents = 8  # several blocks, spread over both actors
    publish(corpus, settings, encoder, encode_engine=make_encode_engine(kind, settings, encoder, 8))
    engine = make_engine(settings.database_url)
    loaded = LoadedIndex.load(engine, active_version(engine))
    engine.dispose()
    return loaded


@pytest.mark.slow
def test_the_ray_engine_builds_the_local_engines_version(
    sample_corpus: Path,
    tiny_encoder: Encoder,
    short_dir: Path,
    tmp_path: Path,
    _postgres,  # noqa: ANN001 - the run's PostgreSQL server, if any
) -> None:
    local = build(sample_corpus, tmp_path / "local", tiny_encoder, "local")
    # its own database too, so that both builds start from the same empty id space
    database = _postgres.database() if _postgres is not None else None
    distributed = build(sample_corpus, short_dir / "d", tiny_encoder, "ray", database)
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
    sample_corpus: Path, tiny_encoder: Encoder, tmp_path: Path
) -> None:
    deep = tmp_path / ("x" * 60)
    with pytest.raises(EngineError, match="too long for its sockets"):
        build(sample_corpus, deep, tiny_encoder, "ray")


def test_unknown_engines_are_refused(tiny_encoder: Encoder) -> None:
    with pytest.raises(EngineError, match="unknown engine 'spark'"):
        make_encode_engine("spark", QuerySettings(), tiny_encoder, 8)


def test_ray_data_through_ray_client_is_refused_before_any_work(
    sample_corpus: Path, tiny_encoder: Encoder, tmp_path: Path
) -> None:
    """Ray Data cannot run through Ray Client (its executor needs a raylet in the driver's
    process): a build given a `ray://` address stops at its first block, saying what to do,
    and joins no Ray (nothing listens at the address)."""
    import sys

    settings = QuerySettings(data_dir=tmp_path, ray=RaySettings(address="ray://10.0.0.1:10001"))
    engine = make_encode_engine("ray", settings, tiny_encoder, 8)
    with pytest.raises(EngineError, match="does not work through Ray Client"):
        publish(sample_corpus, settings, tiny_encoder, encode_engine=engine)
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()


@pytest.mark.slow
def test_a_stopped_ray_build_stops_its_local_ray_at_once(
    sample_corpus: Path, tiny_encoder: Encoder, short_dir: Path
) -> None:
    from docsim.indexer.ray_session import private_cluster_environment

    private_cluster_environment()  # as the build sets it, before Ray is imported here
    import ray

    from docsim.indexer.builder.pipeline import BuildHooks

    class Stop(Exception):
        pass

    def stop_after_first_block(done: int, total: int) -> None:
        raise Stop

    settings = QuerySettings(data_dir=short_dir / "s", ray=RaySettings(local_cpus=2, actors=1))
    settings.index.block_documents = 8
    with pytest.raises(Stop):
        publish(
            sample_corpus,
            settings,
            tiny_encoder,
            encode_engine=make_encode_engine("ray", settings, tiny_encoder, 8),
            hooks=BuildHooks(on_progress=stop_after_first_block),
        )
    assert not ray.is_initialized()


def test_one_ahead_keeps_order_raises_the_producers_error_and_stops_early() -> None:
    made: list[int] = []

    def numbers(n: int, fail_at: int | None = None):
        for i in range(n):
            if i == fail_at:
                raise RuntimeError(f"failed at {i}")
            made.append(i)
            yield i

    assert list(one_ahead(numbers(50))) == list(range(50))
    with pytest.raises(RuntimeError, match="failed at 7"):
        list(one_ahead(numbers(50, fail_at=7)))
    made.clear()
    stream = one_ahead(numbers(1000))
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    time.sleep(0.5)
    assert len(made) <= 5  # the producer stopped a step or two ahead, not at the end


def test_one_ahead_stops_the_producer_between_batches_of_one_item() -> None:
    """An item made of many batches (one huge document's forward passes) is dropped at the
    next batch once the consumer stops, not finished: an interrupted build exits at once."""
    batches: list[int] = []
    first_done, release = threading.Event(), threading.Event()

    def huge_items():
        yield "small"
        for i in range(10_000):  # the second item: 10,000 batches
            if i == 1:
                first_done.set()
                release.wait(5)
            before_batch(1)
            batches.append(i)
        yield "huge"

    stream = one_ahead(huge_items())
    assert next(stream) == "small"
    assert first_done.wait(5)
    closer = threading.Thread(target=stream.close)
    closer.start()
    time.sleep(0.2)  # the consumer has set its stop and waits for the producer
    release.set()
    closer.join(10)
    assert not closer.is_alive()
    assert len(batches) <= 3, len(batches)


def test_one_ahead_runs_the_consumers_hook_before_the_producers_batches() -> None:
    """A write's deadline (its `paced` hook, on the request's thread) reaches the batches the
    producer thread encodes: they are counted there, and its refusal ends the stream."""

    class PastDeadline(Exception):
        pass

    seen: list[tuple[str, int]] = []

    def deadline_after_three(rows: int) -> None:
        seen.append((threading.current_thread().name, rows))
        if len(seen) > 3:
            raise PastDeadline

    def items():
        for i in range(100):
            before_batch(i + 1)
            yield i

    with paced(deadline_after_three):
        stream = one_ahead(items())
        with pytest.raises(PastDeadline):
            list(stream)
    assert seen == [("docsim-encode", rows) for rows in (1, 2, 3, 4)]


@pytest.mark.slow
def test_a_ray_build_encodes_only_the_new_documents(
    tmp_path: Path, short_dir: Path, tiny_encoder: Encoder
) -> None:
    texts = synthetic_markdown(12)
    names = sorted(texts)
    corpus = write_text_corpus(tmp_path / "corpus", {f"{n}.md": texts[n] for n in names[:10]})
    settings = QuerySettings(data_dir=short_dir / "d", ray=RaySettings(local_cpus=2, actors=2))
    settings.index.block_documents = 4
    publish(corpus, settings, tiny_encoder)  # the local engine
    for name in names[10:]:
        (corpus / f"{name}.md").write_text(texts[name])
    ray_engine = make_encode_engine("ray", settings, tiny_encoder, 4)
    grown = publish(corpus, settings, tiny_encoder, encode_engine=ray_engine)
    reused = grown.manifest["build"]["reused"]
    assert reused["documents"] == 10
    assert reused["encoded_sentences"] == grown.manifest["counts"]["sentence"] - reused["sentences"]
    assert reused["encoded_sentences"] > 0
    again = publish(corpus, settings, tiny_encoder, encode_engine=ray_engine)
    assert again.manifest["build"]["reused"]["encoded_sentences"] == 0
    import ray

    assert not ray.is_initialized()
