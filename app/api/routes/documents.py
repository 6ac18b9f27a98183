from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from docsim.app.api.bodies import form_body, invalid, is_form, json_body, request_body, validated
from docsim.app.api.deps import (
    ApiKey,
    CollectionDep,
    SettingsDep,
    StateDep,
    StateOrEmptyDep,
    write_paced,
)
from docsim.app.api.openapi import errors
from docsim.app.schemas.documents import (
    DocumentsRequest,
    DocumentsUpload,
    documents_changed,
    stored_document,
)
from docsim.app.services import documents as service
from docsim.app.services.uploads import UploadedFile
from docsim.protocol.answers import DocumentsChanged, StoredDocument

router = APIRouter(prefix="/documents", tags=["documents"])
# `:path` takes slashes: ids such as DOIs ("10.1000/xyz") are reachable raw or as %2F
DocumentId = Annotated[str, Path(min_length=1, max_length=512)]


def named(operation_id: str) -> dict[str, str]:
    """An operation id of the route's own (`openapi_extra`), the name its links use; under
    /collections/{collection} it gets the scoped suffix (`app.api.routes.collections`)."""
    return {"operationId": operation_id}


def _links_to_the_document(source: str) -> dict:
    """OpenAPI links from a change to the document it names (read it, delete it, post it
    again), so that clients and stateful fuzzers can follow one id through its life."""
    document_id = {"document_id": f"$response.body#/{source}/0"}
    return {
        "links": {
            "ShowDocument": {"operationId": "show_document", "parameters": document_id},
            "DeleteDocument": {"operationId": "delete_document", "parameters": document_id},
            "PostDocumentAgain": {
                "operationId": "upsert_documents",
                "requestBody": {
                    "documents": [
                        {"id": f"$response.body#/{source}/0", "text": "Posted again. Twice."}
                    ]
                },
            },
        }
    }


Upload = tuple[list[UploadedFile], str | None]


async def documents_body(http: Request, settings: SettingsDep) -> DocumentsRequest | Upload:
    """The JSON body, or the uploaded files (and an `id` for a single one)."""
    if not is_form(http):
        return await json_body(http, DocumentsRequest)
    form = await form_body(
        http,
        file_fields={"file"},
        scalar_fields={"id"},
        list_fields=set(),
        max_file_bytes=settings.files.max_bytes,
    )
    if not form.files:
        raise invalid("file", "give at least one document file here")
    if len(form.files) > 1 and "id" in form.fields:
        raise invalid("id", f"an id names one file; {len(form.files)} were given")
    fields = validated(DocumentsUpload, {**form.fields, "file": [b""] * len(form.files)})
    return form.files, fields.id


@router.post(
    "",
    response_model=DocumentsChanged,
    dependencies=[ApiKey],
    responses={200: _links_to_the_document("added"), **errors(429)},
    openapi_extra={**request_body(DocumentsRequest, DocumentsUpload), **named("upsert_documents")},
)
def upsert(
    http: Request,
    body: Annotated[DocumentsRequest | Upload, Depends(documents_body)],
    state: StateOrEmptyDep,
    collection: CollectionDep,
) -> DocumentsChanged:
    """Add documents, or replace those whose id exists, in the active version (FAISS, BM25
    and SQL together); searchable when this returns. In a collection created with no version
    yet, they are published as its first version, encoded with its encoder. 409 while a
    reindex job runs. JSON, or
    document files (PDF, Word, HTML, text, Markdown) uploaded as `multipart/form-data` in
    fields named `file`, each file's id its name without the extension."""
    started = time.perf_counter()
    with write_paced(http):
        if isinstance(body, DocumentsRequest):
            change = service.upsert(collection, state, body)
        else:
            change = service.upsert_files(collection, state, *body)
    return documents_changed(change, started)


@router.delete(
    "/{document_id:path}",
    response_model=DocumentsChanged,
    dependencies=[ApiKey],
    openapi_extra=named("delete_document"),
    responses={200: _links_to_the_document("deleted"), **errors(429)},
)
def remove(
    document_id: DocumentId, _state: StateDep, collection: CollectionDep
) -> DocumentsChanged:
    """Delete a document: it never appears in results afterwards."""
    started = time.perf_counter()
    change = service.remove(collection, document_id)
    return documents_changed(change, started)


@router.get(
    "/{document_id:path}", response_model=StoredDocument, openapi_extra=named("show_document")
)
def show(document_id: DocumentId, state: StateDep) -> StoredDocument:
    """A stored document: text, title, metadata and sections."""
    return stored_document(service.show(state, document_id), state.version_id)
