"""`open_searcher`: the versions a reindex swaps between, built with the same encoder, are
served with one loaded copy of it (`load_shared_encoder`, tested in tests/models)."""

from __future__ import annotations

import shutil
from pathlib import Path

from docsim.indexer.config import DatabaseSettings, Settings
from docsim.indexer.serving import open_searcher
from docsim.indexer.store.db import make_engine
from tests.utils.indexes import publish


def test_versions_of_one_encoder_share_it(
    tmp_path: Path,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    _postgres,  # noqa: ANN001
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in sorted(sample_corpus.glob("*.md"))[:6]:
        shutil.copy(path, corpus / path.name)
    database = DatabaseSettings(url=_postgres.database() if _postgres is not None else None)
    settings = Settings(data_dir=tmp_path / "data", db=database)
    publish(corpus, settings, tiny_encoder_dir)
    engine = make_engine(settings.database_url)
    try:
        first = open_searcher(settings, engine)
        publish(corpus, settings, tiny_encoder_dir)  # a reindex: version 2, the cached export
        second = open_searcher(settings, engine)
        assert second.index.version_id == first.index.version_id + 1
        assert second.encoder is first.encoder
    finally:
        engine.dispose()
