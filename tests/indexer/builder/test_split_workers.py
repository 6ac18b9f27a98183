from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from docsim.indexer.builder.split_workers import BATCH_DOCUMENTS, split_all
from docsim.indexer.text.corpus import read_corpus
from docsim.indexer.text.documents import Document, Skipped, SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def test_a_splitter_pickles_as_its_parameters(splitter: SentenceSplitter) -> None:
    text = "Mr. Rao appealed on 3 Jan. 1990. The High Court dismissed it. No. 5 was heard."
    copy = pickle.loads(pickle.dumps(splitter))
    assert copy.sha256 == splitter.sha256 and copy.spans(text) == splitter.spans(text)


@pytest.mark.parametrize("in_process_seconds", [0.0, 0.01])  # one document here, or a few
def test_workers_split_as_this_process_does_in_order(
    sample_corpus: Path, splitter: SentenceSplitter, in_process_seconds: float
) -> None:
    items: list[SourceDocument | Skipped] = list(read_corpus(sample_corpus))
    items.insert(5, Skipped("broken.pdf", "not a PDF"))
    items.insert(2 * BATCH_DOCUMENTS + 1, SourceDocument(doc_id="blank", title="", text=" "))
    reference = [  # the plain loop, in this process
        item if isinstance(item, Skipped) else split_document(item, splitter)
        for item in items
        if not (isinstance(item, SourceDocument) and item.doc_id == "blank")
    ]

    split = list(split_all(items, splitter, workers=2, in_process_seconds=in_process_seconds))

    assert [s for s in split if not (isinstance(s, Skipped) and s.ref == "blank")] == reference
    assert Skipped("blank", "no sentences") in split
    assert sum(isinstance(s, Document) for s in split) == len(items) - 2


def test_an_error_in_a_worker_reaches_the_caller(splitter: SentenceSplitter) -> None:
    items: list = [SourceDocument(doc_id=f"d{i}", title="", text="One. Two.") for i in range(20)]
    items[12] = 12  # not a document: the worker's split_document fails on it
    with pytest.raises(AttributeError, match="text"):
        list(split_all(items, splitter, workers=2, in_process_seconds=0))


def test_a_split_out_of_time_skips_its_document_not_the_build(
    splitter: SentenceSplitter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stalled(text: str) -> list[tuple[int, int]]:
        if "stalled" in text:
            raise TimeoutError("regular-expression match exceeded its 5.0s time limit")
        return SentenceSplitter.spans(splitter, text)

    monkeypatch.setattr(splitter, "spans", stalled)
    items: list[SourceDocument | Skipped] = [
        SourceDocument(doc_id="ok", title="", text="One. Two."),
        SourceDocument(doc_id="bad", title="", text="This stalled."),
    ]

    split = list(split_all(items, splitter, workers=1, in_process_seconds=60))

    assert isinstance(split[0], Document)
    assert isinstance(split[1], Skipped) and split[1].ref == "bad"
    assert "ran out of time" in split[1].reason
