"""`search.lexical.postings_file`: BM25 document postings built once are read back by the
next service, the same index; damaged, they are built again; unwritable, served anyway."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from docsim.indexer.text.corpus import SAMPLE_CORPUS, read_corpus
from docsim.search.lexical import postings_file as module
from docsim.search.lexical.bm25 import Bm25Index
from docsim.search.lexical.postings import Postings
from docsim.search.lexical.postings_file import load_postings, postings_file, save_postings
from docsim.search.searcher import Searcher

TEXTS = [doc.text for doc in read_corpus(SAMPLE_CORPUS)]
BASE = 3 << 40  # a version's first id


def assert_same_index(read: Bm25Index, built: Bm25Index) -> None:
    """Every posting, forward entry, length and score of `read` is `built`'s."""
    assert read._postings.keys() == built._postings.keys()
    for token, (_, counts) in built._postings.items():
        np.testing.assert_array_equal(read.holders(token), built.holders(token), token)
        np.testing.assert_array_equal(read._postings[token][1], counts, token)
    assert read.doc_ids.tolist() == built.doc_ids.tolist()
    assert read._lengths == built._lengths
    assert {d: read.term_counts(d) for d in built._lengths} == {
        d: built.term_counts(d) for d in built._lengths
    }
    for query in [*TEXTS[:4], "sourdough starter flour water", "the of and"]:
        np.testing.assert_array_equal(read.scores(query), built.scores(query))


@pytest.mark.no_sql
@pytest.mark.parametrize("stemmer", [None, "english"])
def test_saved_postings_read_back_as_the_index_they_were(tmp_path: Path, stemmer) -> None:
    ids = [BASE + 2 * i for i in range(len(TEXTS))]
    built = Bm25Index.build(ids, TEXTS, stemmer)
    # a changed index: a removed document, an added one, and one below the base (its
    # postings signed and wide beside narrow ones)
    changed = built.with_changes([BASE], [(BASE + 999, "zeppelin bakery"), (5, TEXTS[0])])
    empty = Bm25Index.build([], [], stemmer)
    for name, index in {"built": built, "changed": changed, "empty": empty}.items():
        path = tmp_path / f"bm25-{name}.npz"
        save_postings(path, index)
        read = load_postings(path, stemmer)
        assert read is not None
        assert_same_index(read, index)
        assert read.stemmer == stemmer
        assert not list(tmp_path.glob(".bm25-*.tmp"))  # written atomically
    with np.load(tmp_path / "bm25-built.npz") as saved:  # a version's ids: 2 bytes a posting
        assert saved["posting_ids"].dtype == np.uint16
    with np.load(tmp_path / "bm25-changed.npz") as saved:  # one below the base: all wide
        assert saved["posting_ids"].dtype == np.int64


def test_a_service_reads_the_postings_a_service_before_it_built(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, engine = searcher.index, searcher.context.postings.engine
    for kept in index.path.glob("bm25-*.npz"):
        kept.unlink()
    built = Postings(index, engine, None).documents()
    path = postings_file(index, None)
    assert list(index.path.glob("bm25-*.npz")) == [path]

    def no_build(*args: object, **kwargs: object) -> Bm25Index:
        raise AssertionError("built again")

    monkeypatch.setattr(Bm25Index, "build_sorted", no_build)
    assert_same_index(Postings(index, engine, None).documents(), built)
    monkeypatch.undo()
    stemmed = Postings(index, engine, "english").documents()  # another stemmer: another file
    assert len(list(index.path.glob("bm25-*.npz"))) == 2
    assert stemmed._postings.keys() != built._postings.keys()
    for kept in index.path.glob("bm25-*.npz"):
        kept.unlink()


@pytest.mark.parametrize("damage", ["truncated", "not a zip", "other documents"])
def test_damaged_or_foreign_postings_are_built_again(searcher: Searcher, damage: str) -> None:
    index, engine = searcher.index, searcher.context.postings.engine
    built = Postings(index, engine, None).documents()
    path = postings_file(index, None)
    data = path.read_bytes()
    if damage == "other documents":  # a whole index, of other documents, under this key
        save_postings(path, Bm25Index.build([1, 2], ["bread", "stone"]))
    else:
        path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"neither")
    again = Postings(index, engine, None).documents()
    assert_same_index(again, built)
    kept_again = load_postings(path, None)  # kept again
    assert kept_again is not None
    assert_same_index(kept_again, built)
    path.unlink()


def test_unwritable_postings_are_served_anyway(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    index, engine = searcher.index, searcher.context.postings.engine
    for kept in index.path.glob("bm25-*.npz"):
        kept.unlink()
    monkeypatch.setattr(np, "savez", refused)
    served = Postings(index, engine, None).documents()
    assert served.n_documents == index.n_documents
    assert not list(index.path.glob("bm25-*")) and not list(index.path.glob(".bm25-*"))


def test_another_layout_revision_or_stemmer_names_another_file(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = postings_file(searcher.index, None)
    assert named == postings_file(searcher.index, None)
    assert named != postings_file(searcher.index, "english")
    monkeypatch.setattr(searcher.index, "revision", searcher.index.revision + 1)
    assert named != postings_file(searcher.index, None)
    monkeypatch.undo()
    monkeypatch.setattr(module, "FORMAT", module.FORMAT + 1)
    assert named != postings_file(searcher.index, None)
