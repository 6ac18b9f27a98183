"""pdfminer held to a file's `ReadBudget`: every stream it decodes is counted as it inflates.

pdfminer decodes a stream (`PDFStream.decode`) with the decoders `pdfminer.pdftypes` names:
`zlib.decompress` (FlateDecode, and `decompress_corrupted` when the checksum is bad),
`lzwdecode`, `rldecode`, `ascii85decode`, `asciihexdecode` and `ccittfaxdecode`. Those names
are the one point where pdfminer inflates data, and `budgeted` replaces them there, once:
while a thread reads a file under `budgeted(budget)`, Flate inflates in chunks (`ReadBudget.
inflate`) and LZW and RunLength count each piece as they produce it, so that a stream that
inflates past the limit stops there; the others expand at most 4 times and are counted when
done. Other threads, and code outside the block, decode as pdfminer does.

`CountingAggregator` is pdfminer's page aggregator that also counts the text of each
character it lays out, and gives the request its checkpoint every `CHECK_EVERY` characters:
one page cannot hold more text than the limit, however its fonts map their codes."""

from __future__ import annotations

import contextlib
import io
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from pdfminer import pdftypes
from pdfminer.converter import PDFPageAggregator
from pdfminer.layout import LTChar
from pdfminer.lzw import LZWDecoder

from docsim.indexer.text.readers.budget import ReadBudget

CHECK_EVERY = 4096  # characters laid out between checkpoints

_local = threading.local()
_INSTALL = threading.Lock()
_ORIGINAL: dict[str, Callable[..., bytes]] = {}


@contextlib.contextmanager
def budgeted(budget: ReadBudget) -> Iterator[None]:
    """Count what pdfminer decodes on this thread within the block against `budget`."""
    _install()
    before = getattr(_local, "budget", None)
    _local.budget = budget
    try:
        yield
    finally:
        _local.budget = before


def _current() -> ReadBudget | None:
    budget: ReadBudget | None = getattr(_local, "budget", None)
    return budget


class _Zlib:
    """Stands for the `zlib` module in `pdfminer.pdftypes`."""

    error = zlib.error
    decompressobj = staticmethod(zlib.decompressobj)

    @staticmethod
    def decompress(data: bytes) -> bytes:
        budget = _current()
        return zlib.decompress(data) if budget is None else budget.inflate(data)


def _decompress_corrupted(data: bytes) -> bytes:
    budget = _current()
    if budget is None:
        return _ORIGINAL["decompress_corrupted"](data)
    return budget.inflate_leniently(data)


def _lzwdecode(data: bytes) -> bytes:
    budget = _current()
    if budget is None:
        return _ORIGINAL["lzwdecode"](data)
    return budget.counted(LZWDecoder(io.BytesIO(data)).run())


def _rldecode(data: bytes) -> bytes:
    """RunLength (PDF Reference 1.4, 3.3.4): a length byte, then 1 to 128 bytes copied
    (length 0-127) or one byte repeated 257 - length times (129-255); 128 ends the data.
    Each run is counted before it is kept."""
    budget = _current()
    if budget is None:
        return _ORIGINAL["rldecode"](data)
    out = bytearray()
    at = 0
    while at < len(data) and data[at] != 128:
        length = data[at]
        if length < 128:
            run = data[at + 1 : at + 2 + length]
            at += 2 + length
        else:
            run = data[at + 1 : at + 2] * (257 - length)
            at += 2
        budget.take_inflated(len(run))
        out += run
    return bytes(out)


def _counted_when_done(name: str) -> Callable[..., bytes]:
    def decode(*args: Any) -> bytes:
        data = _ORIGINAL[name](*args)
        budget = _current()
        if budget is not None:
            budget.take_inflated(len(data))
        return data

    return decode


def _install() -> None:
    """Put the counting decoders in `pdfminer.pdftypes` (once)."""
    with _INSTALL:
        if _ORIGINAL:
            return
        for name in (
            "decompress_corrupted",
            "lzwdecode",
            "rldecode",
            "ascii85decode",
            "asciihexdecode",
            "ccittfaxdecode",
        ):
            _ORIGINAL[name] = getattr(pdftypes, name)
        replacements: dict[str, object] = {
            "zlib": _Zlib(),
            "decompress_corrupted": _decompress_corrupted,
            "lzwdecode": _lzwdecode,
            "rldecode": _rldecode,
            **{
                name: _counted_when_done(name)
                for name in ("ascii85decode", "asciihexdecode", "ccittfaxdecode")
            },
        }
        for name, replacement in replacements.items():
            setattr(pdftypes, name, replacement)


class CountingAggregator(PDFPageAggregator):
    """pdfminer's page aggregator, each character's text counted against `budget`."""

    def __init__(self, budget: ReadBudget, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.budget = budget
        self._since_check = 0

    def render_char(self, *args: Any, **kwargs: Any) -> float:
        advance: float = super().render_char(*args, **kwargs)
        laid_out = self.cur_item._objs[-1]  # the LTChar just added
        self.budget.take_characters(len(laid_out.get_text()) if isinstance(laid_out, LTChar) else 1)
        self._since_check += 1
        if self._since_check >= CHECK_EVERY:
            self._since_check = 0
            self.budget.checkpoint()
        return advance
