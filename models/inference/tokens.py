"""The tokenizer side of the trained encoders: texts in, padded token id tensors out.

No `nn.Module` holds a tokenizer. Samplers (training) and encoder wrappers (inference) turn
texts into these batches, and whoever runs the model moves them to its device.

Dimensions: N texts, T tokens.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

import torch
from transformers import PreTrainedTokenizerBase


class DeviceBatch(Protocol):
    """A training batch: tensors that move to a device together."""

    def to(self, device: torch.device) -> Self:
        """The same batch with every tensor on `device`."""
        ...


@dataclass(frozen=True)
class TokenBatch:
    """Token ids of N texts, padded to the longest."""

    input_ids: torch.Tensor  # (N, T) int64, special tokens included
    attention_mask: torch.Tensor  # (N, T) int64, 1 for real tokens

    def to(self, device: torch.device) -> TokenBatch:
        return TokenBatch(self.input_ids.to(device), self.attention_mask.to(device))


class TextTokenizer:
    """A Hugging Face tokenizer that truncates to `max_tokens` (special tokens included)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_tokens: int) -> None:
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens

    def __call__(self, texts: Sequence[str]) -> TokenBatch:
        """`texts` padded to the longest, on the CPU."""
        encoded = self.tokenizer(
            list(texts),
            truncation=True,
            max_length=self.max_tokens,
            padding=True,
            return_tensors="pt",
            return_token_type_ids=False,
        )
        return TokenBatch(encoded["input_ids"], encoded["attention_mask"])


class HasParameters(Protocol):
    """A module, as far as finding its device goes."""

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...


def truncated_ids(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int
) -> list[list[int]]:
    """Each text's token ids with special tokens, truncated to `max_length`, not padded."""
    encoded = tokenizer(
        list(texts),
        truncation=True,
        max_length=max_length,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    ids: list[list[int]] = encoded["input_ids"]
    return ids


def content_offsets(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]
) -> list[list[tuple[int, int]]]:
    """Character spans of each text's content tokens (no special tokens); a fast tokenizer."""
    return content_tokens(tokenizer, texts)[1]


def content_tokens(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]
) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    """Each text's content token ids (no special tokens, not truncated) and their character
    spans, from one call of a fast tokenizer's Rust backend (`untruncated`): the Python
    wrapper's conversion of every text's encoding took a third of a block's tokenising."""
    if not texts:
        return [], []
    encodings = untruncated(tokenizer).encode_batch(list(texts), add_special_tokens=False)
    return [e.ids for e in encodings], [e.offsets for e in encodings]


_UNTRUNCATED: weakref.WeakKeyDictionary[PreTrainedTokenizerBase, Any] = weakref.WeakKeyDictionary()
_UNTRUNCATED_LOCK = threading.Lock()


def untruncated(tokenizer: PreTrainedTokenizerBase) -> Any:
    """A copy of a fast tokenizer's backend (`tokenizers.Tokenizer`) that neither truncates
    nor pads, made once per tokenizer. A copy, because the wrapper sets its own backend's
    truncation for each call and leaves it set."""
    with _UNTRUNCATED_LOCK:
        backend = _UNTRUNCATED.get(tokenizer)
        if backend is None:
            backend = copy.deepcopy(tokenizer.backend_tokenizer)
            backend.no_truncation()
            backend.no_padding()
            _UNTRUNCATED[tokenizer] = backend
        return backend


def module_device(module: HasParameters) -> torch.device:
    """The device of a module's parameters (the CPU for a module without any)."""
    first = next(module.parameters(), None)
    return first.device if first is not None else torch.device("cpu")
