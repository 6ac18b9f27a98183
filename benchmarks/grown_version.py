"""A data directory holding a published version grown `--factor` times, written by the real
build: for the service measured as a whole at ten times AILA (`benchmarks/served_growth.py`).

    python benchmarks/grown_version.py --base-dir AILA_DATA_DIR --out-dir AILA_10X_DIR
        --factor 10 [--noise 0.35] [--vary 0.3]

The corpus is the base version's live documents (text, sections, metadata) `factor` times:
copy 0 keeps each document's id and text, copy k is `<id>~k` with a share `--vary` (0.3) of
the corpus's lowercase word types swapped, each everywhere in that copy, for another word of
the corpus with as many letters and as many tokenizer pieces (`WordSwaps`): the copies are
distinct texts whose terms BM25 weighs as it would related documents, not exact duplicates,
and every copy still splits and chunks as its original does (spans unchanged; a word that
ends or starts a sentence at a period is kept, so that Punkt decides as before; checked level
by level, and on every base document before the build). Encoding ten times AILA would take
over two hours here; instead the
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
import dataclasses
import hashlib
import json
import logging
import re
import shutil
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from docsim.indexer.builder.engines import EncodedBlocks
from docsim.indexer.builder.pipeline import build_index
from docsim.indexer.settings import load_configured_encoder
from docsim.indexer.store.db import make_engine, upgrade
from docsim.indexer.store.reader import stored_documents
from docsim.indexer.store.versions import active_version
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.documents import LEVELS, Document, SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter, load_splitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.encoder import DocumentVectors, Encoder
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
    perturbed for copies (see the module docstring). A copy that splits otherwise than its
    original (its swapped words moved a sentence boundary) is encoded by `encoder` where one
    is given (counted in `encoded`), else refused."""

    def __init__(self, base: BaseVectors, noise: float, encoder: Encoder | None = None) -> None:
        self.base = base
        self.noise = noise
        self.encoder = encoder
        self.encoded = 0

    def vectors_of(self, doc: Document) -> DocumentVectors:
        original, copy = original_of(doc.doc_id)
        position = self.base.position[original]
        counts = doc.counts()
        split_otherwise = any(
            len(self.base.rows(level, position)) != counts[level] for level in LEVELS
        )
        if copy and split_otherwise and self.encoder is not None:
            logger.warning("%s splits otherwise than its original: encoded", doc.doc_id)
            self.encoded += 1
            return self.encoder.encode_documents([doc.encoder_input()])[0]
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


SWAPPED = re.compile(r"\b[a-z]{5,}\b")  # lowercase words, bounded by no letter or digit
CLOSERS = "\"”’')]}"
ROMAN = re.compile(r"[ivxlc]+")  # an enumerator's letters (`sentences._ENUMERATOR`)


class WordSwaps:
    """Which word each copy puts in place of each swappable word of the base corpus: a share
    `vary` of the words, chosen per copy by a hash (the same choice in every run), each
    swapped for a word of its class (as many letters, as many tokenizer pieces)."""

    def __init__(self, vocabulary: Sequence[str], pieces: Sequence[int], vary: float) -> None:
        classes: dict[tuple[int, int], list[str]] = defaultdict(list)
        for word, n in zip(vocabulary, pieces, strict=True):
            if not ROMAN.fullmatch(word):
                classes[(len(word), n)].append(word)
        self.partners = {w: c for c in classes.values() if len(c) > 1 for w in c}
        self.place = {w: i for c in classes.values() for i, w in enumerate(c)}
        self.vary = vary
        self._copy = -1
        self._swaps: dict[str, str] = {}

    @classmethod
    def of_texts(cls, texts: Iterable[str], encoder: Encoder, vary: float) -> WordSwaps:
        vocabulary = sorted({m.group() for text in texts for m in SWAPPED.finditer(text)})
        pieces = [len(offsets) for offsets in encoder.token_offsets(vocabulary)]
        return cls(vocabulary, pieces, vary)

    def swaps(self, copy: int) -> dict[str, str]:
        """Copy `copy`'s swapped words and what replaces each (none for copy 0)."""
        if copy != self._copy:
            self._copy, self._swaps = copy, {}
            for word, partners in self.partners.items() if copy else ():
                digest = hashlib.blake2b(f"{copy}\0{word}".encode(), digest_size=8).digest()
                h = int.from_bytes(digest, "little")
                if h % 1_000_000 < self.vary * 1_000_000:
                    other = (h >> 24) % (len(partners) - 1)  # any word of its class but it
                    self._swaps[word] = partners[other + (other >= self.place[word])]
        return self._swaps

    def text(self, text: str, copy: int) -> str:
        """`text` as copy `copy` writes it: as long, with the same spaces and punctuation."""
        swaps = self.swaps(copy)
        if not swaps:
            return text

        def swapped(match: re.Match[str]) -> str:
            word = match.group()
            if word not in swaps or at_period(text, match.start(), match.end()):
                return word
            return swaps[word]

        return SWAPPED.sub(swapped, text)


def at_period(text: str, start: int, end: int) -> bool:
    """Whether the word at `text[start:end]` is in a token (between spaces) that holds a
    period, or follows one that ends with a period (closing quotes aside): Punkt weighs such
    a token's type to decide whether the period ends a sentence."""
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    if "." in text[start:end]:
        return True
    before = start - 1
    while before >= 0 and text[before].isspace():
        before -= 1
    while before >= 0 and text[before] in CLOSERS:
        before -= 1
    return before >= 0 and text[before] == "."


def grown_documents(
    base: list[SourceDocument], factor: int, swaps: WordSwaps
) -> Iterator[SourceDocument]:
    for copy in range(factor):
        for doc in base:
            yield SourceDocument(
                doc_id=copy_id(doc.doc_id, copy),
                title=doc.title,
                text=swaps.text(doc.text, copy),
                metadata=doc.metadata,
                body_start=doc.body_start,
                sections=doc.sections,
            )


def check_swaps(
    base: list[SourceDocument],
    swaps: WordSwaps,
    splitter: SentenceSplitter,
    encoder: Encoder,
    capacity: int,
) -> None:
    """Every base document, as copy 1 writes it, splits and chunks as the original does."""
    for doc in base:
        varied = dataclasses.replace(doc, text=swaps.text(doc.text, 1))
        pair = add_chunks([split_document(d, splitter) for d in (doc, varied)], encoder, capacity)
        if pair[0].counts() != pair[1].counts():
            raise RuntimeError(f"{doc.doc_id}: copy 1 splits otherwise than its original")


def grow_version(
    base_settings: QuerySettings,
    settings: QuerySettings,
    factor: int,
    noise: float,
    vary: float = 0.3,
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
    splitter = load_splitter(settings.punkt_params)
    swaps = WordSwaps.of_texts((doc.text for doc in documents), encoder, vary)
    check_swaps(documents, swaps, splitter, encoder, manifest["chunk_tokens"])
    replay = ReplayEngine(BaseVectors(index), noise, encoder)
    started = time.perf_counter()
    try:
        result = build_index(
            None,
            settings=settings,
            engine=engine,
            encoder=encoder,
            splitter=splitter,
            documents=grown_documents(documents, factor, swaps),
            source_label=f"{manifest['corpus']['path']} x{factor} (noise {noise}, vary {vary})",
            encode_engine=replay,
        )
    finally:
        engine.dispose()
        base_engine.dispose()
    seconds = time.perf_counter() - started
    grown = result.manifest
    if grown.get("backend") != manifest.get("backend") or grown["encoder"] != recorded:
        raise RuntimeError("the grown version records another encoder than its base")
    expected = {level: factor * len(index.ids[level]) for level in LEVELS}  # the live units
    # a copy encoded anew may have split into other counts: then only its documents must add up
    checked = LEVELS if not replay.encoded else ("document",)
    if any(grown["counts"][level] != expected[level] for level in checked):
        raise RuntimeError(f"grown counts {grown['counts']}, expected {expected}")
    return {
        "base": str(base_dir),
        "factor": factor,
        "noise": noise,
        "vary": vary,
        "encoded_copies": replay.encoded,
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
    parser.add_argument("--vary", type=float, default=0.3, help="share of word types swapped")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    facts = grow_version(
        QuerySettings(data_dir=args.base_dir),
        QuerySettings(data_dir=args.out_dir),
        args.factor,
        args.noise,
        args.vary,
    )
    print(json.dumps(facts, indent=2))
    (args.out_dir / "grown.json").write_text(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
