from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Request

from app.api.deps import ApiKey, StateDep
from app.schemas.documents import DocumentsChanged, DocumentsRequest, StoredDocument
from app.services import documents as service

router = APIRouter(prefix="/documents", tags=["documents"])
# `:path` takes slashes: ids such as DOIs ("10.1000/xyz") are reachable raw or as %2F
DocumentId = Annotated[str, Path(min_length=1, max_length=512)]


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


@router.post(
    "",
    response_model=DocumentsChanged,
    dependencies=[ApiKey],
    operation_id="upsert_documents",
    responses={200: _links_to_the_document("added")},
)
def upsert(request: DocumentsRequest, state: StateDep, http: Request) -> DocumentsChanged:
    """Add documents, or replace those whose id exists, in the active version (FAISS, BM25
    and SQL together); searchable when this returns. 409 while a reindex job runs."""
    started = time.perf_counter()
    change = service.upsert(http.app.state.runtime, state, request)
    return DocumentsChanged.from_change(change, started)


@router.delete(
    "/{document_id:path}",
    response_model=DocumentsChanged,
    dependencies=[ApiKey],
    operation_id="delete_document",
    responses={200: _links_to_the_document("deleted")},
)
def remove(document_id: DocumentId, state: StateDep, http: Request) -> DocumentsChanged:
    """Delete a document: it never appears in results afterwards."""
    started = time.perf_counter()
    change = service.remove(http.app.state.runtime, state, document_id)
    return DocumentsChanged.from_change(change, started)


@router.get("/{document_id:path}", response_model=StoredDocument, operation_id="show_document")
def show(document_id: DocumentId, state: StateDep) -> StoredDocument:
    """A stored document: text, title, metadata and sections."""
    return StoredDocument.from_source(service.show(state, document_id), state.version_id)
