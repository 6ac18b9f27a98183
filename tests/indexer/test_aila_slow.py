"""A real build on AILA judgments with the real default encoder (slow: `make test-slow`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, select

from docsim.indexer.builder.pipeline import build_index
from docsim.indexer.store.level_files import open_level_index
from docsim.indexer.store.tables import documents, sentences
from docsim.indexer.store.units import count_units, level_ids
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.search.settings import QuerySettings
from tests.utils.corpora import AILA_DIR

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not AILA_DIR.exists(), reason="../shared/data/aila2019 not available"),
]


def test_aila_subset_with_minilm(
    tmp_path: Path,
    settings: QuerySettings,
    engine: Engine,
    minilm: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    corpus = tmp_path / "aila"
    corpus.mkdir()
    for file in sorted(AILA_DIR.glob("*.txt"))[:60]:
        shutil.copy(file, corpus / file.name)
    result = build_index(
        corpus,
        settings=settings,
        engine=engine,
        encoder=minilm,
        splitter=splitter,
        show_progress=False,
    )
    assert result.manifest["corpus"]["format"] == "aila"
    counts = count_units(engine, result.version_id)
    assert counts["document"] == 60 and counts["sentence"] > 60 * 20
    for level, info in result.manifest["levels"].items():
        index = open_level_index(result.path, info)
        np.testing.assert_array_equal(index.ids(), level_ids(engine, result.version_id, level))
    # a sentence finds itself through the sentence index, and its offsets give its text back
    with engine.connect() as conn:
        row = conn.execute(
            select(
                sentences.c.sentence_id,
                sentences.c.char_start,
                sentences.c.char_end,
                documents.c.text,
            )
            .join(documents, documents.c.doc_id == sentences.c.doc_id)
            .where(sentences.c.version_id == result.version_id)
            .order_by(sentences.c.sentence_id)
            .offset(500)
            .limit(1)
        ).one()
    text = row.text[row.char_start : row.char_end]
    info = result.manifest["levels"]["sentence"]
    index = open_level_index(result.path, info)
    hits = index.search(minilm.encode([text]).numpy(), 3)[0]
    assert row.sentence_id in hits.ids.tolist()
    assert hits.scores[0] > 0.99
