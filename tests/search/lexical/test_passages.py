"""Shared passages against a plain reference: every maximal common run of words found by
dynamic programming over the two word lists, the same greedy choice; the work bound holds on
hostile texts."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from docsim.protocol.answers import SharedPassageOut
from docsim.search.lexical.passages import _run_hashes, _seeds, shared_passages

WORDS = "the court held that appeal section act bail granted accused tenant rent".split()


def reference(source: str, target: str, min_words: int, limit: int) -> list[SharedPassageOut]:
    """Maximal common runs of case-folded words (O(a * b)), longest first, none overlapping
    one taken on either side."""

    a = [(m.group().casefold(), m.start(), m.end()) for m in re.finditer(r"\w+", source)]
    b = [(m.group().casefold(), m.start(), m.end()) for m in re.finditer(r"\w+", target)]
    runs = []
    previous = [0] * (len(b) + 1)
    for i in range(len(a)):
        current = [0] * (len(b) + 1)
        for j in range(len(b)):
            if a[i][0] == b[j][0]:
                current[j + 1] = previous[j] + 1
        for j in range(len(b)):
            length = current[j + 1]
            ends_here = not (i + 1 < len(a) and j + 1 < len(b) and a[i + 1][0] == b[j + 1][0])
            if length >= min_words and ends_here:
                runs.append((length, i - length + 1, j - length + 1))
        previous = current
    runs.sort(key=lambda r: (-r[0], r[1], r[2]))
    taken, used_a, used_b = [], [], []
    for length, s, t in runs:
        if any(s < e and x < s + length for x, e in used_a):
            continue
        if any(t < e and x < t + length for x, e in used_b):
            continue
        used_a.append((s, s + length))
        used_b.append((t, t + length))
        start, end = a[s][1], a[s + length - 1][2]
        taken.append(
            SharedPassageOut(
                source_start=start,
                source_end=end,
                target_start=b[t][1],
                target_end=b[t + length - 1][2],
                words=length,
                text=source[start:end],
            )
        )
        if len(taken) == limit:
            break
    return taken


def text(rng: random.Random, words: int, quotes: list[str]) -> str:
    out = [rng.choice(WORDS) for _ in range(words)]
    for quote in quotes:
        at = rng.randrange(len(out) + 1)
        out[at:at] = [quote]
    return " ".join(out)


@pytest.mark.no_sql
@pytest.mark.parametrize("seed", range(6))
def test_passages_equal_the_maximal_common_runs_of_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    quotes = [
        "No person shall be deprived of his life or personal liberty except by law",
        "the landlord may evict a tenant who has not paid the rent for six months",
    ]
    source = text(rng, 200, quotes)
    target = text(rng, 150, [q.upper().replace(" ", ",\n ") for q in quotes])  # marks, case
    for min_words, limit in ((3, 100), (4, 5), (8, 20), (12, 20)):
        found = shared_passages(source, target, min_words=min_words, limit=limit, max_repeats=10**6)
        assert found == reference(source, target, min_words, limit)
    longest = shared_passages(source, target, min_words=8)
    assert all(p.words >= 14 for p in longest[:2])  # both quotations (and any word beside)


@pytest.mark.no_sql
def test_a_quotation_is_found_across_punctuation_and_line_breaks() -> None:
    quote = "no person shall be deprived of his life or personal liberty"
    source = f"As the Constitution says, {quote}, and so the appeal fails."
    target = "Article 21: No person shall be deprived\nof his life, or personal liberty; except"
    (passage,) = shared_passages(source, target, min_words=5)
    assert source[passage.source_start : passage.source_end] == quote
    assert target[passage.target_start : passage.target_end].startswith("No person")
    assert passage.words == 11
    assert shared_passages(source, "nothing in common here at all", min_words=5) == []
    assert shared_passages("", target) == [] and shared_passages(source, "") == []
    with pytest.raises(ValueError, match="at least 1"):
        shared_passages(source, target, min_words=0)


@pytest.mark.no_sql
def test_repeated_runs_seed_nothing_and_the_work_stays_bounded() -> None:
    hostile = "the " * 200_000
    # one run of 8 words, everywhere: 4 * 10**10 pairs of places, none a seed
    assert shared_passages(hostile, hostile, min_words=8) == []
    ids = np.arange(40, dtype=np.int64) % 5  # a run of 5 words, 8 times
    hashes = _run_hashes(ids, 3)  # (38,) 5 runs of 3 words, each 7 or 8 times
    counts = np.unique(hashes, return_counts=True)[1]
    assert sorted(counts.tolist()) == [7, 7, 8, 8, 8]
    for max_repeats in (1, 7, 8, 100):  # every pair of places of each run kept, at most
        seeds = _seeds(hashes, hashes, max_repeats)  # `max_repeats` per source place
        assert len(seeds) == sum(int(c) ** 2 for c in counts if c <= max_repeats)
        assert len(seeds) <= max_repeats * len(hashes)
    quote = "the tenant paid the rent due for the land under the act"
    rare = shared_passages(hostile + quote, quote + hostile, min_words=8)
    assert [p.words for p in rare] == [11]
