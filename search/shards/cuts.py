"""A loaded version cut into shards (`search.shards.shard.SdrShard`) of about equal sentence
counts: a query's work on a shard is proportional to its sentences."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from docsim.models.kernels.alignment import document_sentence_lengths
from docsim.models.kernels.scan import ScanRows
from docsim.models.kernels.scoring import RaggedCollection
from docsim.search.served.sentence_scan import ScanShape, scan_basis, scan_rows
from docsim.search.shards.shard import SEARCHED_ON_SHARDS, SdrShard

if TYPE_CHECKING:  # a shard actor imports this module: no SQL in its process
    from docsim.search.served.loaded_index import LoadedIndex


def shard_ranges(sentence_counts: np.ndarray, n: int) -> list[int]:
    """Cut points `[0, ..., D]` of `n` contiguous ranges holding about equal numbers of
    sentences (`sentence_counts` `(D,)`): the work of a query is proportional to them. Every
    range holds at least one document when there are `n` of them."""
    total = len(sentence_counts)
    prefix = np.concatenate([[0], np.cumsum(sentence_counts)])  # (D + 1,)
    cuts = [0]
    for i in range(1, n):
        target = prefix[-1] * i / n
        cut = int(np.argmin(np.abs(prefix - target)))
        cut = max(cut, cuts[-1] + 1) if total >= n else max(cut, cuts[-1])
        cuts.append(min(cut, total - (n - i)) if total >= n else cut)
    return [*cuts, total]


@dataclass(frozen=True)
class ShardRange:
    """One shard's documents `[first, stop)` and its rows `[start, stop)` of each unit level."""

    first: int
    stop: int
    rows: dict[str, tuple[int, int]]


def shard_cuts(index: LoadedIndex, n: int) -> list[ShardRange]:
    """A loaded version's `n` shards, by about equal sentence counts: a document's units are
    one run of rows at every level (`LoadedIndex.doc_unit_start`)."""
    start = index.doc_unit_start  # each level's (D + 1,)
    cuts = shard_ranges(np.diff(start["sentence"]), n)
    return [
        ShardRange(d0, d1, {level: (int(s[d0]), int(s[d1])) for level, s in start.items()})
        for d0, d1 in zip(cuts[:-1], cuts[1:], strict=True)
    ]


def shards_of(
    index: LoadedIndex, tiebreak: np.ndarray, n: int, scan: ScanShape | None = None
) -> list[SdrShard]:
    """A loaded version cut into `n` shards of about equal sentence counts (views of its
    tensors: nothing is copied), each with its rows of the levels searched on shards, and
    its sentences compressed as `scan` says (None: not compressed), on the basis fitted on the
    whole collection's."""
    collection = index.collection
    basis = scan_basis(index.vectors["sentence"], scan) if scan is not None else None
    shards = []
    for cut in shard_cuts(index, n):
        (p0, p1), (s0, s1) = cut.rows["paragraph"], cut.rows["sentence"]
        part = RaggedCollection(
            sentences=collection.sentences[s0:s1],
            paragraph_lengths=collection.paragraph_lengths[p0:p1],
            document_lengths=collection.document_lengths[cut.first : cut.stop],
        )
        units = {
            level: (index.vectors[level][r0:r1], r0)
            for level, (r0, r1) in cut.rows.items()
            if level in SEARCHED_ON_SHARDS and level != "sentence"
        }
        tie = tiebreak[cut.first : cut.stop]
        shards.append(
            SdrShard(
                part,
                cut.first,
                tie,
                first_sentence=s0,
                units=units,
                scan=compressed(part, scan, basis),
            )
        )
    return shards


def compressed(
    collection: RaggedCollection, shape: ScanShape | None, basis: torch.Tensor | None
) -> ScanRows | None:
    """A shard's sentences compressed as `shape` says, projected on `basis` (the whole
    collection's `scan_basis`; None: not compressed, or no sentences)."""
    if shape is None or basis is None or not len(collection.sentences):
        return None
    lengths = document_sentence_lengths(collection).numpy()  # (D_s,)
    return scan_rows(collection.sentences, lengths, shape, basis)
