"""A collection's first version, published from the documents of its first change: a
collection created through the API takes documents at once, as an Elasticsearch index or a
Qdrant collection does, with no corpus and no reindex job.

The first change is a build of its documents (`build_index(first_version=True)`), with the
collection's configured encoder; it holds the data directory as every build does. A build
that finds a version published meanwhile (another first change, or a reindex job, won the
race) gives way: the caller applies its documents as an ordinary change on that version, so
no acknowledged document is lost and none is published twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import Engine

from docsim.indexer.builder.field_checks import BuildFieldTypes
from docsim.indexer.builder.pipeline import build_index
from docsim.indexer.jobs.updates import DocumentChange
from docsim.indexer.settings import Settings, load_configured_encoder
from docsim.indexer.text.documents import SourceDocument
from docsim.indexer.text.field_types import check_metadata
from docsim.indexer.text.sentences import SentenceSplitter

logger = logging.getLogger(__name__)


def publish_first_version(
    settings: Settings,
    engine: Engine,
    documents: Sequence[SourceDocument],
    splitter: SentenceSplitter,
) -> DocumentChange:
    """Build and publish the collection's first version from `documents` (already checked
    against the API's limits), with the encoder its settings name.

    Raises:
        MetadataTypeError: a metadata value not of its field's type (nothing is built).
        AlreadyPublishedError: the collection has a version by the time the build holds the
            data directory (apply the documents as a change instead).
        BuildBusyError: another build holds the data directory.
    """
    types = BuildFieldTypes.of_collection(engine, settings.collection)
    for document in documents:
        what = f"document {document.doc_id!r}"
        types.types.update(check_metadata(types.types, document.metadata, what))
    encoder = load_configured_encoder(settings)
    result = build_index(
        None,
        settings=settings,
        engine=engine,
        encoder=encoder,
        splitter=splitter,
        documents=list(documents),
        source_label="the documents of the collection's first change",
        show_progress=False,
        first_version=True,
    )
    logger.info(
        "Collection %r: first version %d published from %d posted documents",
        settings.collection,
        result.version_id,
        len(documents),
    )
    return DocumentChange(
        version_id=result.version_id, revision=0, added=[d.doc_id for d in documents]
    )
