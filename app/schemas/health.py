"""GET /health and GET /ready."""

from __future__ import annotations

from pydantic import BaseModel


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    index_version: int
    documents: int
