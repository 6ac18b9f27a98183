from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from app.api.deps import ApiKey, StateDep
from app.api.schemas import DocumentsChanged, DocumentsRequest, StoredDocument
from app.services import documents as service

router = APIRouter(prefix="/documents", tags=["documents"])
DocumentId = Annotated[str, Path(min_length=1, max_length=512)]


@router.post("", response_model=DocumentsChanged, dependencies=[ApiKey])
def upsert(request: DocumentsRequest, state: StateDep, http: Request) -> DocumentsChanged:
    """Add documents, or replace those whose id exists, in the active version (FAISS, BM25
    and SQL together); searchable when this returns. 409 while a reindex job runs."""
    return service.upsert(http.app.state.runtime, state, request)


@router.delete("/{document_id}", response_model=DocumentsChanged, dependencies=[ApiKey])
def remove(document_id: DocumentId, state: StateDep, http: Request) -> DocumentsChanged:
    """Delete a document: it never appears in results afterwards."""
    return service.remove(http.app.state.runtime, state, document_id)


@router.get("/{document_id}", response_model=StoredDocument)
def show(document_id: DocumentId, state: StateDep) -> StoredDocument:
    """A stored document: text, title, metadata and sections."""
    return service.show(state, document_id)
