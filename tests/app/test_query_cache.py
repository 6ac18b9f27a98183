"""The /similar query cache: bounded by bytes and age, carried over a version swap."""

from __future__ import annotations

import time

import pytest
import torch

from docsim.app.services.query_cache import CachedQuery, QueryCache
from docsim.search.types import Query

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def posted(n_sentences: int) -> Query:
    return Query(
        text="x" * 10,
        paragraphs=[(0, 10)],
        sentence_vectors=torch.zeros(n_sentences, 100),  # 400 bytes a sentence
        paragraph_lengths=torch.tensor([n_sentences]),
        level_vectors={},
        level_spans={},
    )


def test_bounded_by_bytes_oldest_out_first() -> None:
    cache = QueryCache(max_bytes=10_000, ttl_seconds=60)
    first = cache.put(CachedQuery(posted(10), None, True))  # ~4 KB
    second = cache.put(CachedQuery(posted(10), None, True))
    third = cache.put(CachedQuery(posted(10), None, True))  # over 10 KB: the oldest goes
    assert cache.get(first) is None and cache.get(second) and cache.get(third)
    too_big = cache.put(CachedQuery(posted(100), None, True))  # larger than the whole cache
    assert cache.get(too_big) is None and cache.get(third)


def test_entries_expire() -> None:
    cache = QueryCache(max_bytes=1_000_000, ttl_seconds=0.2)
    query_id = cache.put(CachedQuery(posted(1), None, True))
    assert cache.get(query_id) is not None
    time.sleep(0.25)
    assert cache.get(query_id) is None


def test_a_new_version_adopts_and_sees_late_entries() -> None:
    old = QueryCache(max_bytes=1_000_000, ttl_seconds=60)
    by_id = old.put(CachedQuery(None, None, True, document_id="doc-1"))
    by_text = old.put(CachedQuery(posted(2), None, True))
    new = QueryCache(max_bytes=1_000_000, ttl_seconds=60)
    assert new.adopt(old, same_encoder=True) == 2
    assert new.get(by_id).document_id == "doc-1" and new.get(by_id).query is None
    assert new.get(by_text).query is old.get(by_text).query
    late = old.put(CachedQuery(posted(3), None, True))  # a request still on the old version
    assert new.get(late) is not None
    other_encoder = QueryCache(max_bytes=1_000_000, ttl_seconds=60)
    assert other_encoder.adopt(old, same_encoder=False) == 1  # posted vectors do not carry
    assert other_encoder.get(by_text) is None and other_encoder.get(by_id) is not None
