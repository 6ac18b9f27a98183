"""`open_searcher`: the versions a reindex swaps between, built with the same encoder, are
served with one loaded copy of it (`load_shared_encoder`, tested in tests/models); a version
built on an int8 export is served on it without the torch model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import update

from docsim.indexer.settings import DatabaseSettings
from docsim.indexer.store.db import make_engine
from docsim.indexer.store.manifest import file_sha256
from docsim.indexer.store.stored_rows import read_float16
from docsim.indexer.store.tables import index_versions
from docsim.indexer.store.vector_index import FaissIndex
from docsim.indexer.store.versions import active_version
from docsim.models.inference.backends import native_openvino_backend
from docsim.protocol.choices import Granularity, Method
from docsim.protocol.requests import SimilarOptions
from docsim.search.errors import IndexMismatchError
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings
from tests.utils.indexes import publish


def published(
    tmp_path: Path,
    sample_corpus: Path,
    encoder_dir: Path,
    postgres,  # noqa: ANN001
    documents: int,
) -> tuple[Path, QuerySettings]:
    """The first `documents` of the sample corpus copied and published (int8, the default
    backend) on the run's database: the corpus folder and the settings."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in sorted(sample_corpus.glob("*.md"))[:documents]:
        shutil.copy(path, corpus / path.name)
    database = DatabaseSettings(url=postgres.database() if postgres is not None else None)
    settings = QuerySettings(data_dir=tmp_path / "data", db=database)
    publish(corpus, settings, encoder_dir)
    return corpus, settings


def test_versions_of_one_encoder_share_it(
    tmp_path: Path,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    _postgres,  # noqa: ANN001
) -> None:
    corpus, settings = published(tmp_path, sample_corpus, tiny_encoder_dir, _postgres, 6)
    engine = make_engine(settings.database_url)
    try:
        first = open_searcher(settings, engine)
        publish(corpus, settings, tiny_encoder_dir)  # a reindex: version 2, the cached export
        second = open_searcher(settings, engine)
        assert second.index.version_id == first.index.version_id + 1
        assert second.encoder is first.encoder
    finally:
        engine.dispose()


SERVE_ONE_QUERY = """
import sys
from docsim.search.settings import QuerySettings
from docsim.search.serving import open_searcher
from docsim.indexer.store.db import make_engine
settings = QuerySettings()
searcher = open_searcher(settings, make_engine(settings.database_url))
vectors = searcher.encoder.encode(["A lighthouse keeper climbs the tower at dusk."])
print(searcher.encoder.backend_record["name"], tuple(vectors.shape),
      searcher.encoder._model is None, "transformers.modeling_utils" in sys.modules)
"""


@pytest.mark.heavy_sql
def test_a_version_on_its_int8_export_is_served_without_the_torch_model(
    tmp_path: Path,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    _postgres,  # noqa: ANN001
) -> None:
    """Serving an int8 version reads the tokenizer and the export: transformers' model classes
    (seconds to import) are never imported and the weights are not held twice. In a fresh
    interpreter: this one imported them long ago."""
    _, settings = published(tmp_path, sample_corpus, tiny_encoder_dir, _postgres, 4)
    env = {**os.environ, "DOCSIM_DATA_DIR": str(settings.data_dir)}
    env["DOCSIM_DB__URL"] = settings.database_url
    done = subprocess.run(
        [sys.executable, "-c", SERVE_ONE_QUERY], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [native_openvino_backend(), "(1,", "32)", "True", "False"]


def test_the_sentence_store_is_compressed_where_its_scores_run() -> None:
    """`auto` compresses the sentences on a CPU service and on CPU shards, where the scores
    run; a sharded coordinator scores no sentences and holds them mapped; `float32` keeps
    the shards exact, `compressed` compresses even GPU shards."""
    from docsim.indexer.settings import ShardSettings
    from docsim.search.served.sentence_scan import ScanShape
    from docsim.search.serving import sentences_compressed, shards_scan
    from docsim.search.settings import SearchSettings

    def settings(store: str, gpus: float = 0.0) -> QuerySettings:
        search = SearchSettings(sentence_store=store)
        return QuerySettings(search=search, shards=ShardSettings(gpus=gpus))

    assert sentences_compressed(settings("auto"), sharded=False)
    assert not sentences_compressed(settings("float32"), sharded=False)
    for store in ("auto", "compressed", "float32"):
        assert not sentences_compressed(settings(store), sharded=True)
    search = SearchSettings()
    shape = ScanShape(search.scan.dimensions, search.scan.group, search.seed)
    assert shards_scan(settings("auto")) == shape
    assert shards_scan(settings("auto", gpus=1)) is None
    assert shards_scan(settings("compressed", gpus=1)) == shape
    assert shards_scan(settings("float32")) is None


def test_a_version_with_the_flat_index_files_of_earlier_builds_still_serves(
    tmp_path: Path,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    _postgres,  # noqa: ANN001
) -> None:
    """Builds before issue 54 wrote a `<level>.faiss` beside each Flat level's float16 file;
    such a version is read from those files and ranks as the same version without them."""
    _, settings = published(tmp_path, sample_corpus, tiny_encoder_dir, _postgres, 6)
    settings = settings.model_copy(update={"search": SearchSettings(sentence_store="float32")})
    engine = make_engine(settings.database_url)
    asked = [SimilarOptions(top_k=5, method=Method.sdr), SimilarOptions(
        top_k=5, granularity=Granularity.sentence)]  # fmt: skip

    def rankings() -> list[list[tuple[str, float]]]:
        searcher = open_searcher(settings, engine)
        query = searcher.query_from_index(searcher.index.external_ids[0])
        return [
            [(h.document_id, h.score) for h in searcher.similar(query, options).results]
            for options in asked
        ]

    try:
        before = rankings()
        version = active_version(engine)
        assert version is not None and version.manifest is not None
        path, manifest = Path(version.path), version.manifest
        for level, info in manifest["levels"].items():
            assert info["index_file"] is None  # this build wrote none
            vectors = read_float16(path / info["vectors_file"])
            index = FaissIndex.build(vectors, np.load(path / info["ids_file"]), "Flat")
            index.save(path / f"{level}.faiss")
            info["index_file"] = f"{level}.faiss"
            info["sha256"][f"{level}.faiss"] = file_sha256(path / f"{level}.faiss")
        with engine.begin() as conn:
            conn.execute(
                update(index_versions)
                .where(index_versions.c.version_id == version.version_id)
                .values(manifest=manifest)
            )
        assert rankings() == before and all(before)
        with (path / "document.faiss").open("r+b") as handle:  # read: its checksum is checked
            handle.seek(-1, os.SEEK_END)
            last = handle.read(1)
            handle.seek(-1, os.SEEK_END)
            handle.write(bytes([last[0] ^ 1]))
        with pytest.raises(IndexMismatchError, match="document.faiss is corrupt"):
            open_searcher(settings, engine)
    finally:
        engine.dispose()


def test_a_version_of_ivf_levels_serves_as_the_flat_one(
    tmp_path: Path,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    _postgres,  # noqa: ANN001
) -> None:
    """Levels over `flat_max_vectors` are IVF-Flat, kept on disk as their float16 files and
    lists only (or no lists, left to the reader); searched with every list probed, they rank
    units as the Flat version does."""
    rankings, manifests = [], []
    ivf_levels = {"flat_max_vectors": 10, "nprobe": 10_000}
    for name, index in (
        ("flat", {}),
        ("ivf", ivf_levels | {"scanned_level_lists": "write"}),
        ("deferred", ivf_levels | {"scanned_level_lists": "defer"}),
    ):
        (tmp_path / name).mkdir()
        _, settings = published(tmp_path / name, sample_corpus, tiny_encoder_dir, _postgres, 6)
        ivf = settings.model_copy(
            update={
                "index": settings.index.model_copy(update=index),
                "search": SearchSettings(sentence_store="float32"),
            }
        )
        if index:
            publish(tmp_path / name / "corpus", ivf, tiny_encoder_dir)  # version 2, IVF levels
        engine = make_engine(ivf.database_url)
        try:
            searcher = open_searcher(ivf, engine)
            manifests.append(active_version(engine).manifest["levels"])
            query = searcher.query_from_index(searcher.index.external_ids[0])
            options = SimilarOptions(top_k=8, granularity=Granularity.sentence)
            hits = searcher.similar(query, options).results
            rankings.append([(h.document_id, h.start, round(h.score, 5)) for h in hits])
        finally:
            engine.dispose()
    written, deferred = manifests[1]["sentence"], manifests[2]["sentence"]
    assert written["factory"].startswith("IVF") and deferred["factory"] == written["factory"]
    assert written["index_file"] is None and "lists_file" in written
    assert deferred["index_file"] is None and "lists_file" not in deferred
    assert rankings[0] == rankings[1] == rankings[2] and len(rankings[0]) == 8
