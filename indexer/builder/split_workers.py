"""Stage 1's sentence splitting in worker processes.

Punkt is pure Python: AILA's 2,914 judgments take 38 s to split on one core, and a build
splits every document before it encodes the first (`SplitPlan`). On a GPU, whose encode stage
is short, that is a fifth of the build. `split_all` splits a stream of documents in order,
here at first, then in a pool of spawned processes (they import the splitter, not torch) once
splitting here has taken `in_process_seconds`: a corpus split within them (most test corpora,
small collections) never pays for starting the workers. At most `2 * workers` batches are in
flight, so the memory held does not grow with the corpus.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor

from docsim.indexer.errors import EmptyDocumentError
from docsim.indexer.text.documents import Document, Skipped, SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document

BATCH_DOCUMENTS = 8  # documents per task: large enough that pickling them costs little
MAX_WORKERS = 8
# Seconds of splitting done here before any worker starts: a corpus split within them costs
# less than starting the workers would (each imports NLTK: about a second of a core).
IN_PROCESS_SECONDS = 2.0

Item = SourceDocument | Skipped
Split = Document | Skipped


def default_workers() -> int:
    """One worker per core this process may run on, at most `MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def split_one(item: Item, splitter: SentenceSplitter) -> Split:
    """`item` split, or why it is not indexed: a skipped input as it came, a document without
    sentences, or one whose splitting ran out of NLTK's time."""
    if isinstance(item, Skipped):
        return item
    try:
        return split_document(item, splitter)
    except EmptyDocumentError:
        return Skipped(_ref(item), "no sentences")
    except TimeoutError as error:
        # NLTK's own budget on one regular-expression match: splitting reads bounded segments,
        # so only a machine stalled for seconds gets here. One document is skipped, not the build.
        return Skipped(_ref(item), f"sentence splitting ran out of time ({error})")


def _ref(item: SourceDocument) -> str:
    return str(item.metadata.get("source", item.doc_id))


def split_all(
    source: Iterable[Item],
    splitter: SentenceSplitter,
    *,
    workers: int,
    in_process_seconds: float = IN_PROCESS_SECONDS,
) -> Iterator[Split]:
    """Each item of `source` split (`split_one`), in order: here for `in_process_seconds` of
    splitting, the rest in `workers` processes when there is more than one."""
    items = iter(source)
    spent = 0.0  # seconds split here (not counting the caller's time between items)
    for item in items:
        started = time.perf_counter()
        split = split_one(item, splitter)
        spent += time.perf_counter() - started
        yield split
        if workers > 1 and spent >= in_process_seconds:
            break
    batches = _batches(items)
    first = next(batches, None)
    if first is None:
        return
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),  # safe beside the caller's threads
        initializer=_start_worker,
        initargs=(splitter,),
    )
    try:
        pending: deque[Future[list[Split]]] = deque([pool.submit(_split_batch, first)])
        for batch in batches:
            pending.append(pool.submit(_split_batch, batch))
            if len(pending) >= 2 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _batches(items: Iterator[Item]) -> Iterator[list[Item]]:
    while batch := list(itertools.islice(items, BATCH_DOCUMENTS)):
        yield batch


_splitter: SentenceSplitter | None = None  # a worker process's splitter, set when it starts


def _start_worker(splitter: SentenceSplitter) -> None:
    global _splitter
    _splitter = splitter


def _split_batch(items: list[Item]) -> list[Split]:
    if _splitter is None:
        raise RuntimeError("a split worker was not started with a splitter")
    return [split_one(item, _splitter) for item in items]
