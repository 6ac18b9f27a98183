"""POST /documents, DELETE /documents/{id}, GET /documents/{id}: change the served version in
place (`indexer.jobs.updates`), then serve the changed index (`Runtime.follow`)."""

from __future__ import annotations

import time

from docsim.app.core.errors import DocumentTooLargeError, IndexNotReadyError
from docsim.app.core.settings import ApiSettings
from docsim.app.schemas.documents import DocumentsRequest
from docsim.app.services.collections import Collection
from docsim.app.services.limits import posted_characters, posted_document, split_within_limits
from docsim.app.services.runtime import Runtime
from docsim.app.services.state import ServiceState
from docsim.app.services.uploads import UploadedFile, read_upload, upload_limits
from docsim.indexer.api import (
    Document,
    DocumentChange,
    SentenceSplitter,
    SourceDocument,
    active_version,
    apply_change,
    hold_data_dir,
    load_splitter,
    publish_first_version,
    stored_document_by_id,
)
from docsim.indexer.errors import (
    AlreadyPublishedError,
    BuildBusyError,
    ChangesQueuedError,
    EmptyDocumentError,
)

FIRST_CHANGE_POLL_SECONDS = 0.2  # how often a first change looks again while a build runs


def _sources(
    request: DocumentsRequest, splitter: SentenceSplitter, limits: ApiSettings
) -> list[tuple[SourceDocument, Document]]:
    """Every posted document, read, split and checked against the limits before anything
    changes: one refused document refuses the whole request, and so do more characters
    together than `max_change_characters`, before any is split."""
    posted = [item.model_dump(exclude_none=True) for item in request.documents]
    check_change_size(sum(posted_characters(p) for p in posted), limits)
    seen: set[str] = set()
    sources = []
    for item, fields in zip(request.documents, posted, strict=True):
        if item.id in seen:
            raise EmptyDocumentError(f"document {item.id!r} is given twice")
        seen.add(item.id)
        sources.append(posted_document(fields, splitter, limits, f"document {item.id!r}"))
    return sources


def check_change_size(characters: int, limits: ApiSettings) -> None:
    """Raises DocumentTooLargeError (413) when one write's documents hold more characters
    together than `max_change_characters`."""
    if characters > limits.max_change_characters:
        raise DocumentTooLargeError(
            f"the documents of this write hold {characters:,} characters or more together; "
            f"the limit is {limits.max_change_characters:,} (DOCSIM_API__MAX_CHANGE_CHARACTERS): "
            "send them in several writes"
        )


def newest_state(runtime: Runtime) -> ServiceState:
    """The served state, brought up to what SQL holds first when another process changed
    it: a change applies to the newest revision. The caller is the data directory's writer,
    so nothing in this process moves it meanwhile.

    Raises:
        NoActiveIndexError: nothing is published.
        IndexNotReadyError: the newest revision cannot be loaded (`failure` says why).
    """
    active_version(runtime.engine, runtime.collection)  # NoActiveIndexError first
    try:
        runtime.refresh()  # loads only when the served state is behind SQL
    except Exception as error:  # recorded in `failure`
        raise IndexNotReadyError(
            f"the active index could not be loaded ({runtime.failure}); retry later"
        ) from error
    state = runtime.state
    if state is None:
        raise IndexNotReadyError(
            f"the active index could not be loaded ({runtime.failure}); retry later"
        )
    return state


def check_writable(collection: Collection) -> None:
    """Raises `IndexNotReadyError` where this process cannot write the collection's folder."""
    if collection.runtime.unwritable is not None:
        reason = collection.runtime.unwritable
        raise IndexNotReadyError(f"document changes cannot be written here: {reason}")


def _change(collection: Collection, upserts: list[Document], deletes: list[str]) -> DocumentChange:
    """Apply one change as the data directory's writer (changes of this process and of
    others queue for up to `change_wait_seconds`), to the newest revision, and serve it
    before answering: a read that begins after the answer sees the change."""
    check_writable(collection)
    with hold_data_dir(collection.folder, "change", collection.settings.api.change_wait_seconds):
        state = newest_state(collection.runtime)
        searcher = state.searcher
        change = apply_change(
            collection.runtime.engine,
            version_id=state.version_id,
            revision=state.revision,
            upserts=upserts,
            deletes=deletes,
            encoder=searcher.encoder,
            splitter=searcher.splitter,
            chunk_tokens=int(searcher.index.manifest["chunk_tokens"]),
        )
        collection.runtime.follow(state, change)
    collection.runtime.purge()
    return change


def upsert(
    collection: Collection, state: ServiceState | None, request: DocumentsRequest
) -> DocumentChange:
    """Add or replace the posted documents; in a collection with no version yet, publish
    them as its first (`first_change`)."""
    splitter = _splitter(collection, state)
    read = _sources(request, splitter, collection.settings.api)
    if state is None:
        return first_change(collection, read, splitter)
    return _change(collection, [document for _source, document in read], [])


def _splitter(collection: Collection, state: ServiceState | None) -> SentenceSplitter:
    """The served version's splitter, or the configured one before the first version."""
    if state is not None:
        return state.searcher.splitter
    return load_splitter(collection.settings.punkt_params)


def first_change(
    collection: Collection, read: list[tuple[SourceDocument, Document]], splitter: SentenceSplitter
) -> DocumentChange:
    """The first change of a collection with no version: its documents published as its
    first version, or, when another writer published one first (a first change or a reindex
    job), applied to that version as an ordinary change. A build running meanwhile is waited
    for, as changes wait for each other (`change_wait_seconds`, then 429)."""
    check_writable(collection)
    sources = [source for source, _document in read]
    deadline = time.monotonic() + collection.settings.api.change_wait_seconds
    while True:
        try:
            change = publish_first_version(
                collection.settings, collection.runtime.engine, sources, splitter
            )
        except AlreadyPublishedError:
            return _change(collection, [document for _source, document in read], [])
        except BuildBusyError as error:
            if time.monotonic() >= deadline:
                raise ChangesQueuedError(str(error), retry_after=5) from error
            time.sleep(FIRST_CHANGE_POLL_SECONDS)
            continue
        collection.runtime.refresh()  # served before the answer: a later read sees it
        return change


def upsert_files(
    collection: Collection,
    state: ServiceState | None,
    uploads: list[UploadedFile],
    doc_id: str | None,
) -> DocumentChange:
    """Add or replace the uploaded files' documents: each file's id is its name without the
    extension (or `doc_id`, for one file). Every file is read and checked first: one that
    cannot be read refuses the whole request. In a collection with no version yet, they are
    its first (`first_change`)."""
    settings = collection.settings
    limits = upload_limits(settings)
    splitter = _splitter(collection, state)
    read: list[tuple[SourceDocument, Document]] = []
    seen: set[str] = set()
    characters = 0
    for upload in uploads:
        source = read_upload(upload, limits, doc_id)
        characters += len(source.text) + len(source.title or "")
        check_change_size(characters, settings.api)
        if source.doc_id in seen:
            raise EmptyDocumentError(f"document {source.doc_id!r} is given twice")
        seen.add(source.doc_id)
        what = f"file {upload.name!r}"
        read.append((source, split_within_limits(source, splitter, settings.api, what)))
    if state is None:
        return first_change(collection, read, splitter)
    return _change(collection, [document for _source, document in read], [])


def remove(collection: Collection, document_id: str) -> DocumentChange:
    return _change(collection, [], [document_id])


def show(state: ServiceState, document_id: str) -> SourceDocument:
    """The stored document `document_id` as the served revision holds it.

    Raises:
        DocumentNotFoundError: the served revision does not hold it.
    """
    index = state.searcher.index
    position = state.searcher.position(document_id)  # DocumentNotFoundError
    return stored_document_by_id(state.searcher.engine, int(index.doc_ids[position]))
