"""POST /documents, DELETE /documents/{id}, GET /documents/{id}: change the served version in
place (`indexer.jobs.updates`), then serve the changed index (`Runtime.follow`)."""

from __future__ import annotations

from app.core.config import ApiSettings
from app.schemas.documents import DocumentsRequest
from app.services.limits import posted_document
from app.services.runtime import Runtime
from app.services.state import ServiceState
from indexer.builder.pipeline import prepare_data_dir
from indexer.jobs.updates import DocumentChange, change_documents
from indexer.search.types import DocumentNotFoundError
from indexer.store.reader import stored_document
from indexer.text.documents import Document, SourceDocument
from indexer.text.sentences import SentenceSplitter
from indexer.text.split import EmptyDocumentError


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


def upsert(runtime: Runtime, state: ServiceState, request: DocumentsRequest) -> DocumentChange:
    sources = _sources(request, state.searcher.splitter, runtime.settings.api)
    return _change(runtime, state, sources, [])


def remove(runtime: Runtime, state: ServiceState, document_id: str) -> DocumentChange:
    return _change(runtime, state, [], [document_id])


def show(state: ServiceState, document_id: str) -> SourceDocument:
    """The stored document `document_id` of the served version.

    Raises:
        DocumentNotFoundError: the served version does not hold it.
    """
    source = stored_document(state.searcher.engine, state.version_id, document_id)
    if source is None:
        raise DocumentNotFoundError(f"document {document_id!r} is not in the active index")
    return source
