"""Issue 16's check on real judgments (slow: `make test-slow`): 50 AILA judgments laid out as
PDFs index to the same paragraphs as their .txt files and rank the development queries the
same way, with the default encoder and the default method."""

from __future__ import annotations

import difflib
import logging
import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine

from docsim.indexer.settings import EncoderSettings
from docsim.indexer.store.db import make_engine
from docsim.indexer.text.corpus import aila_document
from docsim.indexer.text.readers.text import text_document
from docsim.protocol.requests import SimilarOptions
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from tests.utils.corpora import AILA_DIR
from tests.utils.indexes import publish
from tests.utils.pdfs import write_document_pdf

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not AILA_DIR.exists(), reason="../shared/data/aila2019 not available"),
]
logger = logging.getLogger(__name__)
AILA = AILA_DIR.parent
JUDGMENTS = 50


def judgments() -> list[str]:
    """Every judgment relevant to a development query (43), then the next ids: the queries
    have something to find."""
    lines = (AILA / "qrels_dev.txt").read_text().splitlines()
    relevant = sorted(
        {f.split()[2] for f in lines if f.split()[3] == "1"}, key=lambda d: int(d[1:])
    )
    return (relevant + [f"C{n}" for n in range(189, 189 + JUDGMENTS)])[:JUDGMENTS]


def searcher_over(corpus: Path, data_dir: Path, minilm) -> tuple[Searcher, Engine]:  # noqa: ANN001
    settings = QuerySettings(data_dir=data_dir, encoder=EncoderSettings(backend="torch"))
    publish(corpus, settings, minilm)
    engine = make_engine(settings.database_url)
    return open_searcher(settings, engine), engine


def paragraphs(searcher: Searcher, doc_id: str) -> list[str]:
    """The document's indexed paragraphs, whitespace collapsed: a PDF's text layer keeps
    words, not runs of spaces."""
    query = searcher.query_from_index(doc_id)
    return [" ".join(query.text[a:b].split()) for a, b in query.paragraphs]


def test_judgments_as_pdfs_index_and_rank_as_their_text(tmp_path: Path, minilm) -> None:  # noqa: ANN001
    txt, pdf = tmp_path / "txt", tmp_path / "pdf"
    txt.mkdir()
    pdf.mkdir()
    for doc_id in judgments():
        file = AILA_DIR / f"{doc_id}.txt"
        shutil.copy(file, txt / file.name)
        write_document_pdf(
            aila_document(doc_id, file.read_text(encoding="utf-8")), pdf / f"{doc_id}.pdf"
        )
    from_txt, engine_txt = searcher_over(txt, tmp_path / "data-txt", minilm)
    from_pdf, engine_pdf = searcher_over(pdf, tmp_path / "data-pdf", minilm)
    try:
        assert sorted(from_txt.index.external_ids) == sorted(from_pdf.index.external_ids)
        same = total = 0
        for doc_id in from_txt.index.external_ids:
            expected, found = paragraphs(from_txt, doc_id), paragraphs(from_pdf, doc_id)
            matcher = difflib.SequenceMatcher(a=expected, b=found, autojunk=False)
            same += sum(block.size for block in matcher.get_matching_blocks())
            total += len(expected)
        logger.info("identical paragraphs: %d of %d (%.3f)", same, total, same / total)
        assert same >= 0.95 * total

        overlaps = []
        for line in (AILA / "queries_dev.txt").read_text(encoding="utf-8").splitlines():
            qid, text = line.split("||", 1)
            source = text_document(qid, text)
            top = [
                {
                    h.document_id
                    for h in s.similar(
                        s.query_from_source(source), SimilarOptions(top_k=10)
                    ).results
                }
                for s in (from_txt, from_pdf)
            ]
            overlaps.append(len(top[0] & top[1]) / 10)
        mean = sum(overlaps) / len(overlaps)
        logger.info(
            "overlap@10: mean %.3f, min %.1f over %d queries", mean, min(overlaps), len(overlaps)
        )
        assert len(overlaps) == 20 and mean >= 0.9
    finally:
        engine_txt.dispose()
        engine_pdf.dispose()
