"""A compressed unit level built on its first search, for a level the default methods never
search: at a hundred times AILA the paragraph level's scan is 1.65 GB and 26 s of the start,
which only explicit paragraph searches (`units`, the neighbour candidates) would use."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import numpy as np

from docsim.indexer.store.vector_index import Hits
from docsim.search.served.sentence_scan import ScanShape, SentenceScan

if TYPE_CHECKING:
    from docsim.search.served.loaded_index import LoadedIndex

logger = logging.getLogger(__name__)


class LazyScan:
    """`SentenceScan.of_index(index, shape, level)`, built under a lock by the first search
    (a search meanwhile waits for it), then searched as the scan is."""

    def __init__(
        self,
        index: LoadedIndex,
        shape: ScanShape,
        level: str,
        built: SentenceScan | None = None,
    ) -> None:
        self.index = index
        self.shape = shape
        self.level = level
        self._built = built
        self._lock = threading.Lock()

    def get(self) -> SentenceScan:
        """The scan, built now if no search built it before."""
        with self._lock:
            if self._built is None:
                logger.info("Compressing the %s level on its first search", self.level)
                self._built = SentenceScan.of_index(self.index, self.shape, self.level)
            return self._built

    @property
    def built(self) -> bool:
        return self._built is not None

    def search(self, queries: np.ndarray, k: int, within: np.ndarray | None = None) -> list[Hits]:
        return self.get().search(queries, k, within)

    @property
    def count(self) -> int:
        return len(self.index.ids[self.level])

    def ids(self) -> np.ndarray:
        """`(R,)` the units' ids, ascending (as `FaissIndex.ids`)."""
        found: np.ndarray = self.index.ids[self.level]
        return found

    def memory_bytes(self) -> int:
        """The built scan's bytes; 0 before its first search."""
        return self._built.memory_bytes() if self._built is not None else 0

    def changed(self, old: LoadedIndex, new: LoadedIndex) -> LazyScan:
        """This level for `new` (`old` with a document change applied): the built scan
        changed (`SentenceScan.changed`), or still built on the first search."""
        with self._lock:
            built = self._built
        if built is None:
            return LazyScan(new, self.shape, self.level)
        return LazyScan(new, self.shape, self.level, built.changed(old, new))
