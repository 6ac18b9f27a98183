"""What every request body shares: unknown fields refused, documents as text or sections."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field, model_validator

from indexer.text.corpus import has_nul


def took_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()` reading), as responses report."""
    return round((time.perf_counter() - started) * 1000, 2)


class RequestModel(BaseModel):
    """A request body: no string in it may hold a NUL character (PostgreSQL text cannot store
    one, and no document needs it), which is a 422, not a database error."""

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        if has_nul(data):
            raise ValueError("text must not contain NUL characters (\\u0000)")
        return data


class SectionIn(RequestModel):
    title: str = ""
    text: str


class DocumentIn(RequestModel):
    """A document as in DESIGN.md section 2: `text`, or `sections` with titles."""

    id: str | None = None
    title: str = ""
    text: str | None = None
    sections: list[SectionIn] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _text_or_sections(self) -> DocumentIn:
        if (self.text is None) == (self.sections is None):
            raise ValueError("give exactly one of 'text' or 'sections'")
        return self
