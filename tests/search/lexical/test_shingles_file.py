"""`search.lexical.shingles_file`: shingle postings written in buckets read back as the index
built in memory (every key, posting and score); mapped by the next service; damaged or
foreign, written again; unwritable, served from memory; changed live over the mapped part."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from docsim.indexer.store.reader import document_texts
from docsim.search.lexical import shingles_file as module
from docsim.search.lexical.postings import Postings
from docsim.search.lexical.shingles import MAX_PARTS, ShingleIndex, text_shingles
from docsim.search.lexical.shingles_file import (
    bucket_count,
    load_shingles,
    shingles_folder,
    write_shingles,
)
from docsim.search.searcher import Searcher
from tests.search.lexical.test_postings_file import is_mapped
from tests.search.lexical.test_shingles import random_texts


def assert_same(read: ShingleIndex, built: ShingleIndex, queries: list[str]) -> None:
    """Every key, posting, length and score of `read` is `built`'s (one part each)."""
    (got,), (want,) = read.parts, built.parts
    for name in ("keys", "starts", "rows", "counts"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), name)
    np.testing.assert_array_equal(read.doc_ids, built.doc_ids)
    np.testing.assert_array_equal(read.lengths, built.lengths)
    for query in queries:
        np.testing.assert_array_equal(read.scores(query), built.scores(query))


def written(path: Path, texts: list[str], n: int, batch: int = 5) -> None:
    batches = (text_shingles(texts[s : s + batch], n, None) for s in range(0, len(texts), batch))
    write_shingles(path, batches, len(texts), n)


@pytest.mark.no_sql
@pytest.mark.parametrize(("n", "per_bucket"), [(1, 4096), (2, 4), (3, 1), (2, 10**6)])
def test_written_in_buckets_reads_back_as_the_index_built_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, per_bucket: int
) -> None:
    monkeypatch.setattr(module, "BUCKET_DOCUMENTS", per_bucket)  # 1 to 64 buckets
    quote = "the tenant paid rent for the land under section of the act"
    texts = [*random_texts(60, seed=n, quote=quote), "", "act"]  # some without shingles
    doc_ids = np.arange(100, 100 + len(texts), dtype=np.int64)
    built = ShingleIndex.build_sorted(doc_ids, [texts], n)
    path = tmp_path / "shingles-x"
    written(path, texts, n)
    read = load_shingles(path, doc_ids, None)
    assert read is not None and read.n == n
    assert_same(read, built, [texts[3], quote, "", "murder trial " * 20])
    assert all(is_mapped(getattr(read.parts[0], a)) for a in ("keys", "rows", "counts"))
    assert not list(tmp_path.glob(".shingles-*")) and not list(path.glob("*.bucket"))
    assert read.parts[0].rows.dtype == np.uint8  # 62 documents: a byte a row
    assert read.parts[0].starts.dtype == np.uint32  # under 2**32 postings


@pytest.mark.no_sql
def test_buckets_grow_with_the_documents() -> None:
    assert [bucket_count(d) for d in (0, 1, 4096, 4097, 291_400)] == [1, 1, 1, 2, 128]
    assert bucket_count(10**9) == module.MAX_BUCKETS


@pytest.mark.no_sql
def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    texts = random_texts(10, seed=1)
    with pytest.raises(ValueError, match="11 documents expected, 10"):
        write_shingles(tmp_path / "shingles-x", [text_shingles(texts, 2, None)], 11, 2)
    assert not list(tmp_path.iterdir())


@pytest.mark.no_sql
def test_changes_over_the_mapped_part_score_as_an_index_built_anew(tmp_path: Path) -> None:
    texts = random_texts(30, seed=5, quote="bail granted to the accused by the high court")
    doc_ids = np.arange(30, dtype=np.int64)
    written(tmp_path / "shingles-x", texts, 2)
    index = load_shingles(tmp_path / "shingles-x", doc_ids, None)
    assert index is not None
    live, next_id = dict(enumerate(texts)), 30
    for step in range(2 * MAX_PARTS):
        removed = sorted(live)[step : step + 2]
        added = [(next_id + i, t) for i, t in enumerate(random_texts(2, seed=50 + step))]
        next_id += 2
        index = index.with_changes(removed, added)
        for doc_id in removed:
            del live[doc_id]
        live.update(added)
        assert index.parts[0].keys.base is not None and len(index.parts) <= MAX_PARTS
    ids = sorted(live)
    fresh = ShingleIndex.build_sorted(np.array(ids), [[live[d] for d in ids]], 2)
    assert is_mapped(index.parts[0].keys)  # the version's part never copied into memory
    for query in (texts[0], live[ids[-1]], "bail granted to the accused"):
        np.testing.assert_allclose(index.scores(query), fresh.scores(query), rtol=1e-12)


def reference(searcher: Searcher, n: int, stemmer: str | None = None) -> ShingleIndex:
    ids = np.sort(searcher.index.doc_ids)
    texts = document_texts(searcher.context.postings.engine, ids.tolist())
    return ShingleIndex.build_sorted(ids, [[texts[d] for d in ids.tolist()]], n, stemmer)


def no_kept_shingles(index_path: Path) -> None:
    for kept in index_path.glob("shingles-*"):
        shutil.rmtree(kept)


def test_a_service_maps_the_shingles_it_wrote_and_the_next_one_maps_them_too(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, engine = searcher.index, searcher.context.postings.engine
    no_kept_shingles(index.path)
    queries = ["the court held that the appeal", "sourdough starter flour water"]
    served = Postings(index, engine, None, shingle_words=2).shingles()
    path = shingles_folder(index, 2, None)
    assert list(index.path.glob("shingles-*")) == [path]
    assert path.stat().st_mode & 0o777 == index.path.stat().st_mode & 0o777
    assert_same(served, reference(searcher, 2), queries)
    assert is_mapped(served.parts[0].keys)

    def no_write(*args: object, **kwargs: object) -> None:
        raise AssertionError("written again")

    monkeypatch.setattr(module, "write_shingles", no_write)
    monkeypatch.setattr("docsim.search.lexical.postings.write_shingles", no_write)
    assert_same(Postings(index, engine, None, 2).shingles(), reference(searcher, 2), queries)
    monkeypatch.undo()
    three = Postings(index, engine, "english", 3).shingles()  # another n and stemmer
    assert len(list(index.path.glob("shingles-*"))) == 2
    assert_same(three, reference(searcher, 3, "english"), queries)
    no_kept_shingles(index.path)


@pytest.mark.parametrize("damage", ["truncated", "bad meta", "missing", "other documents"])
def test_damaged_or_foreign_shingles_are_written_again(searcher: Searcher, damage: str) -> None:
    index, engine = searcher.index, searcher.context.postings.engine
    no_kept_shingles(index.path)
    Postings(index, engine, None).shingles()
    path = shingles_folder(index, 2, None)
    if damage == "other documents":
        shutil.rmtree(path)
        written(path, ["bread and stone", "stone and bread"], 2)
    elif damage == "truncated":
        rows = path / "rows.bin"
        rows.write_bytes(rows.read_bytes()[:-1])
    elif damage == "bad meta":
        (path / "meta.json").write_text("{")
    else:
        (path / "keys.bin").unlink()
    expected = reference(searcher, 2)
    assert_same(Postings(index, engine, None).shingles(), expected, ["the court held"])
    again = load_shingles(path, np.sort(index.doc_ids), None)
    assert again is not None
    assert_same(again, expected, ["the court held"])
    no_kept_shingles(index.path)


def test_unwritable_shingles_are_served_from_memory(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    index, engine = searcher.index, searcher.context.postings.engine
    no_kept_shingles(index.path)
    monkeypatch.setattr(module.tempfile, "mkdtemp", refused)
    served = Postings(index, engine, None).shingles()
    assert_same(served, reference(searcher, 2), ["the court held that"])
    assert not is_mapped(served.parts[0].keys)
    assert not list(index.path.glob("shingles-*")) and not list(index.path.glob(".shingles-*"))


def test_another_layout_revision_length_or_stemmer_names_another_folder(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = shingles_folder(searcher.index, 2, None)
    assert named == shingles_folder(searcher.index, 2, None)
    assert named != shingles_folder(searcher.index, 3, None)
    assert named != shingles_folder(searcher.index, 2, "english")
    monkeypatch.setattr(searcher.index, "revision", searcher.index.revision + 1)
    assert named != shingles_folder(searcher.index, 2, None)
    monkeypatch.undo()
    monkeypatch.setattr(module, "FORMAT", module.FORMAT + 1)
    assert named != shingles_folder(searcher.index, 2, None)
