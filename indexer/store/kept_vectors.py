"""What a published version holds of the documents a new build finds unchanged: their chunks and
every level's vectors, read back so that the build stores them again instead of encoding them
(`indexer.builder.reuse`).

A document is found by its external id among the version's live documents and kept when its
content hash (`Document.content_sha256`, recorded with its row) is the new split's. Its units'
ids come from SQL, in document order (ids are handed out in order); its vectors from the
version's float16 file of each level (checked against its recorded sha256 first), read by row
with `pread` (no mapping whose pages would stay in the build's resident memory), or from
`document_vectors` for a document added after the version's build.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from docsim.indexer.errors import IndexBuildError
from docsim.indexer.store.manifest import check_files
from docsim.indexer.store.stored_rows import float16_rows
from docsim.indexer.store.tables import LEVEL_TABLES, chunks, document_vectors, documents
from docsim.indexer.text.documents import LEVELS, Chunk, Document

UNIT_LEVELS = ("section", "paragraph", "sentence", "chunk")  # below the document


class LevelRows:
    """One level's vectors file of a version (`stored_rows`), read by id as float16."""

    def __init__(self, folder: Path, entry: dict[str, Any]) -> None:
        self.ids = np.load(folder / entry["ids_file"])  # (n,) int64, ascending
        path = folder / entry["vectors_file"]
        with path.open("rb") as handle:
            major, _ = np.lib.format.read_magic(handle)
            read_header = (
                np.lib.format.read_array_header_1_0
                if major == 1
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran_order, dtype = read_header(handle)
            self.offset = handle.tell()
        float16 = dtype == np.float16 and len(shape) == 2
        int8 = dtype.names is not None and len(shape) == 1
        if fortran_order or not (float16 or int8) or shape[0] != len(self.ids):
            raise IndexBuildError(f"{path.name} is not an array of the stored rows of its ids")
        self.stored = (dtype, tuple(shape[1:]))  # a row's element type and shape
        self.dim = int(shape[1]) if float16 else int(dtype["codes"].shape[0])
        self.row_bytes = dtype.itemsize * (self.dim if float16 else 1)
        self.fd = os.open(path, os.O_RDONLY)

    def rows(self, ids: np.ndarray) -> np.ndarray | None:
        """`(len(ids), d)` float16: the rows of `ids` (ascending), None when one is not in the
        file."""
        positions = np.searchsorted(self.ids, ids)
        if len(ids) and (
            positions[-1] >= len(self.ids) or not np.array_equal(self.ids[positions], ids)
        ):
            return None
        out = np.empty((len(ids), self.dim), np.float16)
        # contiguous runs of rows, one read each (a document's units are one run)
        breaks = np.flatnonzero(np.diff(positions) != 1) + 1
        for run in np.split(np.arange(len(ids)), breaks):
            if not len(run):
                continue
            first, n = int(positions[run[0]]), len(run)
            data = os.pread(self.fd, n * self.row_bytes, self.offset + first * self.row_bytes)
            stored = np.frombuffer(data, self.stored[0]).reshape(n, *self.stored[1])
            out[run] = float16_rows(stored)
        return out

    def close(self) -> None:
        os.close(self.fd)


@dataclass(frozen=True)
class KeptDocument:
    """One document as the version holds it: its chunks (the sections they belong to by
    position) and each level's `(n, d)` float16 vectors in document order."""

    chunks: tuple[Chunk, ...]
    vectors: dict[str, np.ndarray]


class KeptVectors:
    """A published version's documents, units and vectors, for a build to reuse."""

    def __init__(self, engine: Engine, version_id: int, folder: Path, levels: dict[str, Any]):
        self.engine, self.version_id = engine, version_id
        self.files: dict[str, LevelRows] = {}
        try:
            for level in LEVELS:
                entry = levels[level]
                # damaged files are not copied into a new version (`docsim reindex current`
                # is how a damaged version is rebuilt)
                check_files(folder, entry, [entry["vectors_file"], entry["ids_file"]])
                self.files[level] = LevelRows(folder, entry)
        except BaseException:
            self.close()
            raise

    def unchanged(self, docs: Sequence[Document]) -> dict[int, int]:
        """For each of `docs` the version holds unchanged: its position in `docs` -> the doc
        id of the live document with its external id and content hash."""
        if not docs:
            return {}
        with self.engine.connect() as conn:
            stored = {
                external_id: (doc_id, digest)
                for doc_id, external_id, digest in conn.execute(
                    select(documents.c.doc_id, documents.c.external_id, documents.c.content_sha256)
                    .where(documents.c.version_id == self.version_id)
                    .where(documents.c.retired_revision.is_(None))
                    .where(documents.c.external_id.in_([doc.doc_id for doc in docs]))
                )
            }
        out = {}
        for position, doc in enumerate(docs):
            doc_id, digest = stored.get(doc.doc_id, (None, None))
            if doc_id is not None and digest is not None and digest == doc.content_sha256():
                out[position] = doc_id
        return out

    def read(self, doc_ids: Sequence[int]) -> dict[int, KeptDocument]:
        """The chunks and vectors of the documents `doc_ids` (live documents of the version).

        Raises:
            IndexBuildError: the version lacks vectors its rows name (a damaged version).
        """
        if not doc_ids:
            return {}
        unit_ids, doc_chunks = self._units(doc_ids)
        added = self._added_vectors(doc_ids)
        out = {}
        for doc_id in doc_ids:
            ids = {"document": np.array([doc_id], np.int64)}
            for level in UNIT_LEVELS:
                ids[level] = np.array(unit_ids[level].get(doc_id, []), np.int64)
            vectors = {}
            for level in LEVELS:
                if doc_id in added and np.array_equal(added[doc_id][level][0], ids[level]):
                    vectors[level] = added[doc_id][level][1]
                    continue
                rows = self.files[level].rows(ids[level])
                if rows is None:
                    raise IndexBuildError(
                        f"version {self.version_id} lacks the {level} vectors of document "
                        f"{doc_id}: build without reusing vectors "
                        "(DOCSIM_INDEX__REUSE_VECTORS=false)"
                    )
                vectors[level] = rows
            out[doc_id] = KeptDocument(tuple(doc_chunks.get(doc_id, ())), vectors)
        return out

    def _units(
        self, doc_ids: Sequence[int]
    ) -> tuple[dict[str, dict[int, list[int]]], dict[int, list[Chunk]]]:
        """The ids of each level's units of `doc_ids`, per document in order, and their chunks
        (with the position of their section in the document)."""
        unit_ids: dict[str, dict[int, list[int]]] = {level: {} for level in UNIT_LEVELS}
        chunk_rows: list[Any] = []
        with self.engine.connect() as conn:
            for level in UNIT_LEVELS:
                table, id_column = LEVEL_TABLES[level]
                columns = [id_column, table.c.doc_id]
                if level == "chunk":
                    columns += [chunks.c.section_id, chunks.c.char_start, chunks.c.char_end]
                    columns.append(chunks.c.n_tokens)
                rows = conn.execute(
                    select(*columns).where(table.c.doc_id.in_(list(doc_ids))).order_by(id_column)
                ).all()
                for row in rows:
                    unit_ids[level].setdefault(row[1], []).append(row[0])
                if level == "chunk":
                    chunk_rows = list(rows)
        section_position = {
            section_id: position
            for ids in unit_ids["section"].values()
            for position, section_id in enumerate(ids)
        }
        doc_chunks: dict[int, list[Chunk]] = {}
        for _, doc_id, section_id, start, end, n_tokens in chunk_rows:
            chunk = Chunk(section_position[section_id], start, end, n_tokens)
            doc_chunks.setdefault(doc_id, []).append(chunk)
        return unit_ids, doc_chunks

    def _added_vectors(
        self, doc_ids: Sequence[int]
    ) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
        """The ids and float16 vectors of each level of those of `doc_ids` added to the
        version after its build (`document_vectors`)."""
        with self.engine.connect() as conn:
            payloads = conn.execute(
                select(document_vectors.c.doc_id, document_vectors.c.payload).where(
                    document_vectors.c.doc_id.in_(list(doc_ids))
                )
            ).all()
        out = {}
        for doc_id, payload in payloads:
            with np.load(io.BytesIO(payload)) as blob:
                out[doc_id] = {
                    level: (blob[f"{level}_ids"], blob[f"{level}_vectors"].astype(np.float16))
                    for level in LEVELS
                }
        return out

    def close(self) -> None:
        for rows in self.files.values():
            rows.close()
        self.files = {}
