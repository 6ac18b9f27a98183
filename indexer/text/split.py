"""Pure splitting: a `SourceDocument` becomes sections -> paragraphs -> sentences.

Rules (DESIGN.md section 2):
- Sections come from the corpus when it gives them (JSON `sections`); otherwise a Markdown
  heading (`# ...`) or a short title-like line standing on its own starts a section. Text
  before the first heading forms an untitled section.
- Blank lines separate paragraphs; a section body with no blank line has one paragraph per
  line (the AILA layout).
- Sentences come from the Punkt splitter, inside a paragraph (never across paragraphs); a
  piece without a letter or digit ("....", "* * *") is not a sentence.
- A paragraph of more than `MAX_PARAGRAPH_SENTENCES` sentences (text without line breaks) is
  cut into runs of about `FALLBACK_PARAGRAPH_SENTENCES` sentences, so that no document is one
  paragraph of thousands of sentences (6 of 22,766 AILA paragraphs have more than 32).
All spans are stripped of surrounding whitespace and index the document's full text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from docsim.indexer.errors import EmptyDocumentError
from docsim.indexer.text.documents import Document, Paragraph, Section, Sentence, SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter

_MD_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(?P<title>.*?)[ \t#]*$")
_BLANK_LINE = re.compile(r"\n[ \t]*\r?\n")
_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\r?\n)+")
_TERMINAL = ".,;:!?\"'”’)]"
_MAX_HEADING_CHARS = 300  # a longer line is no heading (and the heading pattern stays linear)
MAX_PARAGRAPH_SENTENCES = 32
FALLBACK_PARAGRAPH_SENTENCES = 8


def split_document(source: SourceDocument, splitter: SentenceSplitter) -> Document:
    """Split a source document into its section/paragraph/sentence tree.

    Raises:
        EmptyDocumentError: no sentence was found.
    """
    text = source.text
    regions = (
        [(s.title, s.start, s.end) for s in source.sections]
        if source.sections is not None
        else list(_detect_sections(text, source.body_start))
    )
    sections: list[Section] = []
    for title, start, end in regions:
        paragraphs = tuple(_paragraphs(text, start, end, splitter))
        if paragraphs:
            sections.append(
                Section(
                    title=title,
                    start=paragraphs[0].start,
                    end=paragraphs[-1].end,
                    paragraphs=paragraphs,
                )
            )
    if not sections:
        raise EmptyDocumentError(f"document {source.doc_id!r} has no sentences")
    return Document(
        doc_id=source.doc_id,
        title=source.title,
        text=text,
        metadata=dict(source.metadata),
        sections=tuple(sections),
    )


def _lines(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each line in text[start:end], without the newline."""
    pos = start
    while pos < end:
        newline = text.find("\n", pos, end)
        line_end = end if newline < 0 else newline
        yield pos, line_end
        pos = line_end + 1


def is_title_like(line: str) -> bool:
    """A short line that reads as a heading: no closing punctuation, capitalised words."""
    words = line.split()
    if not 1 <= len(words) <= 10 or len(line) > 80 or line[-1] in _TERMINAL:
        return False
    if not line[0].isupper() and not line[0].isdigit():
        return False
    letters = [c for c in line if c.isalpha()]
    if not letters:
        return False
    if all(c.isupper() for c in letters):
        return True
    return all(w[0].isupper() or not w[0].isalpha() for w in words if len(w) >= 4)


def _detect_sections(text: str, body_start: int) -> Iterator[tuple[str, int, int]]:
    """(title, body start, body end) for each section found by headings."""
    end = len(text)
    blank_line_layout = _BLANK_LINE.search(text, body_start) is not None
    lines = list(_lines(text, body_start, end))
    title, start = "", body_start
    for i, (a, b) in enumerate(lines):
        line = text[a:b].strip()
        if not line:
            continue
        markdown = _MD_HEADING.match(text[a:b]) if b - a <= _MAX_HEADING_CHARS else None
        heading = markdown.group("title").strip() if markdown else None
        if heading is None and is_title_like(line) and i + 1 < len(lines):
            # In blank-line text a heading stands alone between blank lines.
            alone = not blank_line_layout or (
                (i == 0 or not text[lines[i - 1][0] : lines[i - 1][1]].strip())
                and not text[lines[i + 1][0] : lines[i + 1][1]].strip()
            )
            heading = line if alone else None
        if heading is not None:
            yield title, start, a
            title, start = heading, b
    yield title, start, end


def _paragraphs(text: str, start: int, end: int, splitter: SentenceSplitter) -> Iterator[Paragraph]:
    body = text[start:end]
    if _BLANK_LINE.search(body):
        pieces, pos = [], 0
        for match in _PARAGRAPH_BREAK.finditer(body):
            pieces.append((start + pos, start + match.start()))
            pos = match.end()
        pieces.append((start + pos, end))
    else:
        pieces = list(_lines(text, start, end))
    for a, b in pieces:
        sentences = tuple(
            Sentence(a + s, a + e)
            for s, e in splitter.spans(text[a:b])
            if any(c.isalnum() for c in text[a + s : a + e])  # "...." or "* * *" is no sentence
        )
        for run in _runs(sentences):
            yield Paragraph(start=run[0].start, end=run[-1].end, sentences=run)


def _runs(sentences: tuple[Sentence, ...]) -> list[tuple[Sentence, ...]]:
    """The paragraph's sentences, as one run or, beyond `MAX_PARAGRAPH_SENTENCES`, as balanced
    runs of about `FALLBACK_PARAGRAPH_SENTENCES`."""
    if len(sentences) <= MAX_PARAGRAPH_SENTENCES:
        return [sentences] if sentences else []
    n_runs = -(-len(sentences) // FALLBACK_PARAGRAPH_SENTENCES)
    bounds = [i * len(sentences) // n_runs for i in range(n_runs + 1)]
    return [sentences[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
