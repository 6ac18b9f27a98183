"""`search.lexical.postings_file`: BM25 document postings built once are read back by the
next service, the same index; damaged, they are built again; unwritable, served anyway."""

from __future__ import annotations

import mmap
import shutil
from pathlib import Path

import numpy as np
import pytest

from docsim.indexer.store.reader import document_texts
from docsim.indexer.text.corpus import SAMPLE_CORPUS, read_corpus
from docsim.search.lexical import postings_file as module
from docsim.search.lexical.bm25 import Bm25Index
from docsim.search.lexical.postings import Postings
from docsim.search.lexical.postings_file import load_postings, postings_file, save_postings
from docsim.search.searcher import Searcher

TEXTS = [doc.text for doc in read_corpus(SAMPLE_CORPUS)]
BASE = 3 << 40  # a version's first id


def is_mapped(array: np.ndarray) -> bool:
    """Whether `array` is a view of a mapped file."""
    found: object = array
    while found is not None:
        if isinstance(found, (np.memmap, mmap.mmap)):
            return True
        found = getattr(found, "base", None)
    return False


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
        path = tmp_path / f"bm25-{name}"
        assert save_postings(path, index)
        read = load_postings(path, stemmer)
        assert read is not None
        assert_same_index(read, index)
        assert read.stemmer == stemmer
        assert not list(tmp_path.glob(".bm25-*"))  # written atomically
        assert not save_postings(path, index)  # kept already: left as it is
    read = load_postings(tmp_path / "bm25-built", stemmer)
    assert read is not None
    assert is_mapped(read._postings["court"][0]) and is_mapped(read._terms[BASE])
    assert not is_mapped(read.doc_ids) and not is_mapped(built._postings["court"][0])
    assert np.load(tmp_path / "bm25-built" / "posting_ids.npy").dtype == np.uint16  # offsets
    assert np.load(tmp_path / "bm25-changed" / "posting_ids.npy").dtype == np.int64  # below


def reference(searcher: Searcher, stemmer: str | None = None) -> Bm25Index:
    """BM25 built over the version's texts read from SQL, the plain way."""
    ids = searcher.index.doc_ids.tolist()
    texts = document_texts(searcher.context.postings.engine, ids)
    return Bm25Index.build(ids, [texts[d] for d in ids], stemmer)


def no_kept_postings(index_path: Path) -> None:
    for kept in index_path.glob("bm25-*"):
        shutil.rmtree(kept)


def test_a_service_maps_the_postings_it_built_and_the_next_one_maps_them_too(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, engine = searcher.index, searcher.context.postings.engine
    no_kept_postings(index.path)
    expected = reference(searcher)
    built = Postings(index, engine, None).documents()
    path = postings_file(index, None)
    assert list(index.path.glob("bm25-*")) == [path]
    assert path.stat().st_mode & 0o777 == index.path.stat().st_mode & 0o777  # not 0700
    assert_same_index(built, expected)
    assert is_mapped(next(iter(built._postings.values()))[0])  # served mapped

    def no_build(*args: object, **kwargs: object) -> Bm25Index:
        raise AssertionError("built again")

    monkeypatch.setattr(Bm25Index, "build_sorted", no_build)
    assert_same_index(Postings(index, engine, None).documents(), expected)
    monkeypatch.undo()
    stemmed = Postings(index, engine, "english").documents()  # another stemmer: another folder
    assert len(list(index.path.glob("bm25-*"))) == 2
    assert_same_index(stemmed, reference(searcher, "english"))
    no_kept_postings(index.path)


@pytest.mark.parametrize("damage", ["truncated", "not an array", "missing", "other documents"])
def test_damaged_or_foreign_postings_are_built_again(searcher: Searcher, damage: str) -> None:
    index, engine = searcher.index, searcher.context.postings.engine
    no_kept_postings(index.path)
    expected = reference(searcher)
    Postings(index, engine, None).documents()
    path = postings_file(index, None)
    flat = path / "posting_ids.npy"
    if damage == "other documents":  # a whole index, of other documents, under this key
        shutil.rmtree(path)
        save_postings(path, Bm25Index.build([1, 2], ["bread", "stone"]))
    elif damage == "truncated":
        flat.write_bytes(flat.read_bytes()[: flat.stat().st_size // 2])
    elif damage == "not an array":
        (path / "doc_ids.npy").write_bytes(b"neither")
    else:
        (path / "lengths.npy").unlink()
    assert_same_index(Postings(index, engine, None).documents(), expected)
    kept_again = load_postings(path, None)  # replaced by the postings built
    assert kept_again is not None
    assert_same_index(kept_again, expected)
    no_kept_postings(index.path)


def test_unwritable_postings_are_served_anyway(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    index, engine = searcher.index, searcher.context.postings.engine
    no_kept_postings(index.path)
    monkeypatch.setattr(np, "save", refused)
    served = Postings(index, engine, None).documents()
    assert_same_index(served, reference(searcher))
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
