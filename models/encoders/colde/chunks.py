"""CoLDE's tokenizer side: texts to chunks of token ids, and chunks to a `ChunkBatch`.

A chunk holds at most `capacity` content tokens (`max_tokens` less the special tokens the
tokenizer adds), and goes to the backbone as `[CLS] chunk [SEP]` (or `<s> chunk </s>`).

Dimensions: n chunks, T tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedTokenizerBase

from docsim.models.encoders.colde.model import ChunkBatch, ColdeConfig
from docsim.models.inference.tokens import content_offsets


class ChunkTokenizer:
    """A Hugging Face tokenizer cutting texts into CoLDE's chunks."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, config: ColdeConfig) -> None:
        self.tokenizer = tokenizer
        self.max_tokens = config.max_tokens
        self.max_chunks = config.max_chunks

    @property
    def capacity(self) -> int:
        """The most content tokens of one chunk (special tokens excluded)."""
        return self.max_tokens - int(self.tokenizer.num_special_tokens_to_add(pair=False))

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, without special tokens and not truncated."""
        ids: list[list[int]] = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return ids

    def offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Character spans of each text's content tokens."""
        return content_offsets(self.tokenizer, texts)

    def split(self, ids: list[int], max_chunks: int | None = None) -> list[list[int]]:
        """`ids` cut into chunks of `capacity` (one empty chunk for no ids), at most
        `max_chunks` of them (and never more than the model's `max_chunks`)."""
        size = self.capacity
        chunks = [ids[i : i + size] for i in range(0, max(len(ids), 1), size)]
        return chunks[: min(max_chunks or self.max_chunks, self.max_chunks)]

    def section_chunks(self, text: str, max_chunks: int | None = None) -> list[list[int]]:
        """The chunks of one section's text (see `split`)."""
        return self.split(self.tokenizer(text, add_special_tokens=False)["input_ids"], max_chunks)

    def batch(
        self, chunks: Sequence[Sequence[int]], sections: Sequence[int], positions: Sequence[int]
    ) -> ChunkBatch:
        """Chunks (content ids) with special tokens added, padded, on the CPU; each chunk's
        section and position come along."""
        with_special = [with_special_tokens(self.tokenizer, c) for c in chunks]
        longest = max(len(c) for c in with_special)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(chunks), longest), pad, dtype=torch.long)  # (n, T)
        mask = torch.zeros((len(chunks), longest), dtype=torch.long)  # (n, T)
        for i, c in enumerate(with_special):
            input_ids[i, : len(c)] = torch.tensor(c)
            mask[i, : len(c)] = 1
        return ChunkBatch(
            input_ids=input_ids,
            attention_mask=mask,
            sections=torch.tensor(list(sections)),
            positions=torch.tensor(list(positions)),
        )


def with_special_tokens(tokenizer: PreTrainedTokenizerBase, ids: Sequence[int]) -> list[int]:
    """`[CLS] ids [SEP]` (or `<s> ids </s>`), as the tokenizer would add them."""
    first = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    last = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    return (
        [t for t in (first,) if t is not None] + list(ids) + [t for t in (last,) if t is not None]
    )
