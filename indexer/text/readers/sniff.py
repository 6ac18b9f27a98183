"""A file's format, told by its first bytes rather than its name."""

from __future__ import annotations

import io
import re
import zipfile
from enum import Enum

HEAD_BYTES = 4096
_HTML = re.compile(rb"^\s*(<!--.*?-->\s*)*<(!doctype\s+html|html|head|body)[\s>]", re.I | re.S)
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # legacy Office files, and encrypted OOXML


# The byte order marks of UTF-32 and UTF-16 text, with the codec that reads it (UTF-32's
# first: UTF-32 LE's mark starts with UTF-16 LE's). Such text holds NUL bytes, yet is text.
UNICODE_MARKS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


class FileFormat(str, Enum):
    text = "text"
    html = "html"
    docx = "docx"
    pdf = "pdf"
    ole = "ole"  # a legacy .doc, or a password-protected Word file
    zip = "zip"  # a zip archive that is not a Word document
    binary = "binary"


def looks_like_html(head: bytes) -> bool:
    """Whether a file's first bytes open an HTML document (`<html>`, `<!doctype html>`...)."""
    return bool(_HTML.match(head[:HEAD_BYTES].removeprefix(b"\xef\xbb\xbf")))


def sniff(data: bytes) -> FileFormat:
    """The format of a file's content `data`."""
    head = data[:HEAD_BYTES]
    if head.startswith(b"%PDF-"):
        return FileFormat.pdf
    if head.startswith(_OLE):
        return FileFormat.ole
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = set(archive.namelist())
        except zipfile.BadZipFile:
            return FileFormat.zip
        return FileFormat.docx if "word/document.xml" in names else FileFormat.zip
    if looks_like_html(head):
        return FileFormat.html
    if b"\x00" in head and not any(head.startswith(mark) for mark, _ in UNICODE_MARKS):
        return FileFormat.binary
    return FileFormat.text
