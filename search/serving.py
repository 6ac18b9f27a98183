"""Serving the active version: opening it for search (its index, the encoder it was built with,
checked to be that one, and the sentence splitter), and on Ray shard actors when configured.

The composition root of search: the one place that reads the settings object and hands each
part what it needs."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import Engine

from docsim.indexer.ray_session import connect_ray
from docsim.indexer.settings import load_configured_encoder
from docsim.indexer.store.vector_index import FaissIndex, gpu_count
from docsim.indexer.store.versions import active_version
from docsim.indexer.text.sentences import load_splitter
from docsim.models.errors import BackendUnavailableError
from docsim.models.inference.backends import TORCH
from docsim.models.inference.precision import resolve_device
from docsim.search.errors import IndexMismatchError
from docsim.search.ranking.pool import first_pass
from docsim.search.searcher import Searcher
from docsim.search.served.lazy_scan import LazyScan
from docsim.search.served.loaded_index import COMPRESSED_SEARCHED, LoadedIndex
from docsim.search.served.sentence_scan import ScanShape, SentenceScan
from docsim.search.settings import QuerySettings
from docsim.search.shards.actors import shard_specs
from docsim.search.shards.coordinator import ShardedLevel, ShardedSdr
from docsim.search.shards.ray_shards import RayShards, ShardPlacementError
from docsim.search.shards.shard import SEARCHED_ON_SHARDS

logger = logging.getLogger(__name__)


def open_searcher(settings: QuerySettings, engine: Engine, *, sharded: bool = False) -> Searcher:
    """A searcher over the active version, with the encoder that version was built with
    (`sharded`: a sharded service's coordinator, see `LoadedIndex.mapped_levels`).

    Raises:
        NoActiveIndexError: nothing published yet.
        IndexMismatchError: the encoder found now is not the one the index was built with.
    """
    version = active_version(engine, settings.collection)
    compressed = sentences_compressed(settings, sharded=sharded)
    index = LoadedIndex.load(engine, version, sharded=sharded, map_sentences=compressed)
    if settings.index.use_gpu == "auto" and gpu_count() > 0:  # faiss-gpu sees a GPU
        on_gpu = {  # every level's search is its FAISS index yet: shards come later
            level: held.to_gpu() if isinstance(held, FaissIndex) else held
            for level, held in index.indices.items()
        }
        index = replace(index, indices=on_gpu)
    recorded = index.manifest["encoder"]
    source = recorded.get("source") or recorded["name"]
    backend = index.manifest.get("backend") or {"name": TORCH}  # older versions: torch
    backend_dir = index.path / backend["dir"] if backend.get("dir") else None
    try:
        encoder = load_configured_encoder(
            settings, source, backend_dir, recorded.get("chunk_vectors") or "encode", shared=True
        )
    except BackendUnavailableError as error:
        raise IndexMismatchError(
            f"version {version.version_id} was built on the {backend['name']} backend, which "
            f"cannot run here: {error}"
        ) from error
    check_encoder(recorded, encoder.identity(), source, version.version_id)
    splitter = load_splitter(settings.punkt_params)
    if splitter.sha256 != index.manifest["splitter"]["params_sha256"]:
        logger.warning("The sentence splitter differs from the one the index was built with")
    search = settings.search
    shape = ScanShape(search.scan.dimensions, search.scan.group, search.seed)
    # above `exhaustive.max_sentences` every default query takes its candidates from the
    # cells or the compressed sentence level, not the paragraphs (unless the `neighbours`
    # generator is chosen): the other compressed levels wait for a search of their own
    n_sentences = len(index.ids["sentence"])
    deferred = (
        n_sentences > search.exhaustive.max_sentences
        and first_pass(search, compressed, n_sentences) != "neighbours"
    )
    sentence_scan = SentenceScan.of_index(index, shape) if compressed else None
    scans: dict[str, SentenceScan | LazyScan] = {
        level: LazyScan(index, shape, level)
        if deferred
        else SentenceScan.of_index(index, shape, level)
        for level in (COMPRESSED_SEARCHED if compressed else ())
        if level != "sentence"
    }
    return Searcher(
        index,
        encoder,
        splitter,
        engine,
        search,
        device=settings.encoder.device,  # SDR scoring beside the encoder
        scan=sentence_scan,
        unit_scans=scans,
    )


def sentences_compressed(settings: QuerySettings, *, sharded: bool) -> bool:
    """Whether this process serves the sentence level compressed
    (`SearchSettings.sentence_store`): `auto` compresses it on a CPU service. A sharded
    coordinator never does: it scores no sentences, its shards do (`shards_scan`)."""
    store = settings.search.sentence_store
    if sharded:
        return False
    if store == "auto":
        return bool(resolve_device(settings.encoder.device).type == "cpu")
    return store == "compressed"


def shards_scan(settings: QuerySettings) -> ScanShape | None:
    """How the shard actors compress their sentences: with `compressed`, or `auto` when a
    shard has no GPU (a GPU shard scores the float16 rows exactly, faster); None: exactly."""
    search = settings.search
    store = search.sentence_store
    if store == "compressed" or (store == "auto" and not settings.shards.gpus):
        return ScanShape(search.scan.dimensions, search.scan.group, search.seed)
    return None


def check_encoder(
    recorded: dict[str, Any], found: dict[str, Any], source: str, version_id: int
) -> None:
    """The encoder found now must be the one the version was built with: the same
    configuration and, when the build recorded one, the same checkpoint (weights) sha256.

    Raises:
        IndexMismatchError: naming what differs (both hashes).
    """
    for key, what in (("config_hash", "configuration"), ("checkpoint_sha256", "checkpoint")):
        want, have = recorded.get(key), found.get(key)
        if want is not None and have != want:
            raise IndexMismatchError(
                f"the encoder at {source!r} is not the one version {version_id} was built with: "
                f"its {what} sha256 is {have}, the index recorded {want}; load the encoder the "
                "index was built with, or reindex with this one"
            )
    want_backend = recorded.get("backend") or {"name": TORCH}
    have_backend = found.get("backend") or {"name": TORCH}
    for key in ("name", "sha256"):
        if want_backend.get(key) != have_backend.get(key):
            raise IndexMismatchError(
                f"version {version_id} was encoded on the {want_backend['name']} backend "
                f"({key} {want_backend.get(key)}), but its encoder loads as "
                f"{have_backend['name']} ({key} {have_backend.get(key)}): its exported model "
                "is missing or changed; reindex"
            )


def serve_on_shards(
    settings: QuerySettings, searcher: Searcher, make_room: Callable[[], None] | None = None
) -> RayShards:
    """Start `settings.shards.count` shard actors over the searcher's version (on the
    configured Ray, or a local one started for the service) and let the searcher score on
    them; returns the actors, which the caller closes when the version is retired.

    A new version's shards start beside the serving ones. Where the cluster has no room for
    both, `make_room` (if given) closes the serving ones first: queries get a 503 with a
    retry hint until the new shards answer, rather than the swap failing.
    """
    connect_ray(settings)
    options = settings.shards
    index = searcher.index
    started = time.perf_counter()
    scan = shards_scan(settings)
    specs = shard_specs(index, searcher.tiebreak, options.count, scan)
    place = functools.partial(
        RayShards,
        specs,
        num_cpus=options.cpus,
        num_gpus=options.gpus,
        node_resource=options.node_resource,
        spread=options.spread,
        timeout=options.call_timeout_seconds,
        load_timeout=options.load_timeout_seconds,
    )
    try:
        shards = place()
    except ShardPlacementError as error:
        if make_room is None or not error.busy:
            raise
        logger.warning(
            "%s; closing the serving shards first (queries get 503 until the new ones "
            "answer). Ask for at most half the cluster per version to swap without a gap.",
            error,
        )
        make_room()
        shards = place(wait_for_room=options.call_timeout_seconds)
    n = len(shards.actors)
    searcher.use_shards(
        ShardedSdr(shards.call, n, searcher.tiebreak, compressed=scan is not None),
        {
            level: ShardedLevel(shards.call, n, level, index.ids[level])
            for level in SEARCHED_ON_SHARDS
            if level in index.mapped_levels
        },
    )
    logger.info(
        "Version %d (revision %d) on %d shard actors, loaded in %.1f s",
        index.version_id,
        index.revision,
        len(shards.actors),
        time.perf_counter() - started,
    )
    return shards
