"""The passages two documents share word for word: the quotation that made a match.

A passage is a maximal common run of at least `min_words` words: words are the texts' runs of
letters and digits, compared case-folded, punctuation and spacing ignored (a judgment quoted
without its commas, or across a line break, still matches; stop words count, a quotation
holds them). Every run of `min(min_words, shingles.MAX_N)` words of each text is hashed
(`shingles.shingle_hashes` over exact word ids), a pair of equal hashes is a seed, and the
seeds on one diagonal (source word - target word) at consecutive places form one run, kept
where it is `min_words` long; each run is checked word by word. Then the longest runs are
taken first, none overlapping one already taken on either side, up to `limit` (of the
`limit * CANDIDATES_PER_PASSAGE` longest runs).

Work is bounded: a run of words that recurs more than `max_repeats` times in either text
(boilerplate, or a hostile text of one word repeated) seeds nothing, so the seeds are at most
`max_repeats` times the source's words.

Dimensions: a source words, b target words, m seeds, r runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from docsim.protocol.answers import SharedPassageOut
from docsim.search.lexical.shingles import MAX_N, shingle_hashes

WORD = re.compile(r"\w+")
MIX = np.uint64(0x9E3779B97F4A7C15)
CANDIDATES_PER_PASSAGE = 50  # runs considered, longest first, for each passage wanted


@dataclass(frozen=True)
class _Words:
    ids: np.ndarray  # (w,) int64 each word's id, shared by both texts
    starts: np.ndarray  # (w,) its first character
    ends: np.ndarray  # (w,) one past its last


def _words(text: str, vocabulary: dict[str, int]) -> _Words:
    found = list(WORD.finditer(text))
    ids = [vocabulary.setdefault(m.group().casefold(), len(vocabulary)) for m in found]
    return _Words(
        np.array(ids, np.int64),
        np.array([m.start() for m in found], np.int64),
        np.array([m.end() for m in found], np.int64),
    )


def _run_hashes(ids: np.ndarray, n: int) -> np.ndarray:
    """`(max(w - n + 1, 0),)` the hash of each run of `n` words of `ids` `(w,)`."""
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64
        mixed = (ids.astype(np.uint64) + np.uint64(1)) * MIX
        mixed ^= mixed >> np.uint64(32)
    return shingle_hashes(mixed, n)


def _seeds(source: np.ndarray, target: np.ndarray, max_repeats: int) -> np.ndarray:
    """`(m, 2)` each (source place, target place) whose run hashes are equal, those of runs
    repeated more than `max_repeats` times in either text left out."""
    keys_t, counts_t = np.unique(target, return_counts=True)
    keys_s, counts_s = np.unique(source, return_counts=True)
    keep_t = keys_t[counts_t <= max_repeats]
    keep = np.intersect1d(keep_t, keys_s[counts_s <= max_repeats], assume_unique=True)
    order_t = np.argsort(target, kind="stable")  # (b',) target places by hash
    sorted_t = target[order_t]
    places_s = np.flatnonzero(np.isin(source, keep))  # (k,) source places seeding
    wanted = source[places_s]
    begin = np.searchsorted(sorted_t, wanted, side="left")  # (k,)
    sizes = np.searchsorted(sorted_t, wanted, side="right") - begin
    total = int(sizes.sum())
    if not total:
        return np.empty((0, 2), np.int64)
    firsts = np.repeat(begin - np.r_[0, np.cumsum(sizes)[:-1]], sizes)  # (m,)
    return np.stack([np.repeat(places_s, sizes), order_t[firsts + np.arange(total)]], axis=1)


def _runs(seeds: np.ndarray) -> np.ndarray:
    """`(r, 3)` each run of seeds on one diagonal at consecutive places: its first source
    place, first target place and seeds."""
    order = np.lexsort((seeds[:, 0], seeds[:, 0] - seeds[:, 1]))  # by diagonal, then place
    s, t = seeds[order, 0], seeds[order, 1]
    breaks = np.r_[True, (s[1:] != s[:-1] + 1) | (t[1:] != t[:-1] + 1)]  # (m,)
    first = np.flatnonzero(breaks)
    return np.stack([s[first], t[first], np.diff(np.r_[first, len(s)])], axis=1)


def shared_passages(
    source_text: str,
    target_text: str,
    *,
    min_words: int = 8,
    limit: int = 20,
    max_repeats: int = 16,
) -> list[SharedPassageOut]:
    """The longest passages (at least `min_words` words) of `source_text` found word for word
    in `target_text`, at most `limit`, longest first (ties: in source order), none
    overlapping another on either side; of runs as long, the one first in the source (then
    in the target) is taken first."""
    if min_words < 1 or limit < 1 or max_repeats < 1:
        raise ValueError("min_words, limit and max_repeats are at least 1")
    vocabulary: dict[str, int] = {}
    source, target = _words(source_text, vocabulary), _words(target_text, vocabulary)
    seed = min(min_words, MAX_N)  # words of a seed
    hashes_s, hashes_t = _run_hashes(source.ids, seed), _run_hashes(target.ids, seed)
    if not len(hashes_s) or not len(hashes_t):
        return []
    seeds = _seeds(hashes_s, hashes_t, max_repeats)
    if not len(seeds):
        return []
    runs = _runs(seeds)
    runs = runs[runs[:, 2] + seed - 1 >= min_words]  # long enough
    runs = runs[np.lexsort((runs[:, 1], runs[:, 0], -runs[:, 2]))]  # longest, then by place
    runs = runs[: limit * CANDIDATES_PER_PASSAGE]  # the rest would mostly overlap these
    taken: list[SharedPassageOut] = []
    used_s: list[tuple[int, int]] = []
    used_t: list[tuple[int, int]] = []
    for s, t, seeds_in_run in runs.tolist():
        length = seeds_in_run + seed - 1
        if any(s < e and b < s + length for b, e in used_s) or any(
            t < e and b < t + length for b, e in used_t
        ):
            continue
        if not np.array_equal(source.ids[s : s + length], target.ids[t : t + length]):
            continue  # two runs of words with one hash: not a passage
        used_s.append((s, s + length))
        used_t.append((t, t + length))
        start, end = int(source.starts[s]), int(source.ends[s + length - 1])
        taken.append(
            SharedPassageOut(
                source_start=start,
                source_end=end,
                target_start=int(target.starts[t]),
                target_end=int(target.ends[t + length - 1]),
                words=length,
                text=source_text[start:end],
            )
        )
        if len(taken) == limit:
            break
    return taken
