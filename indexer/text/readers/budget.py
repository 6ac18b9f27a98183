"""What reading one file may cost, counted while it is read: the bytes its compressed parts
inflate to (`FileLimits.max_inflated_bytes`), and the characters of text taken from it
(`FileLimits.max_characters`). A reader takes every inflated chunk and every text it keeps
from its `ReadBudget`, which raises `OverBudgetError` (its message naming the setting) as soon
as a count passes its limit: a compression bomb is stopped after the limit's bytes, never
inflated whole. Between pages and archive members a reader calls `checkpoint`, where the
request it works for may be stopped at its deadline (`models.inference.pacing`: a search slot's
hook)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from docsim.indexer.text.readers.registry import INFLATED_SETTING, FileLimits
from docsim.models.inference.pacing import before_batch

CHUNK = 1 << 16  # inflated at a time, then counted
CHECKPOINT_BYTES = 4 << 20  # inflated between two checkpoints (`ReadBudget.checkpoint`)


class OverBudgetError(Exception):
    """A file that passed a limit while it was read; the message names the limit's setting."""


@dataclass
class ReadBudget:
    """One file's counts against its limits (see the module)."""

    max_inflated: int
    max_characters: int
    characters_setting: str
    inflated: int = 0
    characters: int = 0

    @classmethod
    def of(cls, limits: FileLimits) -> ReadBudget:
        return cls(limits.max_inflated_bytes, limits.max_characters, limits.characters_setting)

    def take_inflated(self, size: int) -> None:
        """Count `size` more bytes inflated.

        Raises:
            OverBudgetError: the file's inflated bytes passed their limit.
        """
        self.inflated += size
        if self.inflated > self.max_inflated:
            raise self._over_inflated("its compressed parts inflate to more than")
        if self.inflated // CHECKPOINT_BYTES != (self.inflated - size) // CHECKPOINT_BYTES:
            self.checkpoint()  # a long inflation yields and stops at its deadline too

    def check_declared(self, size: int) -> None:
        """Refuse a file whose headers declare `size` bytes inflated, more than the limit,
        before anything is inflated.

        Raises:
            OverBudgetError: `size` is over the limit.
        """
        if size > self.max_inflated:
            raise self._over_inflated(f"its parts declare {size:,} bytes inflated, more than")

    def _over_inflated(self, what: str) -> OverBudgetError:
        return OverBudgetError(
            f"too large once inflated: {what} {self.max_inflated:,} bytes (the limit, "
            f"{INFLATED_SETTING}): a compression bomb?"
        )

    def take_characters(self, count: int) -> None:
        """Count `count` more characters of text read.

        Raises:
            OverBudgetError: the file's text passed its limit.
        """
        self.characters += count
        if self.characters > self.max_characters:
            raise OverBudgetError(
                f"too long: more than {self.max_characters:,} characters of text (the limit, "
                f"{self.characters_setting})"
            )

    def take_text(self, text: str) -> str:
        """`text`, counted (`take_characters`)."""
        self.take_characters(len(text))
        return text

    @staticmethod
    def checkpoint() -> None:
        """Between pages or members: the request reading the file may stop here (its
        deadline passed) or yield its slot to others (`models.inference.pacing`)."""
        before_batch(0)

    def inflate(self, data: bytes) -> bytes:
        """The zlib stream `data` inflated as `zlib.decompress` would, counted chunk by chunk.

        Raises:
            zlib.error: corrupt or incomplete data.
            OverBudgetError: it inflates past the limit (it is inflated no further).
        """
        inflater = zlib.decompressobj()
        parts = []
        pending = data
        while not inflater.eof:
            part = inflater.decompress(pending, CHUNK)
            pending = inflater.unconsumed_tail
            if not part and not pending:
                raise zlib.error("incomplete or truncated stream")
            self.take_inflated(len(part))
            parts.append(part)
        return b"".join(parts)

    def inflate_leniently(self, data: bytes) -> bytes:
        """`data` inflated as pdfminer inflates a stream whose checksum is corrupt (its
        `decompress_corrupted`): byte by byte, an error in the last 3 bytes (the checksum)
        ignored; counted as it goes.

        Raises:
            zlib.error: corrupt before its checksum.
            OverBudgetError: it inflates past the limit.
        """
        inflater = zlib.decompressobj()
        parts = []
        for at in range(len(data)):
            try:
                part = inflater.decompress(data[at : at + 1])
            except zlib.error:
                if at < len(data) - 3:
                    raise
                break
            self.take_inflated(len(part))
            parts.append(part)
        return b"".join(parts)

    def counted(self, chunks: Iterator[bytes]) -> bytes:
        """The chunks a decoder yields, joined, each counted as it comes."""
        parts = []
        for chunk in chunks:
            self.take_inflated(len(chunk))
            parts.append(chunk)
        return b"".join(parts)

    def read_all(self, member: IO[bytes]) -> int:
        """Read an archive member to its end, counting its bytes, keeping none: what it
        truly inflates to, whatever its header declares. Returns its size."""
        size = 0
        while chunk := member.read(CHUNK):
            self.take_inflated(len(chunk))
            size += len(chunk)
        return size
