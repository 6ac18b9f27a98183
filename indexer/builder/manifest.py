"""The manifest a build writes (`indexer.store.manifest.Manifest`): what made the version
(encoder, splitter, backend, chunk size), what it was built from, what it holds and how the
build went. Pure: it reads what the stages returned and writes nothing."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timezone

from docsim.indexer.builder.reuse import Reuse
from docsim.indexer.choices import CorpusFormat
from docsim.indexer.store.manifest import (
    SCHEMA_VERSION,
    BackendEntry,
    BuildEntry,
    CorpusEntry,
    LevelEntry,
    Manifest,
)
from docsim.indexer.store.vector_index import METRIC
from docsim.indexer.text.documents import Skipped
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.models.encoders.encoder import Encoder

SKIPPED_EXAMPLES = 20  # skipped inputs named in the manifest; the rest are counted


def corpus_entry(
    label: str, fmt: CorpusFormat, n_documents: int, skipped: Sequence[Skipped]
) -> CorpusEntry:
    """Where the documents came from: `label` (a path, or a description of stored
    documents), its format, and how many documents were indexed and skipped."""
    return {
        "path": label,
        "format": fmt.value,
        "documents": n_documents,
        "skipped": len(skipped),
        "skipped_examples": [
            {"ref": s.ref, "reason": s.reason} for s in skipped[:SKIPPED_EXAMPLES]
        ],
    }


def build_entry(
    blocks_done: int,
    started: float,
    encode_seconds: float,
    levels: dict[str, LevelEntry],
    reuse: Reuse | None = None,
) -> BuildEntry:
    """How the build went: the blocks a resume skipped, its seconds since `started` (a
    `time.perf_counter()` reading), the encode stage's throughput (sentences encoded, from
    `levels` or, when vectors were reused, `reuse`, per second) and what was reused."""
    n_sentences = levels["sentence"]["count"] if reuse is None else reuse.encoded_sentences
    entry: BuildEntry = {
        "resumed_after_blocks": blocks_done,
        "seconds": round(time.perf_counter() - started, 3),
        "encode_seconds": round(encode_seconds, 3),
        "sentences_per_second": round(n_sentences / max(encode_seconds, 1e-9), 1),
    }
    if reuse is not None:
        entry["reused"] = reuse.record()
    return entry


def build_manifest(
    version_id: int,
    *,
    encoder: Encoder,
    splitter: SentenceSplitter,
    capacity: int,
    corpus: CorpusEntry,
    levels: dict[str, LevelEntry],
    build: BuildEntry,
    backend: BackendEntry,
) -> Manifest:
    """The manifest of version `version_id`, stamped with the current time (UTC).

    Args:
        capacity: the tokens per chunk the build used (`chunk_tokens`).
        levels: what `write_vector_indexes` wrote, per level; the counts come from it.
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "version_id": version_id,
        "created_at": datetime.now(timezone.utc).isoformat(),
        "encoder": encoder.identity(),
        "dim": encoder.dim,
        "metric": METRIC,
        "vector_storage": "float16",
        "splitter": splitter.identity(),
        "chunk_tokens": capacity,
        "corpus": corpus,
        "counts": {level: info["count"] for level, info in levels.items()},
        "levels": levels,
        "build": build,
        "backend": backend,
    }
