"""A version's BM25 document postings kept beside it, so that a service started again maps
them instead of tokenising every judgment (at a hundred times AILA, 291,400 judgments, the
build takes about half an hour on 2 cores; mapping them back, seconds).

The folder is `<version folder>/bm25-<key>/`, the key a hash of what the postings depend on:
the layout, the version, its revision, its documents' ids, the stemmer, and bm25s's version
(its tokenizer and stop words). Like the kept cells it is a cache, not part of the version:
written atomically after a build (a temporary folder renamed; a failure to write is logged and
ignored), read where the key matches (damaged, it is ignored and built again), removed with
the version's folder.

The arrays are flat `.npy` files: each posting a slice of one ids array and one counts array,
each document's forward entry a slice of one tokens array and one counts array. The index read
back holds views of the four large ones mapped from the files (`FLAT`: a query touches the
pages of its terms' postings and of its feedback documents', which the kernel may drop again,
instead of anonymous memory for all of them), the same values in the same dtypes (or one dtype
wider, where a changed posting was wider than the rest)."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

import numpy as np

from docsim.search.lexical.bm25 import Bm25Index
from docsim.search.lexical.posting_lists import Vocabulary, compact
from docsim.search.served.loaded_index import LoadedIndex

logger = logging.getLogger(__name__)
FORMAT = 2  # the layout of the folder, part of its key
FLAT = ("posting_ids", "posting_counts", "terms", "term_counts")  # mapped, not read
KEPT = (  # read whole: a few bytes a token or a document
    "words",
    "posting_tokens",
    "posting_starts",
    "doc_ids",
    "lengths",
    "term_starts",
    "base",
    "n_words",
)


def postings_file(index: LoadedIndex, stemmer: str | None) -> Path:
    """Where the document postings of `index` tokenised with `stemmer` are kept."""
    import bm25s

    key = hashlib.sha256()
    named = f"{FORMAT}:{index.version_id}:{index.revision}:{stemmer}:{bm25s.__version__}"
    key.update(named.encode())
    key.update(np.sort(index.doc_ids).astype(np.int64).tobytes())
    return index.path / f"bm25-{key.hexdigest()[:16]}"


def _flat(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """`parts` concatenated `(P,)` (one dtype for all) and where each starts `(n + 1,)`."""
    starts = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=starts[1:])
    if not parts:
        return np.empty(0, np.uint16), starts
    widest = np.result_type(*(p.dtype for p in parts))
    return compact(np.concatenate(parts).astype(widest, copy=False)), starts


def _arrays(bm25: Bm25Index) -> dict[str, np.ndarray]:
    """`bm25`'s postings and forward entries as flat arrays."""
    vocabulary = bm25._vocabulary
    tokens = list(bm25._postings)
    posting_ids, posting_starts = _flat([bm25._postings[t][0] for t in tokens])
    posting_counts, _ = _flat([bm25._postings[t][1] for t in tokens])
    doc_ids = bm25.doc_ids.tolist()
    terms, term_starts = _flat([bm25._terms[d] for d in doc_ids])
    term_counts, _ = _flat([bm25._counts[d] for d in doc_ids])
    words = "\n".join(vocabulary.words).encode()
    return {
        "words": np.frombuffer(words, np.uint8),  # the vocabulary, newline-separated UTF-8
        "posting_tokens": np.array([vocabulary.ids[t] for t in tokens], np.int64),  # (T,)
        "posting_starts": posting_starts,  # (T + 1,)
        "posting_ids": posting_ids,  # (P,) less `base`
        "posting_counts": posting_counts,  # (P,)
        "doc_ids": bm25.doc_ids,  # (N,) ascending
        "lengths": np.array([bm25._lengths[d] for d in doc_ids], np.int64),  # (N,)
        "term_starts": term_starts,  # (N + 1,)
        "terms": terms,  # (F,) vocabulary ids
        "term_counts": term_counts,  # (F,)
        "base": np.array(bm25._base, np.int64),
        "n_words": np.array(len(vocabulary.words), np.int64),
    }


def save_postings(path: Path, bm25: Bm25Index) -> bool:
    """Write `bm25` (a whole index, not a shard's) into the folder `path` through a temporary
    folder of its own renamed to it; whether it was kept (not: logged)."""
    partial: Path | None = None
    try:
        arrays = _arrays(bm25)
        partial = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        for name, array in arrays.items():
            np.save(partial / f"{name}.npy", array)
        # readable as the version's folder is (mkdtemp's folder is its owner's alone)
        os.chmod(partial, stat.S_IMODE(path.parent.stat().st_mode))
        os.rename(partial, path)  # refused where another service kept them first
        return True
    except (OSError, ValueError) as error:
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)
        logger.warning("Could not keep the BM25 postings in %s: %s", path.name, error)
        return False


def _index(saved: dict[str, np.ndarray], stemmer: str | None) -> Bm25Index:
    words = bytes(saved["words"]).decode().split("\n") if int(saved["n_words"]) else []
    if len(words) != int(saved["n_words"]):
        raise ValueError(f"{len(words)} words, the file says {int(saved['n_words'])}")
    vocabulary = Vocabulary(words)
    ids, counts, starts = saved["posting_ids"], saved["posting_counts"], saved["posting_starts"]
    postings = {
        words[token]: (ids[starts[i] : starts[i + 1]], counts[starts[i] : starts[i + 1]])
        for i, token in enumerate(saved["posting_tokens"].tolist())
    }
    doc_ids = saved["doc_ids"].tolist()
    terms, term_counts, starts = saved["terms"], saved["term_counts"], saved["term_starts"]
    forward = [slice(starts[i], starts[i + 1]) for i in range(len(doc_ids))]
    return Bm25Index(
        postings,
        dict(zip(doc_ids, saved["lengths"].tolist(), strict=True)),
        {d: terms[s] for d, s in zip(doc_ids, forward, strict=True)},
        {d: term_counts[s] for d, s in zip(doc_ids, forward, strict=True)},
        stemmer,
        vocabulary=vocabulary,
        base=int(saved["base"]),
    )


def load_postings(path: Path, stemmer: str | None) -> Bm25Index | None:
    """The postings kept in the folder `path` (`FLAT` mapped), or None where there are none
    or they cannot be read."""
    if not path.is_dir():
        return None
    try:
        saved = {
            name: np.asarray(np.load(path / f"{name}.npy", mmap_mode="r" if name in FLAT else None))
            for name in (*FLAT, *KEPT)
        }
        return _index(saved, stemmer)
    except (OSError, ValueError, KeyError, IndexError, EOFError) as error:
        logger.warning("Ignoring the kept BM25 postings %s (%s): building them", path.name, error)
        return None
