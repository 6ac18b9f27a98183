"""The searcher the search tests share: the sample corpus published with the tiny encoder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from docsim.indexer.settings import DatabaseSettings
from docsim.indexer.store.db import make_engine
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings
from tests.utils.indexes import publish


@pytest.fixture(scope="module")
def searcher(
    tmp_path_factory: pytest.TempPathFactory,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    _postgres,  # noqa: ANN001 - the run's PostgreSQL server, if any
) -> Iterator[Searcher]:
    """A searcher over one published version of the 48-document sample corpus; on PostgreSQL
    in a database of its own, so that no other module's index sees this version. Its sentence
    level is float32 in memory, the reference the compressed level is tested against
    (`test_sentence_scan.py`)."""
    database = DatabaseSettings(url=_postgres.database() if _postgres is not None else None)
    settings = QuerySettings(
        data_dir=tmp_path_factory.mktemp("search"),
        db=database,
        search=SearchSettings(sentence_store="float32"),
    )
    publish(sample_corpus, settings, tiny_encoder_dir)
    engine = make_engine(settings.database_url)
    yield open_searcher(settings, engine)
    engine.dispose()
