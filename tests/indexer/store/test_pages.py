"""A PDF's paragraph pages reach SQL when it is indexed, and /similar's paragraph pairs say on
which page the matched paragraph is; documents without pages keep NULL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from docsim.indexer.store.db import make_engine
from docsim.indexer.store.tables import documents, paragraphs
from docsim.indexer.text.corpus import SAMPLE_CORPUS, read_file
from docsim.indexer.text.documents import page_at
from docsim.protocol.choices import Method
from docsim.protocol.requests import SimilarOptions
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from tests.utils.indexes import publish
from tests.utils.pdfs import Block, write_pdf


def test_page_at_by_hand() -> None:
    pages = [[10, 1], [50, 1], [90, 2], [200, 3]]
    assert [page_at(pages, o) for o in (0, 10, 89, 90, 150, 200, 10_000)] == [
        None, 1, 1, 2, 2, 3, 3,
    ]  # fmt: skip
    assert page_at(None, 5) is None and page_at([], 5) is None


def test_an_indexed_pdf_keeps_each_paragraphs_page(tmp_path: Path, tiny_encoder_dir: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    source = read_file(SAMPLE_CORPUS / "medieval-01.md")
    text = source.text  # type: ignore[union-attr]
    blocks = [
        Block(part.lstrip("# ").strip(), heading=part.startswith("#"))
        for part in text.split("\n\n")[1:]
        if part.strip()
    ] * 3  # long enough for three pages
    starts = write_pdf(corpus / "fairs.pdf", blocks, title="Fairs")
    (corpus / "baking-01.md").write_text((SAMPLE_CORPUS / "baking-01.md").read_text())
    settings = QuerySettings(data_dir=tmp_path / "data")
    publish(corpus, settings, tiny_encoder_dir)
    engine = make_engine(settings.database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                documents.c.external_id,
                documents.c.metadata,
                paragraphs.c.char_start,
                paragraphs.c.page,
            )
            .join(documents, paragraphs.c.doc_id == documents.c.doc_id)
            .order_by(paragraphs.c.paragraph_id)
        ).all()
    pdf = [(r.char_start, r.page) for r in rows if r.external_id == "fairs"]
    expected = [page for block, page in zip(blocks, starts, strict=True) if not block.heading]
    assert max(expected) >= 3
    assert [p for _, p in pdf] == expected  # the page each paragraph was laid out on
    assert all(r.page is None for r in rows if r.external_id == "baking-01")

    searcher = open_searcher(settings, engine)
    query = searcher.query_from_index("baking-01")
    hits = searcher.similar(
        query,
        SimilarOptions(top_k=1, method=Method.sdr, candidates=["fairs"], matches_per_result=3),
    ).results
    assert hits[0].document_id == "fairs" and hits[0].matches
    by_start = dict(pdf)
    for match in hits[0].matches:
        assert match.target_page == by_start[match.target_start]
    engine.dispose()
