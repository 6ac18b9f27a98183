"""Service settings: the indexer's settings plus the HTTP edge's own group (`DOCSIM_API__*`)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, Field

from indexer.config import Settings


class ApiSettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = 8000
    max_document_bytes: int = Field(default=2_000_000, ge=1, description="Posted text limit (413).")
    max_sentences: int = Field(default=20_000, ge=1, description="Posted sentence limit (413).")
    exhaustive_max_sentences: int = Field(
        default=2_000_000,
        description="`auto` scores every document up to this many indexed sentences.",
    )


class ServiceSettings(Settings):
    api: ApiSettings = ApiSettings()


@lru_cache
def get_service_settings() -> ServiceSettings:
    return ServiceSettings()
