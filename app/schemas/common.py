"""What every request body shares: unknown fields refused, documents as text or sections."""

from __future__ import annotations

import time
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from docsim.indexer.api import has_nul


def took_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()` reading), as responses report."""
    return round((time.perf_counter() - started) * 1000, 2)


def has_control_characters(value: str) -> bool:
    """Whether `value` holds a control character (C0, DEL or C1: newline, tab, ESC, ...)."""
    return any(unicodedata.category(c) == "Cc" for c in value)


def plain_id(value: str) -> str:
    """A document id: printable, so that it can be written in a URL and in a log line, and
    not `.` or `..`, which a URL's path cannot name (clients and proxies resolve them away)."""
    if has_control_characters(value):
        raise ValueError(
            "a document id must not contain control characters (newline, tab, ESC, ...)"
        )
    if value in DOT_SEGMENTS:
        raise ValueError(f"{value!r} cannot be a document id: a URL's path cannot name it")
    return value


DOT_SEGMENTS = (".", "..")


DocumentIdText = Annotated[str, Field(min_length=1, max_length=512), AfterValidator(plain_id)]


class RequestModel(BaseModel):
    """A request body: no string in it may hold a NUL character (PostgreSQL text cannot store
    one, and no document needs it), which is a 422, not a database error; a field the model
    does not have is a 422 too, not ignored."""

    model_config = ConfigDict(extra="forbid")

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

    id: DocumentIdText | None = None
    title: str = ""
    text: str | None = None
    sections: list[SectionIn] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _text_or_sections(self) -> DocumentIn:
        if (self.text is None) == (self.sections is None):
            raise ValueError("give exactly one of 'text' or 'sections'")
        return self
