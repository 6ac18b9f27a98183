"""A document from the sections and paragraphs a file format gives."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from docsim.indexer.text.documents import SectionSource, Skipped, SourceDocument

_SPACE = re.compile(r"\s+")


def clean(text: str) -> str:
    """One paragraph's text on one line: runs of white space (newlines included) as one."""
    return _SPACE.sub(" ", text.replace("\x00", "")).strip()


def structured_document(
    doc_id: str,
    title: str,
    sections: Sequence[tuple[str, Sequence[str]]],
    metadata: dict[str, Any],
) -> SourceDocument | Skipped:
    """`sections` as (heading, paragraphs): each paragraph one line, paragraphs apart by a
    blank line, so that the splitter finds the author's paragraphs again; empty paragraphs and
    sections without any are dropped."""
    kept = []
    for heading, paragraphs in sections:
        texts = [t for t in (clean(p) for p in paragraphs) if t]
        if texts:
            kept.append((clean(heading), "\n\n".join(texts)))
    if not kept:
        return Skipped(str(metadata.get("source", doc_id)), "no text found")
    return sectioned_document(doc_id, clean(title) or doc_id, kept, metadata)


def sectioned_document(
    doc_id: str, title: str, sections: list[tuple[str, str]], metadata: dict[str, Any]
) -> SourceDocument | Skipped:
    """Join explicit sections into one stored text (`# title`, then `## section` blocks)."""
    parts = [f"# {title}"]
    layout: list[SectionSource] = []
    offset = len(parts[0])
    for section_title, body in sections:
        body = body.replace("\r\n", "\n").strip()
        heading = f"## {section_title}" if section_title else ""
        block = f"{heading}\n\n{body}" if heading else body
        start = offset + 2 + (len(heading) + 2 if heading else 0)
        parts.append(block)
        offset += 2 + len(block)
        layout.append(SectionSource(title=section_title, start=start, end=start + len(body)))
    if not any(body.strip() for _, body in sections):
        return Skipped(doc_id, "all sections are empty")
    return SourceDocument(
        doc_id=doc_id,
        title=title,
        text="\n\n".join(parts),
        metadata=metadata,
        sections=tuple(layout),
    )
