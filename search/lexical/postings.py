"""The BM25 postings of one served version, over its documents, over its paragraphs and over
its documents' word shingles, each built on first use and shared by every lexical method; the
document and shingle postings kept in the version's folder once built, and mapped from there
by this service and the next (`postings_file`, `shingles_file`)."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from sqlalchemy import Engine

from docsim.indexer.store.reader import document_paragraph_texts, document_texts
from docsim.search.arrays import Positions
from docsim.search.errors import IndexMismatchError
from docsim.search.lexical.bm25 import BUILD_DOCUMENTS, Bm25Index
from docsim.search.lexical.postings_file import load_postings, postings_file, save_postings
from docsim.search.lexical.shingles import ShingleIndex, text_shingles
from docsim.search.lexical.shingles_file import load_shingles, shingles_folder, write_shingles
from docsim.search.served.loaded_index import LoadedIndex

logger = logging.getLogger(__name__)


class Postings:
    """BM25 over `index`'s documents (texts read from SQL through `engine`), over its
    paragraphs with each paragraph's document position, and over its documents'
    `shingle_words`-word shingles, built once, under a lock."""

    def __init__(
        self, index: LoadedIndex, engine: Engine, stemmer: str | None, shingle_words: int = 2
    ) -> None:
        self.index = index
        self.engine = engine
        self.stemmer = stemmer
        self.shingle_words = shingle_words
        self._lock = threading.Lock()
        self._documents: Bm25Index | None = None
        self._paragraphs: tuple[Bm25Index, Positions] | None = None
        self._shingles: ShingleIndex | None = None

    @property
    def built_documents(self) -> Bm25Index | None:
        """The document postings if they were built, else None (nothing is built)."""
        with self._lock:
            return self._documents

    @property
    def built_paragraphs(self) -> tuple[Bm25Index, Positions] | None:
        """The paragraph postings if they were built, else None (nothing is built)."""
        with self._lock:
            return self._paragraphs

    def documents(self) -> Bm25Index:
        """The postings of every document, rows in `index.doc_ids` order: kept in memory,
        else mapped from the version's folder, else built now, kept there and mapped."""
        with self._lock:
            if self._documents is None:
                started = time.perf_counter()
                doc_ids = np.sort(self.index.doc_ids)  # (D,)
                path = postings_file(self.index, self.stemmer)
                kept = load_postings(path, self.stemmer)
                if kept is not None and np.array_equal(kept.doc_ids, doc_ids):
                    self._documents = kept
                    logger.info(
                        "Read BM25 over %d documents from %s in %.1f s",
                        len(doc_ids),
                        path.name,
                        time.perf_counter() - started,
                    )
                    return kept
                if path.exists():  # damaged, or of other documents: built and kept anew
                    shutil.rmtree(path, ignore_errors=True)
                self._documents = Bm25Index.build_sorted(
                    doc_ids, self._texts_in_batches(doc_ids), self.stemmer
                )
                logger.info(
                    "Built BM25 over %d documents in %.1f s",
                    len(doc_ids),
                    time.perf_counter() - started,
                )
                if save_postings(path, self._documents):  # served from the files: mapped
                    self._documents = load_postings(path, self.stemmer) or self._documents
            return self._documents

    def shingles(self) -> ShingleIndex:
        """BM25 over every document's shingles, rows in `index.doc_ids` order: kept in
        memory, else mapped from the version's folder, else written there now (in bounded
        memory) and mapped; built in memory only where the folder cannot be written."""
        with self._lock:
            if self._shingles is None:
                started = time.perf_counter()
                doc_ids = np.sort(self.index.doc_ids)  # (D,)
                path = shingles_folder(self.index, self.shingle_words, self.stemmer)
                kept = load_shingles(path, doc_ids, self.stemmer)
                if kept is None:
                    kept = self._shingles_written(path, doc_ids)
                self._shingles = kept or ShingleIndex.build_sorted(
                    doc_ids, self._texts_in_batches(doc_ids), self.shingle_words, self.stemmer
                )
                logger.info(
                    "%s %d-word shingle BM25 over %d documents in %.1f s",
                    "Mapped" if kept is not None else "Built (in memory)",
                    self.shingle_words,
                    len(doc_ids),
                    time.perf_counter() - started,
                )
            return self._shingles

    def _shingles_written(self, path: Path, doc_ids: np.ndarray) -> ShingleIndex | None:
        """The shingle postings of `doc_ids` written into `path` and mapped from there; None
        where they could not be written (logged)."""
        if path.exists():  # damaged, or of other documents: written anew
            shutil.rmtree(path, ignore_errors=True)
        n, stemmer = self.shingle_words, self.stemmer
        batches = (text_shingles(texts, n, stemmer) for texts in self._texts_in_batches(doc_ids))
        try:
            write_shingles(path, batches, len(doc_ids), n)
        except OSError as error:  # or another service kept them first
            logger.warning("Could not keep the shingle postings in %s: %s", path.name, error)
        return load_shingles(path, doc_ids, stemmer)

    def _texts_in_batches(self, doc_ids: np.ndarray) -> Iterator[list[str]]:
        """The texts of `doc_ids`, read `BUILD_DOCUMENTS` at a time (ten times AILA's texts
        are 0.6 GB: the build holds one batch of them)."""
        for s in range(0, len(doc_ids), BUILD_DOCUMENTS):
            part = doc_ids[s : s + BUILD_DOCUMENTS].tolist()
            texts = document_texts(self.engine, part)
            yield [texts[d] for d in part]

    def paragraphs(self) -> tuple[Bm25Index, Positions]:
        """The postings of every paragraph, and each posting row's document position `(J,)`."""
        with self._lock:
            if self._paragraphs is None:
                started = time.perf_counter()
                index = self.index
                texts = document_paragraph_texts(self.engine, index.doc_ids.tolist())
                ids = index.paragraph_ids  # (J,) collection order
                doc_of = np.repeat(np.arange(index.n_documents), np.diff(index.doc_paragraph_start))
                bm25 = Bm25Index.build(ids.tolist(), [texts[p] for p in ids.tolist()], self.stemmer)
                order = np.argsort(ids)
                rows = order[np.searchsorted(ids[order], bm25.doc_ids)]  # (J,) by posting row
                self._paragraphs = (bm25, doc_of[rows])
                logger.info(
                    "Built paragraph BM25 over %d paragraphs in %.1f s",
                    len(ids),
                    time.perf_counter() - started,
                )
            return self._paragraphs

    def with_changes(self, index: LoadedIndex) -> Postings:
        """The postings of `index`, this version with a document change applied: the document
        postings, when built, change for the changed documents only (unit ids are never
        reused, so a new id is a new document), and so do the shingle postings; the paragraph
        postings are built afresh.

        Raises:
            IndexMismatchError: the changed postings do not hold `index`'s documents.
        """
        changed = Postings(index, self.engine, self.stemmer, self.shingle_words)
        with self._lock:
            bm25, shingles = self._documents, self._shingles
        if bm25 is None and shingles is None:
            return changed
        old = self.index
        removed = np.setdiff1d(old.doc_ids, index.doc_ids).tolist()
        added = np.setdiff1d(index.doc_ids, old.doc_ids).tolist()
        texts = document_texts(self.engine, added)
        added_texts = [(d, texts[d]) for d in added]
        if bm25 is not None:
            changed._documents = bm25.with_changes(removed, added_texts)
        if shingles is not None:
            changed._shingles = shingles.with_changes(removed, added_texts)
        for built in (changed._documents, changed._shingles):
            if built is not None and not np.array_equal(built.doc_ids, index.doc_ids):
                raise IndexMismatchError("BM25 postings and the index hold other documents")
        return changed
