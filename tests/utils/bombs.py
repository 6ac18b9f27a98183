"""Hostile document files, built byte by byte for the tests of the reading budget: PDFs whose
streams inflate far past their size or whose pages go on and on, and Word files padded to hide
their ratio or holding archives of their own. Each is small to build and to send; what it
inflates to is up to the caller."""

from __future__ import annotations

import io
import os
import zipfile
import zlib

FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def flate(size: int, byte: bytes = b" ") -> bytes:
    """A zlib stream that inflates to `size` bytes of `byte`, built a MiB at a time."""
    deflater = zlib.compressobj(9)
    block = byte * 2**20
    parts = [deflater.compress(block) for _ in range(size // len(block))]
    parts.append(deflater.compress(byte * (size % len(block))))
    return b"".join(parts) + deflater.flush()


def stream(data: bytes, attributes: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n" % (len(data), attributes) + data + b"\nendstream"


def raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of `objects` (object 1 is the catalog), with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def pages_pdf(contents: list[bytes], declared: int | None = None) -> bytes:
    """A PDF with one page per content stream (each a full stream object, `stream(...)`) in
    Helvetica; its page tree declares `declared` pages (default: as many as it has)."""
    first_page = 4  # 1 catalog, 2 page tree, 3 font
    kids = b" ".join(b"%d 0 R" % (first_page + 2 * i) for i in range(len(contents)))
    count = len(contents) if declared is None else declared
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count),
        FONT,
    ]
    for i, content in enumerate(contents):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % (first_page + 2 * i + 1)
        )
        objects.append(content)
    return raw_pdf(objects)


def text_page(text: str) -> bytes:
    """A page's content stream showing `text` in lines of 80 characters, from the middle of
    the page down (away from the edges, where repeated lines are running headers)."""
    lines = [text[i : i + 80] for i in range(0, len(text), 80)]
    shown = b" ".join(b"(%s) Tj T*" % line.encode("latin-1") for line in lines)
    return stream(b"BT /F1 9 Tf 11 TL 36 600 Td " + shown + b" ET")


def flate_bomb_page(inflated: int) -> bytes:
    """A page whose content stream (FlateDecode) inflates to `inflated` bytes of spaces."""
    return stream(flate(inflated), b"/Filter /FlateDecode")


def shared_content_pdf(pages: int, text: str) -> bytes:
    """A PDF of `pages` pages that all show the same content stream (one object): small to
    build and to send, each page laid out again when read."""
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        FONT,
        text_page(text),
    ]
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 3 0 R >> >> >>"
    ] * pages
    return raw_pdf(objects)


def word_file(paragraphs: list[str], extra: dict[str, tuple[bytes, int]] | None = None) -> bytes:
    """A Word file (python-docx's template) whose body holds `paragraphs`, written into its
    document.xml directly (python-docx adds a paragraph in about 0.3 ms), plus the `extra`
    members (name -> (content, zipfile compression))."""
    import docx

    saved = io.BytesIO()
    docx.Document().save(saved)
    body = "".join(f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>" for text in paragraphs)
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(saved.getvalue())) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        for info in source.infolist():
            content = source.read(info.filename)
            if info.filename == "word/document.xml":
                content = content.replace(b"<w:body>", b"<w:body>" + body.encode(), 1)
            archive.writestr(info.filename, content)
        for name, (content, compression) in (extra or {}).items():
            archive.writestr(name, content, compress_type=compression)
    return out.getvalue()


def padded_word_bomb(paragraphs: int, padding: int) -> bytes:
    """Issue 68's Word bomb: a document.xml of `paragraphs` identical paragraphs (deflated
    far beyond any real ratio) beside `padding` bytes of random data stored uncompressed,
    which bring the archive's overall ratio down to an ordinary one."""
    return word_file(
        ["Coffee beans roast slowly in the pan. " * 3] * paragraphs,
        {"word/media/padding.bin": (os.urandom(padding), zipfile.ZIP_STORED)},
    )


def nested_archive(inflated: int) -> bytes:
    """A zip archive holding one member of `inflated` spaces (deflated: a few KiB)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("sheet.xml", b" " * inflated)
    return out.getvalue()


def ratio(data: bytes) -> float:
    """The archive's overall ratio, inflated / compressed, as its headers declare them."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
    return sum(i.file_size for i in infos) / sum(i.compress_size for i in infos)
