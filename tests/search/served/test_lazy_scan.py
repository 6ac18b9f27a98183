"""`search.served.lazy_scan`: a compressed unit level built on its first search searches as
the scan built at start does, is built once under concurrent searches, and is deferred only
where every default query takes its candidates from the cells."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from docsim.indexer.settings import DatabaseSettings
from docsim.search.searcher import Searcher
from docsim.search.served.lazy_scan import LazyScan
from docsim.search.served.sentence_scan import ScanShape, SentenceScan
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings

SHAPE = ScanShape(dimensions=16, group=0, seed=0)


def probes(searcher: Searcher) -> np.ndarray:
    """`(m, d)` float32 paragraph vectors of the collection, as queries."""
    rows = searcher.index.vectors["paragraph"]
    return np.asarray(rows[np.arange(0, len(rows), max(1, len(rows) // 6))], np.float32)


def assert_same_hits(found: list, expected: list) -> None:
    assert len(found) == len(expected)
    for a, b in zip(found, expected, strict=True):
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_array_equal(a.scores, b.scores)


def test_a_lazy_scan_is_built_on_its_first_search_and_searches_as_the_scan(
    searcher: Searcher,
) -> None:
    index = searcher.index
    eager = SentenceScan.of_index(index, SHAPE, "paragraph")
    lazy = LazyScan(index, SHAPE, "paragraph")
    assert not lazy.built and lazy.memory_bytes() == 0
    assert lazy.count == eager.count and np.array_equal(lazy.ids(), eager.ids())
    within = index.ids["paragraph"][::3]
    assert_same_hits(lazy.search(probes(searcher), 5), eager.search(probes(searcher), 5))
    assert lazy.built and lazy.memory_bytes() == eager.memory_bytes()
    assert_same_hits(
        lazy.search(probes(searcher), 5, within), eager.search(probes(searcher), 5, within)
    )


def test_concurrent_first_searches_build_it_once(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = searcher.index
    expected = SentenceScan.of_index(index, SHAPE, "paragraph").search(probes(searcher), 5)
    builds = []
    original = SentenceScan.of_index

    def counted(*args, **kwargs) -> SentenceScan:  # noqa: ANN002, ANN003
        builds.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(SentenceScan, "of_index", counted)
    lazy = LazyScan(index, SHAPE, "paragraph")
    results: list = []
    start = threading.Barrier(8)

    def search() -> None:
        start.wait()
        results.append(lazy.search(probes(searcher), 5))

    threads = [threading.Thread(target=search) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len(results) == 8
    for found in results:
        assert_same_hits(found, expected)


def test_a_change_keeps_an_unbuilt_level_unbuilt_and_changes_a_built_one(
    searcher: Searcher,
) -> None:
    index = searcher.index
    unbuilt = LazyScan(index, SHAPE, "paragraph").changed(index, index)
    assert not unbuilt.built and unbuilt.index is index
    lazy = LazyScan(index, SHAPE, "paragraph")
    expected = lazy.search(probes(searcher), 5)
    changed = lazy.changed(index, index)
    assert changed.built
    assert_same_hits(changed.search(probes(searcher), 5), expected)


@pytest.mark.parametrize(
    ("search", "deferred"),
    [
        (SearchSettings(sentence_store="compressed"), False),  # a small collection: built
        (SearchSettings(sentence_store="compressed", exhaustive={"max_sentences": 10}), True),
        (  # every query above the limit, but candidates from the paragraph neighbours
            SearchSettings(
                sentence_store="compressed",
                exhaustive={"max_sentences": 10},
                candidates={"generator": "neighbours"},
            ),
            False,
        ),
    ],
)
def test_the_paragraph_scan_waits_only_where_no_default_query_reads_it(
    searcher: Searcher, search: SearchSettings, deferred: bool
) -> None:
    url = searcher.engine.url.render_as_string(hide_password=False)
    settings = QuerySettings(
        data_dir=Path(searcher.index.path).parents[1], db=DatabaseSettings(url=url), search=search
    )
    served = open_searcher(settings, searcher.engine)
    paragraph = served.unit_scans["paragraph"]
    assert isinstance(paragraph, LazyScan) is deferred
    assert served.context.scan is not None  # the sentence level: always built
    if isinstance(paragraph, LazyScan):
        assert not paragraph.built
        assert served.vector_sizes()["paragraph"][1] == 0
