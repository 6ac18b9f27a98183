"""A data directory holding a published version grown `--factor` times, written by the real
build: for the service measured as a whole at ten times AILA (`benchmarks/served_growth.py`).

    python benchmarks/grown_version.py --base-dir AILA_DATA_DIR --out-dir AILA_10X_DIR
        --factor 10 [--noise 0.35]

The corpus is the base version's live documents (text, sections, metadata) `factor` times:
copy 0 keeps each document's id, copy k is `<id>~k`. The texts are the same, so every copy
splits and chunks as its original does (checked, level by level), and BM25 sees near-duplicate
archives as real ones hold. Encoding ten times AILA would take over two hours here; instead the
build's encode stage (`ReplayEngine`, an `EncodeEngine`) hands each document its original's
vectors from the base version's files: copy 0 exactly, copy k perturbed as
`benchmarks/growth.py` does (`normalise(x + noise * g / sqrt(d))`, g standard normal, seeded
per copy and document, so that cos(x, copy) is about `1 / sqrt(1 + noise^2)`). Everything else
is `build_index`'s: SQL rows, the vector files and FAISS indices, the manifest, publishing.
The base's int8 encoder export is copied into the new data directory's encoder cache, so the
grown version is served with, and records, the encoder that made its vectors (checked).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import torch

from docsim.indexer.builder.engines import EncodedBlocks
from docsim.indexer.builder.pipeline import build_index
from docsim.indexer.settings import load_configured_encoder
from docsim.indexer.store.db import make_engine, upgrade
from docsim.indexer.store.reader import stored_documents
from docsim.indexer.store.versions import active_version
from docsim.indexer.text.documents import LEVELS, Document, SourceDocument
from docsim.indexer.text.sentences import load_splitter
from docsim.models.encoder import DocumentVectors
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.settings import QuerySettings

logger = logging.getLogger("benchmarks.grown_version")
COPY_MARK = "~"
UNIT_LEVELS = {"section": "sections", "paragraph": "paragraphs", "sentence": "sentences"}


def copy_id(doc_id: str, copy: int) -> str:
    return doc_id if copy == 0 else f"{doc_id}{COPY_MARK}{copy}"


def original_of(doc_id: str) -> tuple[str, int]:
    """`(original id, copy)` of a grown document's id."""
    original, mark, copy = doc_id.rpartition(COPY_MARK)
    return (original, int(copy)) if mark and copy.isdigit() else (doc_id, 0)


def perturbed(rows: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """`(n, d)` unit rows moved by Gaussian noise of norm about `noise`, renormalised."""
    x = rows.astype(np.float32)
    g = np.random.default_rng(seed).standard_normal(x.shape, dtype=np.float32)
    x += noise * g / np.sqrt(x.shape[1])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


class BaseVectors:
    """The base version's vectors of every level (the unit levels' float16 files memory-mapped,
    with the rows of its document changes beside them), and where each document's rows start
    (a document's units are consecutive rows)."""

    def __init__(self, index: LoadedIndex) -> None:
        self.position = {doc_id: p for p, doc_id in enumerate(index.external_ids)}
        self.vectors = index.vectors
        self.start = dict(index.doc_unit_start)
        self.start["document"] = np.arange(index.n_documents + 1)

    def rows(self, level: str, position: int) -> np.ndarray:
        """`(n, d)` the rows of the document at `position` (float16 or float32)."""
        start = self.start[level]
        return np.asarray(self.vectors[level][int(start[position]) : int(start[position + 1])])


class ReplayEngine:
    """A build's encode stage that encodes nothing: each document gets its original's vectors,
    perturbed for copies (see the module docstring)."""

    def __init__(self, base: BaseVectors, noise: float) -> None:
        self.base = base
        self.noise = noise

    def vectors_of(self, doc: Document) -> DocumentVectors:
        original, copy = original_of(doc.doc_id)
        position = self.base.position[original]
        counts = doc.counts()
        out: dict[str, torch.Tensor] = {}
        for i, level in enumerate(LEVELS):
            rows = self.base.rows(level, position)
            if len(rows) != counts[level]:
                raise ValueError(
                    f"{doc.doc_id}: {counts[level]} {level} units, its original has {len(rows)}"
                )
            if copy:  # a seed per copy, document and level
                seed = (copy * len(self.base.position) + position) * len(LEVELS) + i
                rows = perturbed(rows, self.noise, seed)
            out[level] = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))
        return DocumentVectors(
            document=out["document"][0],
            sections=out["section"],
            paragraphs=out["paragraph"],
            sentences=out["sentence"],
            chunks=out["chunk"],
        )

    def encode_blocks(self, blocks: Iterable[list[Document]]) -> EncodedBlocks:
        for block in blocks:
            yield block, [self.vectors_of(doc) for doc in block]


def grown_documents(base: list[SourceDocument], factor: int) -> Iterator[SourceDocument]:
    for copy in range(factor):
        for doc in base:
            yield SourceDocument(
                doc_id=copy_id(doc.doc_id, copy),
                title=doc.title,
                text=doc.text,
                metadata=doc.metadata,
                body_start=doc.body_start,
                sections=doc.sections,
            )


def grow_version(
    base_settings: QuerySettings, settings: QuerySettings, factor: int, noise: float
) -> dict:
    """Publish the base's active version grown `factor` times into `settings`' data directory
    (which must not exist) and database; returns its facts."""
    base_dir, out_dir = base_settings.data_dir, settings.data_dir
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists")
    base_engine = make_engine(base_settings.database_url)
    version = active_version(base_engine, base_settings.collection)
    index = LoadedIndex.load(base_engine, version, sharded=True)  # unit levels mapped
    documents = list(stored_documents(base_engine, version.version_id))
    manifest = index.manifest
    out_dir.mkdir(parents=True)
    if (base_dir / "encoders").is_dir():  # the base's int8 export: the same query encoder
        shutil.copytree(base_dir / "encoders", out_dir / "encoders")
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    recorded = manifest["encoder"]
    encoder = load_configured_encoder(settings, recorded.get("source") or recorded["name"])
    started = time.perf_counter()
    try:
        result = build_index(
            None,
            settings=settings,
            engine=engine,
            encoder=encoder,
            splitter=load_splitter(settings.punkt_params),
            documents=grown_documents(documents, factor),
            source_label=f"{manifest['corpus']['path']} x{factor} (noise {noise})",
            encode_engine=ReplayEngine(BaseVectors(index), noise),
        )
    finally:
        engine.dispose()
        base_engine.dispose()
    seconds = time.perf_counter() - started
    grown = result.manifest
    if grown.get("backend") != manifest.get("backend") or grown["encoder"] != recorded:
        raise RuntimeError("the grown version records another encoder than its base")
    expected = {level: factor * len(index.ids[level]) for level in LEVELS}  # the live units
    if grown["counts"] != expected:
        raise RuntimeError(f"grown counts {grown['counts']}, expected {expected}")
    return {
        "base": str(base_dir),
        "factor": factor,
        "noise": noise,
        "counts": grown["counts"],
        "build_seconds": seconds,
        "bytes_on_disk": sum(f.stat().st_size for f in out_dir.rglob("*") if f.is_file()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-dir", type=Path, required=True)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--factor", type=int, required=True)
    parser.add_argument("--noise", type=float, default=0.35)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    facts = grow_version(
        QuerySettings(data_dir=args.base_dir),
        QuerySettings(data_dir=args.out_dir),
        args.factor,
        args.noise,
    )
    print(json.dumps(facts, indent=2))
    (args.out_dir / "grown.json").write_text(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
