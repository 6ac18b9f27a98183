"""The older synthetic run of `query_latency.py --scale-sentences N`: candidate mode over a
collection of N random unit sentence vectors (paragraphs of 1 to 7 sentences, documents of 10
to 59 paragraphs) with FAISS levels built over them, queried by noisy copies of its own
sentences. `growth.py` measures growth on real vectors."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import torch

from docsim.indexer.store.vector_index import FaissIndex, choose_factory
from docsim.models.encoders.pooling import segment_mean
from docsim.models.kernels.scoring import RaggedCollection
from docsim.protocol.choices import ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.searcher import Searcher
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.settings import SearchSettings
from docsim.search.types import Query


def synthetic_lengths(n_sentences: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sentences per paragraph (1 to 7, at most `n_sentences` in all) and paragraphs per
    document (10 to 59, the last document taking the paragraphs left)."""
    paragraph_lengths = rng.integers(1, 8, size=n_sentences // 3)
    paragraph_lengths = paragraph_lengths[np.cumsum(paragraph_lengths) <= n_sentences]
    document_lengths = rng.integers(10, 60, size=len(paragraph_lengths))
    document_lengths = document_lengths[np.cumsum(document_lengths) <= len(paragraph_lengths)]
    document_lengths[-1] += len(paragraph_lengths) - int(document_lengths.sum())
    return paragraph_lengths, document_lengths


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """`(n, dim)` random float32 unit vectors."""
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def faiss_levels(
    vectors: np.ndarray, paragraph_lengths: np.ndarray
) -> tuple[FaissIndex, FaissIndex, str]:
    """The sentence level's IVF index over `vectors`, the paragraph level's over each
    paragraph's mean sentence vector, and the sentence level's FAISS factory."""
    n_sentences = len(vectors)
    sentence_ids = np.arange(n_sentences, dtype=np.int64)
    factory = choose_factory(n_sentences, 1_000_000, "IVF{nlist},Flat")
    sentence_index = FaissIndex.build(vectors, sentence_ids, factory, nprobe=16)
    segments = torch.repeat_interleave(
        torch.arange(len(paragraph_lengths)), torch.from_numpy(paragraph_lengths)
    )
    paragraph_vectors = segment_mean(
        torch.from_numpy(vectors), segments, len(paragraph_lengths)
    ).numpy()
    paragraph_factory = choose_factory(len(paragraph_vectors), 250_000, "IVF{nlist},Flat")
    paragraph_index = FaissIndex.build(
        paragraph_vectors,
        np.arange(len(paragraph_vectors), dtype=np.int64),
        paragraph_factory,
        nprobe=16,
    )
    return sentence_index, paragraph_index, factory


def synthetic_index(
    vectors: np.ndarray,
    doc_vectors: np.ndarray,
    paragraph_lengths: np.ndarray,
    document_lengths: np.ndarray,
    sentence_index: FaissIndex,
    paragraph_index: FaissIndex,
) -> LoadedIndex:
    """The synthetic collection as a searcher holds a loaded version: its sentence,
    paragraph and document levels, ids and the offsets that join them."""
    n_docs = len(document_lengths)
    sentence_ids = np.arange(len(vectors), dtype=np.int64)
    doc_ids = np.arange(n_docs, dtype=np.int64)
    paragraph_ids = np.arange(len(paragraph_lengths), dtype=np.int64)
    doc_paragraph_start = np.concatenate([[0], np.cumsum(document_lengths)])  # (D + 1,)
    sentence_start = np.concatenate([[0], np.cumsum(paragraph_lengths)])  # (J + 1,)
    return LoadedIndex(
        version_id=0,
        path=Path("."),
        manifest={"chunk_tokens": 254},
        indices={
            "sentence": sentence_index,
            "paragraph": paragraph_index,
            "document": FaissIndex.build(doc_vectors, doc_ids),
        },
        vectors={"sentence": torch.from_numpy(vectors), "document": torch.from_numpy(doc_vectors)},
        ids={"sentence": sentence_ids, "document": doc_ids, "paragraph": paragraph_ids},
        collection=RaggedCollection(
            torch.from_numpy(vectors),
            torch.from_numpy(paragraph_lengths),
            torch.from_numpy(document_lengths),
        ),
        doc_ids=doc_ids,
        external_ids=[f"d{i}" for i in range(n_docs)],
        titles=[""] * n_docs,
        paragraph_ids=paragraph_ids,
        doc_paragraph_start=doc_paragraph_start,
        paragraph_sentence_start=sentence_start,
        doc_unit_start={
            "paragraph": doc_paragraph_start,
            "sentence": sentence_start[doc_paragraph_start],
        },
    )


def candidate_latencies(
    searcher: Searcher, vectors: np.ndarray, rng: np.random.Generator
) -> list[float]:
    """Milliseconds of candidate mode for each of 20 queries: 20 to 79 of the collection's
    sentences, each moved by noise (0.3 of a standard normal, seeded by the query's number)."""
    n_sentences, dim = vectors.shape
    latencies = []
    for q in range(20):
        n = int(rng.integers(20, 80))
        source = torch.from_numpy(vectors[rng.choice(n_sentences, n, replace=False)])
        source = torch.nn.functional.normalize(
            source + 0.3 * torch.randn(n, dim, generator=torch.Generator().manual_seed(q)), dim=-1
        )
        query = Query(
            text="",
            paragraphs=[(0, 0)] * n,
            sentence_vectors=source,
            paragraph_lengths=torch.ones(n, dtype=torch.long),
            level_vectors={"document": source.mean(0, keepdim=True)},
            level_spans={},
        )
        started = time.perf_counter()
        searcher.similar(
            query, SimilarOptions(top_k=10, mode=ScoringMode.candidate, matches_per_result=0)
        )
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def synthetic_scale(n_sentences: int, dim: int, seed: int = 0) -> dict:
    """Candidate mode's p50 and p95 over a synthetic collection of at most `n_sentences`
    sentences of `dim` dimensions (seeded by `seed`), with its size, the sentence level's
    FAISS factory, the seconds its FAISS levels took to build and the peak RSS."""
    rng = np.random.default_rng(seed)
    paragraph_lengths, document_lengths = synthetic_lengths(n_sentences, rng)
    n_sentences = int(paragraph_lengths.sum())
    vectors = unit_rows(rng, n_sentences, dim)
    n_docs = len(document_lengths)
    doc_vectors = unit_rows(rng, n_docs, dim)
    started = time.perf_counter()
    sentence_index, paragraph_index, factory = faiss_levels(vectors, paragraph_lengths)
    build_s = time.perf_counter() - started
    index = synthetic_index(
        vectors, doc_vectors, paragraph_lengths, document_lengths, sentence_index, paragraph_index
    )
    searcher = Searcher(index, encoder=None, splitter=None, engine=None, settings=SearchSettings())  # type: ignore[arg-type]
    latencies = candidate_latencies(searcher, vectors, rng)
    return {
        "sentences": n_sentences,
        "documents": n_docs,
        "sentence_factory": factory,
        "index_build_s": round(build_s, 1),
        "candidate_p50_ms": float(np.percentile(latencies, 50)),
        "candidate_p95_ms": float(np.percentile(latencies, 95)),
        "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }
