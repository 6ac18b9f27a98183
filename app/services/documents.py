"""POST /documents, DELETE /documents/{id}, GET /documents/{id}: change the served version in
place (`indexer.updates`), then serve the changed index (`Runtime.follow`)."""

from __future__ import annotations

import time

from app.api.schemas import DocumentsChanged, DocumentsRequest, SectionText, StoredDocument
from app.core.config import ApiSettings
from app.services.limits import posted_document
from app.services.runtime import Runtime
from app.services.state import ServiceState
from indexer.documents import Document
from indexer.pipeline import prepare_data_dir
from indexer.reader import stored_document
from indexer.search import DocumentNotFoundError
from indexer.sentences import SentenceSplitter
from indexer.split import EmptyDocumentError
from indexer.updates import DocumentChange, change_documents


def _sources(
    request: DocumentsRequest, splitter: SentenceSplitter, limits: ApiSettings
) -> list[Document]:
    """Every posted document, read, split and checked against the limits before anything
    changes: one refused document refuses the whole request."""
    seen: set[str] = set()
    sources = []
    for item in request.documents:
        if item.id in seen:
            raise EmptyDocumentError(f"document {item.id!r} is given twice")
        seen.add(item.id)
        posted = item.model_dump(exclude_none=True)
        _, document = posted_document(posted, splitter, limits, f"document {item.id!r}")
        sources.append(document)
    return sources


def _change(
    runtime: Runtime, state: ServiceState, upserts: list[Document], deletes: list[str]
) -> DocumentChange:
    searcher = state.searcher
    change = change_documents(
        runtime.engine,
        prepare_data_dir(runtime.settings.data_dir),
        version_id=state.version_id,
        revision=state.revision,
        upserts=upserts,
        deletes=deletes,
        encoder=searcher.encoder,
        splitter=searcher.splitter,
        chunk_tokens=int(searcher.index.manifest["chunk_tokens"]),
    )
    runtime.follow(state, change)
    return change


def upsert(runtime: Runtime, state: ServiceState, request: DocumentsRequest) -> DocumentsChanged:
    started = time.perf_counter()
    sources = _sources(request, state.searcher.splitter, runtime.settings.api)
    change = _change(runtime, state, sources, [])
    return DocumentsChanged(
        index_version=change.version_id,
        revision=change.revision,
        added=change.added,
        replaced=change.replaced,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
    )


def remove(runtime: Runtime, state: ServiceState, document_id: str) -> DocumentsChanged:
    started = time.perf_counter()
    change = _change(runtime, state, [], [document_id])
    return DocumentsChanged(
        index_version=change.version_id,
        revision=change.revision,
        deleted=change.deleted,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
    )


def show(state: ServiceState, document_id: str) -> StoredDocument:
    source = stored_document(state.searcher.engine, state.version_id, document_id)
    if source is None:
        raise DocumentNotFoundError(f"document {document_id!r} is not in the active index")
    return StoredDocument(
        id=source.doc_id,
        title=source.title,
        text=source.text,
        metadata=dict(source.metadata),
        sections=[SectionText(title=s.title, start=s.start, end=s.end) for s in source.sections],
        index_version=state.version_id,
    )
