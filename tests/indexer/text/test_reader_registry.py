"""The readers' registry: every format registers itself from its own module, they are asked in
order, and a new format is one `register` call that `read_document` then uses."""

from __future__ import annotations

from typing import Any

import pytest

from docsim.indexer.text.corpus import read_document
from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.readers import registry
from docsim.indexer.text.readers.registry import FileLimits, Reader, reader_for, readers

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def test_the_shipped_formats_register_themselves_in_order() -> None:
    assert [r.name for r in readers()] == ["pdf", "docx", "html", "text"]
    assert reader_for(b"%PDF-1.7 ...", ".txt").name == "pdf"  # the content, not the name
    assert reader_for(b"<p>a fragment</p>", ".htm").name == "html"
    assert reader_for(b"<p>a fragment</p>", ".txt").name == "text"
    assert reader_for(b"\x00\x01binary", "") is None


def test_a_new_format_is_one_register_call(monkeypatch: pytest.MonkeyPatch) -> None:
    readers()  # the shipped ones loaded first
    monkeypatch.setattr(registry, "_READERS", dict(registry._READERS))  # noqa: SLF001

    def rtf(doc_id: str, data: bytes, metadata: dict[str, Any], _limits: FileLimits) -> Any:
        text = data.decode("ascii").removeprefix("{\\rtf1 ").removesuffix("}")
        return SourceDocument(doc_id=doc_id, title=doc_id, text=text, metadata=metadata)

    registry.register(Reader("rtf", lambda data, _s: data.startswith(b"{\\rtf1"), rtf, order=15))
    read = read_document("memo.rtf", b"{\\rtf1 The court held.}", {"source": "memo.rtf"})
    assert isinstance(read, SourceDocument) and read.text == "The court held."
    assert isinstance(read_document("memo.rtf", b"\x00\x01", {}), Skipped)
    with pytest.raises(ValueError, match="registered already"):
        registry.register(Reader("rtf", lambda _d, _s: False, rtf, order=1))
