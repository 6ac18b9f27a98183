"""HTML pages: `h1`-`h6` start sections; paragraphs are the innermost block elements (`p`,
`li`, `blockquote`, `pre`, table rows, a `div` holding text but no other block), in document
order; a table row is one paragraph (cells joined by " | "). Scripts, styles, navigation,
asides and forms are dropped. Parsed by lxml, which reads the page's declared encoding. Text
that follows a block inside the same container (a `tail`) is not kept."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.readers.budget import OverBudgetError, ReadBudget
from docsim.indexer.text.readers.registry import FileLimits, Reader, register
from docsim.indexer.text.readers.sniff import FileFormat, looks_like_html, sniff
from docsim.indexer.text.readers.structured import clean, structured_document

if TYPE_CHECKING:  # lxml is imported when a page is read
    from lxml.html import HtmlElement

HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
DROPPED = {"script", "style", "noscript", "template", "nav", "aside", "form", "svg", "iframe"}
BLOCKS = {
    "p", "li", "blockquote", "pre", "dd", "dt", "tr", "figcaption", "caption", "address",
    "div", "section", "article", "main", "header", "footer", "body", "table", "tbody",
}  # fmt: skip
CHECK_EVERY = 4096  # elements read between checkpoints


def html_document(
    doc_id: str, raw: bytes, metadata: dict[str, Any], limits: FileLimits | None = None
) -> SourceDocument | Skipped:
    """The page whose file content is `raw`. The text it yields is counted as it is taken
    (`readers.budget`: a row of nested tables holds their text again, once per level): a page
    whose text passes `limits.max_characters` is skipped as soon as it does."""
    import lxml.etree
    import lxml.html

    ref = str(metadata.get("source", doc_id))
    try:
        root = lxml.html.document_fromstring(raw)
    except (lxml.etree.ParserError, ValueError) as error:
        return Skipped(ref, f"unreadable HTML: {error}")
    for element in root.xpath("//*[self::" + " or self::".join(sorted(DROPPED)) + "]"):
        element.drop_tree()
    budget = ReadBudget.of(limits or FileLimits())
    try:
        title = budget.take_text(clean(root.findtext(".//title") or ""))
        sections = _sections(root, budget)
    except OverBudgetError as error:
        return Skipped(ref, str(error), over_limit=True)
    title = title or next((heading for heading, _ in sections if heading), "")
    return structured_document(doc_id, title, sections, metadata)


def _sections(root: HtmlElement, budget: ReadBudget) -> list[tuple[str, list[str]]]:
    """The page's (heading, paragraphs) sections, each text counted by `budget`."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for number, element in enumerate(root.iter()):
        if number % CHECK_EVERY == 0:
            budget.checkpoint()
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in HEADINGS:
            heading = budget.take_text(clean(element.text_content()))
            if heading:
                sections.append((heading, []))
        elif tag == "tr":  # a table row is one paragraph, its cells apart
            cells = [clean(c.text_content()) for c in element if c.tag in ("td", "th")]
            sections[-1][1].append(budget.take_text(" | ".join(c for c in cells if c)))
        elif tag in BLOCKS and _inside_row(element):
            continue  # a block inside a table cell belongs to its row
        elif tag in BLOCKS and not _holds_blocks(element):
            sections[-1][1].append(budget.take_text(element.text_content()))
        elif tag in BLOCKS and clean(element.text or ""):  # text before its first block
            sections[-1][1].append(budget.take_text(element.text))
    return sections


def _holds_blocks(element: HtmlElement) -> bool:
    """Whether a block, heading or table row lies inside `element` (then they are the
    paragraphs)."""
    return any(
        isinstance(child.tag, str)
        and (child.tag in BLOCKS or child.tag in HEADINGS or child.tag == "tr")
        for child in element.iterdescendants()
    )


def _inside_row(element: HtmlElement) -> bool:
    return any(parent.tag == "tr" for parent in element.iterancestors())


HTML_SUFFIXES = (".html", ".htm", ".xhtml")


def _is_html(data: bytes, suffix: str) -> bool:
    """An HTML document, or a fragment without `<html>` whose name says HTML."""
    if looks_like_html(data):
        return True
    return suffix in HTML_SUFFIXES and sniff(data) is FileFormat.text


HTML = register(
    Reader(
        "html",
        detects=_is_html,
        read=lambda doc_id, data, metadata, limits: html_document(
            doc_id, data, {**metadata, "format": "html"}, limits
        ),
        order=30,
        suffixes=HTML_SUFFIXES,
    )
)
