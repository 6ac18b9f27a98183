"""A version's shingle postings on disk: written once in bounded memory, mapped by every
service that serves the version (one copy in the page cache, however many processes).

The folder is `<version folder>/shingles-<key>/`, the key a hash of what the postings depend
on: the layout, the version and its revision, its documents' ids, the shingle length, the
stemmer and bm25s's version (its tokenizer and stop words). Like the kept BM25 postings
(`postings_file`) it is a cache, not part of the version: written through a temporary folder
renamed to it, read where the key matches (damaged, ignored and built again), removed with
the version's folder.

The build never holds the collection's postings: each batch of documents' (key, row, count)
postings is appended to one of `B` bucket files by the top bits of its key (B grows with the
documents, `BUCKET_DOCUMENTS` to a bucket), then each bucket in turn is read, sorted by key
(stable, so that a key's rows stay ascending) and appended to the flat arrays. Buckets hold
ascending ranges of keys, so the arrays come out sorted. Memory: one batch's postings, then one
bucket's (about `BUCKET_DOCUMENTS` documents' worth), 16 bytes each, twice while sorting.

Files: `keys.bin` `(V,)` uint64 ascending; `starts.bin` `(V + 1,)` uint32 (int64 past 2**32
postings); `rows.bin` `(P,)` and `counts.bin` `(P,)` in the narrowest unsigned dtype that holds
them; `lengths.bin` `(N,)`
int64 each document's shingles; `meta.json` the sizes and dtypes."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from docsim.search.lexical.shingles import ShingleIndex, ShinglePart, flat_postings
from docsim.search.served.loaded_index import LoadedIndex

logger = logging.getLogger(__name__)
FORMAT = 1  # the layout of the folder, part of its key
BUCKET_DOCUMENTS = 4096  # documents' postings a bucket holds, about
MAX_BUCKETS = 1024
RECORD = np.dtype([("key", "<u8"), ("row", "<u4"), ("count", "<u4")])
ARRAYS = ("keys", "starts", "rows", "counts", "lengths")


def shingles_folder(index: LoadedIndex, n: int, stemmer: str | None) -> Path:
    """Where the `n`-word shingle postings of `index` tokenised with `stemmer` are kept."""
    import bm25s

    key = hashlib.sha256()
    named = f"{FORMAT}:{index.version_id}:{index.revision}:{n}:{stemmer}:{bm25s.__version__}"
    key.update(named.encode())
    key.update(np.sort(index.doc_ids).astype(np.int64).tobytes())
    return index.path / f"shingles-{key.hexdigest()[:16]}"


def bucket_count(n_documents: int) -> int:
    """The buckets of a build over `n_documents`: a power of two, `BUCKET_DOCUMENTS`
    documents to a bucket, 1 to `MAX_BUCKETS`."""
    wanted = max(1, -(-n_documents // BUCKET_DOCUMENTS))
    return min(MAX_BUCKETS, 1 << (wanted - 1).bit_length())


def _narrowest(top: int) -> np.dtype:
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


def _spill(
    folder: Path, batches: Iterable[Sequence[np.ndarray]], buckets: int
) -> tuple[list[int], int]:
    """Append every batch's postings to `buckets` files `<folder>/<b>.bucket` by their keys'
    top bits; each document's number of shingles, in order, and the largest count. Raises
    ValueError where a count does not fit the record."""
    shift = np.uint64(64 - (buckets.bit_length() - 1))  # keys >> shift: a key's bucket
    files = [open(folder / f"{b}.bucket", "ab") for b in range(buckets)]  # noqa: SIM115
    lengths: list[int] = []
    top_count = 0
    try:
        for shingles in batches:
            first = len(lengths)
            keys, rows, counts = flat_postings(np.arange(first, first + len(shingles)), shingles)
            lengths.extend(len(found) for found in shingles)
            records = np.empty(len(keys), RECORD)  # (p,)
            records["key"], records["row"], records["count"] = keys, rows, counts
            top_count = max(top_count, int(counts.max()) if len(counts) else 0)
            if top_count > np.iinfo(np.uint32).max:
                raise ValueError("a shingle repeated more than 2**32 times in one document")
            which = (keys >> shift).astype(np.int64) if buckets > 1 else np.zeros(len(keys), int)
            order = np.argsort(which, kind="stable")  # (p,) by bucket, rows kept ascending
            bounds = np.searchsorted(which[order], np.arange(buckets + 1))
            for b in np.flatnonzero(np.diff(bounds)).tolist():
                records[order[bounds[b] : bounds[b + 1]]].tofile(files[b])
    finally:
        for file in files:
            file.close()
    return lengths, top_count


def _merge(folder: Path, buckets: int, n_documents: int, top_count: int) -> dict[str, object]:
    """Sort each bucket by key into the flat files of `folder` (counts up to `top_count`);
    their sizes and dtypes."""
    row_dtype, count_dtype = _narrowest(max(n_documents - 1, 0)), _narrowest(top_count)
    total = sum((folder / f"{b}.bucket").stat().st_size for b in range(buckets)) // RECORD.itemsize
    start_dtype = np.dtype(np.uint32) if total <= np.iinfo(np.uint32).max else np.dtype(np.int64)
    n_keys = n_postings = 0
    with (
        open(folder / "keys.bin", "wb") as keys_file,
        open(folder / "starts.bin", "wb") as starts_file,
        open(folder / "rows.bin", "wb") as rows_file,
        open(folder / "counts.bin", "wb") as counts_file,
    ):
        for b in range(buckets):
            records = np.fromfile(folder / f"{b}.bucket", RECORD)  # (p,)
            (folder / f"{b}.bucket").unlink()
            records = records[np.argsort(records["key"], kind="stable")]
            keys = records["key"]
            first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]][: len(keys)])  # (v,)
            keys[first].tofile(keys_file)
            (first + n_postings).astype(start_dtype).tofile(starts_file)
            records["row"].astype(row_dtype).tofile(rows_file)
            records["count"].astype(count_dtype).tofile(counts_file)
            n_keys, n_postings = n_keys + len(first), n_postings + len(records)
        np.array([n_postings], start_dtype).tofile(starts_file)
    return {
        "sizes": {
            "keys": n_keys,
            "starts": n_keys + 1,
            "rows": n_postings,
            "counts": n_postings,
            "lengths": n_documents,
        },  # fmt: skip
        "dtypes": {
            "keys": "<u8",
            "starts": start_dtype.str,
            "rows": row_dtype.str,
            "counts": count_dtype.str,
            "lengths": "<i8",
        },  # fmt: skip
    }


def write_shingles(
    path: Path, batches: Iterable[Sequence[np.ndarray]], n_documents: int, n: int
) -> None:
    """Write the postings of `n_documents` documents, whose `n`-word shingle hashes come in
    `batches` (in row order), into the folder `path`, through a temporary folder renamed to it.

    Raises:
        OSError: the folder could not be written (nothing is left behind).
        ValueError: the batches hold another number of documents.
    """
    buckets = bucket_count(n_documents)
    partial = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        lengths, top_count = _spill(partial, batches, buckets)
        if len(lengths) != n_documents:
            raise ValueError(f"{n_documents} documents expected, {len(lengths)} shingled")
        meta = _merge(partial, buckets, n_documents, top_count)
        np.array(lengths, np.int64).tofile(partial / "lengths.bin")
        meta["n"] = n
        (partial / "meta.json").write_text(json.dumps(meta))
        # readable as the version's folder is (mkdtemp's folder is its owner's alone)
        os.chmod(partial, stat.S_IMODE(path.parent.stat().st_mode))
        os.rename(partial, path)  # refused where another service kept them first
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _mapped(path: Path, dtype: str, size: int) -> np.ndarray:
    if size == 0:
        return np.empty(0, dtype)
    if path.stat().st_size != size * np.dtype(dtype).itemsize:
        raise ValueError(f"{path.name} holds {path.stat().st_size} bytes, not {size} {dtype}")
    return np.asarray(np.memmap(path, dtype=dtype, mode="r", shape=(size,)))


def load_shingles(path: Path, doc_ids: np.ndarray, stemmer: str | None) -> ShingleIndex | None:
    """The shingle index kept in the folder `path` over the documents `doc_ids` `(N,)`
    (ascending), its postings mapped; None where there is none or it cannot be read."""
    if not path.is_dir():
        return None
    try:
        meta = json.loads((path / "meta.json").read_text())
        arrays = {
            name: _mapped(path / f"{name}.bin", meta["dtypes"][name], int(meta["sizes"][name]))
            for name in ARRAYS
        }
        if len(arrays["lengths"]) != len(doc_ids):
            raise ValueError(f"{len(arrays['lengths'])} documents, not {len(doc_ids)}")
        part = ShinglePart(arrays["keys"], arrays["starts"], arrays["rows"], arrays["counts"])
        lengths = np.array(arrays["lengths"])  # (N,) read whole: 8 bytes a document
        return ShingleIndex(
            int(meta["n"]), stemmer, np.asarray(doc_ids, np.int64), lengths,
            np.ones(len(doc_ids), bool), (part,),
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as error:
        logger.warning("Ignoring the kept shingle postings %s (%s): writing them", path.name, error)
        return None
