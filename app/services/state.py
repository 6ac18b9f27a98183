"""Loading what the service needs to answer: the active version, its encoder, a searcher."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine

from app.core.config import ServiceSettings
from indexer.reader import IndexMismatchError, LoadedIndex
from indexer.search import SearchConfig, Searcher
from indexer.sentences import load_splitter
from indexer.store import active_version
from models.loading import load_encoder
from models.precision import resolve_device

logger = logging.getLogger(__name__)


@dataclass
class ServiceState:
    searcher: Searcher
    version_id: int
    encoder_name: str


def load_state(settings: ServiceSettings, engine: Engine) -> ServiceState:
    """Load the active version and the encoder it was built with.

    Raises:
        NoActiveIndexError: nothing published yet.
        IndexMismatchError: the encoder found now is not the one the index was built with.
    """
    version = active_version(engine)
    index = LoadedIndex.load(engine, version)
    identity = index.manifest["encoder"]
    source = identity.get("source") or identity["name"]
    encoder = load_encoder(
        source,
        device=resolve_device(settings.encoder.device),
        precision=settings.encoder.precision,
        batch_tokens=settings.encoder.batch_tokens,
        max_batch_size=settings.encoder.max_batch_size,
    )
    if encoder.identity()["config_hash"] != identity["config_hash"]:
        raise IndexMismatchError(
            f"the encoder at {source!r} is not the one version {version.version_id} was built with"
        )
    splitter = load_splitter(settings.punkt_params)
    if splitter.sha256 != index.manifest["splitter"]["params_sha256"]:
        logger.warning("The sentence splitter differs from the one the index was built with")
    config = SearchConfig(exhaustive_max_sentences=settings.api.exhaustive_max_sentences)
    searcher = Searcher(index, encoder, splitter, engine, config)
    return ServiceState(searcher=searcher, version_id=version.version_id, encoder_name=encoder.name)
