"""The inference backend of a build: which one, and the OpenVINO export it runs on.

`auto` is OpenVINO for a transformer or CoLDE encoder on the CPU when OpenVINO and NNCF are
installed, else `torch` (the graph encoder, and GPUs): `openvino-int8` where the CPU
multiplies int8 natively (`models.inference.precision.int8_native`: VNNI or AMX), `openvino-fp32`
where it does not (AVX2 alone). A build exports the encoder once per checkpoint and backend (cached,
`indexer.store.exported`), an int8 export calibrated on a seeded sample of the corpus's own
sentences and token chunks, then keeps a copy of the export in the version's folder: queries
against that version are encoded by the same model.
"""

from __future__ import annotations

import logging
import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from docsim.indexer.errors import BackendError
from docsim.indexer.settings import Settings
from docsim.indexer.store.exported import (
    cache_key,
    copy_into_version,
    publish_export,
    read_calibration,
)
from docsim.indexer.store.manifest import BackendEntry
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.documents import Document
from docsim.models.encoders.encoder import Encoder, OpenVinoExportable
from docsim.models.errors import BackendUnavailableError
from docsim.models.inference.backends import (
    BUILD_SHAPE_CACHE_CAPACITY,
    OPENVINO_BACKENDS,
    OPENVINO_INT8,
    TORCH,
    native_openvino_backend,
    openvino_available,
    runtime_versions,
)

logger = logging.getLogger(__name__)

CALIBRATION_SEED = 0
CALIBRATION_DOCUMENTS = 64  # documents whose chunks are sampled
TRACE_TEXTS = ["A float32 export traces the graph on this sentence alone."]


def cache_root(settings: Settings) -> Path:
    """Where exported encoders are cached."""
    return settings.encoder.cache_dir or settings.data_dir / "encoders"


def resolve_backend(settings: Settings, encoder: Encoder) -> str:
    """The backend a build with `encoder` uses under the configured `encoder.backend`.

    Raises:
        BackendError: an OpenVINO backend asked for an encoder or a device it cannot run.
    """
    asked = settings.encoder.backend
    if asked == TORCH:
        return TORCH
    fits = isinstance(encoder, OpenVinoExportable)
    device = getattr(encoder, "device", None)  # not part of `Encoder`: torch encoders have one
    on_cpu = device is not None and device.type == "cpu"
    if asked == "auto":
        if not (fits and on_cpu and openvino_available()):
            return TORCH
        return native_openvino_backend()
    if not fits:
        raise BackendError(
            f"the {asked} backend runs transformer and CoLDE encoders; "
            f"{encoder.name!r} is a {type(encoder).__name__}: use "
            f"DOCSIM_ENCODER__BACKEND=torch"
        )
    if not on_cpu:
        raise BackendError(f"the {asked} backend runs on the CPU, not {device}")
    if not openvino_available():
        raise BackendError(f"the {asked} backend needs `pip install openvino nncf`")
    return asked


def calibration_texts(
    docs: Sequence[Document], encoder: Encoder, capacity: int, settings: Settings
) -> tuple[list[str], list[str]]:
    """A seeded sample of the corpus's sentences and token chunks (the int8 ranges must
    cover what the build will encode: short sentences and full-length chunks).

    `docs` is read twice in order and by position, never held whole (a build passes its
    `SplitPlan`): the sample is drawn by position (`random.sample` picks the same positions
    from any population of the same size), then the picked sentences are read."""
    rng = random.Random(CALIBRATION_SEED)
    n_total = sum(doc.counts()["sentence"] for doc in docs)
    positions = rng.sample(range(n_total), min(settings.encoder.calibration_sentences, n_total))
    wanted = dict.fromkeys(positions, "")
    at = 0
    for doc in docs:
        for sentence in doc.sentences():
            if at in wanted:
                wanted[at] = doc.text[sentence.start : sentence.end]
            at += 1
    picked = [wanted[p] for p in positions]
    doc_positions = rng.sample(range(len(docs)), min(CALIBRATION_DOCUMENTS, len(docs)))
    sample_docs = [docs[p] for p in doc_positions]
    chunks = [
        doc.text[c.start : c.end]
        for doc in add_chunks(sample_docs, encoder, capacity)
        for c in doc.chunks
    ]
    n_chunks = min(settings.encoder.calibration_chunks, len(chunks))
    return picked, rng.sample(chunks, n_chunks)


def prepare_backend(
    settings: Settings,
    encoder: Encoder,
    docs: Sequence[Document],
    *,
    capacity: int,
    corpus_label: str,
) -> BackendEntry:
    """Put `encoder` on the build's backend: find (or make) its int8 export and run on it.
    Returns the manifest's `backend` record (`{"name": "torch"}` for torch).

    Raises:
        BackendError: see `resolve_backend`, or the export failed.
    """
    backend = resolve_backend(settings, encoder)
    if backend not in OPENVINO_BACKENDS:
        return {"name": TORCH}
    assert isinstance(encoder, OpenVinoExportable)
    key = cache_key(encoder.identity(), backend, runtime_versions())
    root = cache_root(settings)
    target = root / key if key else None
    if target is None or not (target / "model.xml").is_file():
        target = _export(settings, encoder, docs, capacity, corpus_label, root, target, backend)
    else:
        logger.info("Using the cached %s export of %s in %s", backend, encoder.name, target)
    try:
        encoder.use_openvino(
            target, streams=settings.encoder.streams, shape_cache=BUILD_SHAPE_CACHE_CAPACITY
        )
    except BackendUnavailableError as error:
        raise BackendError(str(error)) from error
    return {"name": backend, "calibration": read_calibration(target)}


def _export(
    settings: Settings,
    encoder: OpenVinoExportable,
    docs: Sequence[Document],
    capacity: int,
    corpus_label: str,
    root: Path,
    target: Path | None,
    backend: str,
) -> Path:
    started = time.perf_counter()
    int8 = backend == OPENVINO_INT8
    sentences, chunks = (
        calibration_texts(docs, encoder, capacity, settings) if int8 else (TRACE_TEXTS, [])
    )
    sample = {"corpus": corpus_label, "sentences": len(sentences), "chunks": len(chunks)}
    logger.info(
        "Exporting %s to %s%s",
        encoder.name,
        backend,
        ", calibrated on {sentences} sentences and {chunks} chunks of {corpus}".format(**sample)
        if int8
        else "",
    )
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f".partial-{time.time_ns()}"
    try:
        encoder.export_openvino(sentences + chunks, partial, int8=int8)
    except Exception as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise BackendError(f"exporting {encoder.name!r} to {backend} failed: {error}") from error
    calibration = {
        **({**sample, "seed": CALIBRATION_SEED} if int8 else {}),
        "seconds": round(time.perf_counter() - started, 1),
        **runtime_versions(),
    }
    if target is None:  # no checkpoint to key a cache entry by: this build's own export
        target = root / partial.name.replace(".partial-", "uncached-")
    publish_export(partial, target, calibration)
    logger.info("Exported %s in %.1f s to %s", encoder.name, calibration["seconds"], target)
    return target


def install_backend(encoder: Encoder, folder: Path) -> str | None:
    """Copy the export `encoder` runs on into the version's folder; its folder name relative
    to the version (None for torch)."""
    directory = getattr(getattr(encoder, "backend", None), "directory", None)
    if directory is None:
        return None
    return copy_into_version(Path(directory), folder).name
