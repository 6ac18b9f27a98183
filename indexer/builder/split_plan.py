"""Stage 1's output on disk: the split documents of a build, in the blocks they are encoded in.

A build splits every document before it encodes any: the plan's fingerprint (what a resumed
build checks), the int8 calibration sample and the progress bar's total all need the whole
corpus. Holding the split documents in memory until the build ends made a build's peak RSS
grow with the corpus (about 0.5 GiB for AILA's 2,914 judgments, three times that for a corpus
three times larger). `SplitPlan.write` instead splits the source in one streaming pass and
pickles each block of `block_documents` documents to its own file in a scratch folder; only
the per-document sentence counts stay in memory. The stages that follow read the blocks back
one at a time (`blocks`, `documents`), or a few documents by position (`__getitem__`).

The files are this build's own scratch, written and read by the same process, and removed with
the folder when the build ends (`remove`, or `remove_stale` for a build that was killed).
"""

from __future__ import annotations

import logging
import pickle
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import overload

from tqdm import tqdm

from docsim.indexer.builder.split_workers import IN_PROCESS_SECONDS, split_all
from docsim.indexer.text.documents import Document, Skipped, SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter

logger = logging.getLogger(__name__)

PLAN_PREFIX = ".plan-"


class SplitPlan(Sequence[Document]):
    """The split documents of one build, in order, stored a block per file.

    Attributes:
        folder: the scratch folder holding `<block>.pickle` files.
        block_documents: documents per block (the last block may hold fewer).
        sentence_counts: `(n_documents,)` sentences of each document, in order.
        skipped: the inputs that were not indexed, and why.
    """

    def __init__(
        self,
        folder: Path,
        block_documents: int,
        sentence_counts: list[int],
        skipped: list[Skipped],
    ) -> None:
        self.folder = folder
        self.block_documents = block_documents
        self.sentence_counts = sentence_counts
        self.skipped = skipped
        self._cached: tuple[int, list[Document]] | None = None  # the last block read
        self._written = 0  # blocks written so far by `write`

    @classmethod
    def write(
        cls,
        source: Iterable[SourceDocument | Skipped],
        splitter: SentenceSplitter,
        parent: Path,
        *,
        block_documents: int,
        show_progress: bool,
        workers: int = 1,
        in_process_seconds: float = IN_PROCESS_SECONDS,
    ) -> SplitPlan:
        """Split every document of `source` (a corpus reader, or stored documents) into a new
        scratch folder under `parent`, a block of `block_documents` at a time; after the first
        `in_process_seconds` of splitting, in `workers` processes (`split_workers.split_all`).
        An empty plan (nothing indexable) is valid; the caller decides what that means."""
        folder = Path(tempfile.mkdtemp(prefix=PLAN_PREFIX, dir=parent))
        plan = cls(folder, block_documents, [], [])
        block: list[Document] = []
        split = split_all(source, splitter, workers=workers, in_process_seconds=in_process_seconds)
        try:
            for doc in tqdm(split, desc="split", unit="doc", disable=not show_progress):
                if isinstance(doc, Skipped):
                    plan.skipped.append(doc)
                    continue
                block.append(doc)
                plan.sentence_counts.append(doc.counts()["sentence"])
                if len(block) == block_documents:
                    plan._dump(block)
                    block = []
            if block:
                plan._dump(block)
        except BaseException:
            plan.remove()
            raise
        for skip in plan.skipped:
            logger.warning("Skipped %s: %s", skip.ref, skip.reason)
        return plan

    @staticmethod
    def remove_stale(parent: Path) -> None:
        """Remove the scratch folders that builds killed before their cleanup left in
        `parent`; call it while holding the build lock, so that none of them is in use."""
        for stale in parent.glob(f"{PLAN_PREFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self._cached = None

    @property
    def n_blocks(self) -> int:
        return -(-len(self.sentence_counts) // self.block_documents)

    @property
    def n_sentences(self) -> int:
        return sum(self.sentence_counts)

    def sentences_before(self, block: int) -> int:
        """The sentences of the blocks before `block`."""
        return sum(self.sentence_counts[: block * self.block_documents])

    def block(self, number: int) -> list[Document]:
        """The documents of block `number` (read from disk; the last one read is kept)."""
        if self._cached is None or self._cached[0] != number:
            if not 0 <= number < self.n_blocks:
                raise IndexError(f"block {number} of {self.n_blocks}")
            with self._path(number).open("rb") as file:
                self._cached = (number, pickle.load(file))
        return self._cached[1]

    def blocks(self, start: int = 0) -> Iterator[list[Document]]:
        """The blocks from `start` on, in order, each read when it is reached."""
        for number in range(start, self.n_blocks):
            with self._path(number).open("rb") as file:
                yield pickle.load(file)

    def documents(self) -> Iterator[Document]:
        """Every document, in order, a block in memory at a time."""
        for block in self.blocks():
            yield from block

    def __len__(self) -> int:
        return len(self.sentence_counts)

    def __iter__(self) -> Iterator[Document]:
        return self.documents()

    @overload
    def __getitem__(self, index: int) -> Document: ...

    @overload
    def __getitem__(self, index: slice) -> list[Document]: ...

    def __getitem__(self, index: int | slice) -> Document | list[Document]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"document {index} of {len(self)}")
        number, offset = divmod(index, self.block_documents)
        return self.block(number)[offset]

    def _path(self, number: int) -> Path:
        return self.folder / f"{number:06d}.pickle"

    def _dump(self, block: list[Document]) -> None:
        with self._path(self._written).open("wb") as file:
            pickle.dump(block, file, protocol=pickle.HIGHEST_PROTOCOL)
        self._written += 1
